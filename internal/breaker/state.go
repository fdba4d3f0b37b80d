package breaker

import (
	"time"

	"github.com/buyflow/buyflow/internal/record"
)

// The rules that move a breaker, as pure functions of the stored breaker, the settings and the
// clock: each returns the breaker to write, or write=false when nothing changes (most calls,
// at a closed breaker, write nothing).

// verdict is what admit decided for one call.
type verdict int

const (
	// pass: the breaker is closed; the call goes.
	pass verdict = iota
	// probe: the call goes as the one probe of a half-open breaker, if its write wins.
	probe
	// refuse: the call must not go.
	refuse
)

// admit decides whether a call may go now. An open breaker past its cool-down, or a
// half-open one whose probe was lost, is claimed for this call (state half_open, a new
// ProbeUntil): only the caller whose conditional write wins that claim sends the probe.
func admit(b record.Breaker, s Settings, now time.Time) (next record.Breaker, write bool, v verdict) {
	switch b.State {
	case record.BreakerOpen:
		if now.Before(b.RetryAt) {
			return b, false, refuse
		}
	case record.BreakerHalfOpen:
		if now.Before(b.ProbeUntil) {
			return b, false, refuse
		}
	default:
		return b, false, pass
	}
	b.State, b.ProbeUntil = record.BreakerHalfOpen, now.Add(s.ProbeTimeout)
	return b, true, probe
}

// probeAnswer is how long after it was let through a probe's answer is due from an agent
// that is back (one call, most often get_adcp_capabilities): the waiting buys all wake at the
// cool-down's end, one probes, and the others try again this soon after it.
const probeAnswer = 3 * time.Second

// refusedUntil is when a caller refused by b at now may try again. At an open breaker, the
// end of the cool-down. While the probe is out: probeAnswer after the probe was let through,
// when a successful probe has let everyone through (soon: the caller may wait less than its
// usual interval); refused again after that, the probe is slow or lost, and the caller is
// told the cool-down's end, passed, and waits its usual interval. Never the probe's timeout
// (ProbeUntil, 45 s by default): that left waiting buys behind a probe that succeeded in a
// second. A caller gets at most one short wait per probe, so the waits stay few.
func refusedUntil(b record.Breaker, s Settings, now time.Time) (at time.Time, soon bool) {
	if b.State == record.BreakerHalfOpen {
		if due := b.ProbeUntil.Add(-s.ProbeTimeout).Add(probeAnswer); now.Before(due) {
			return due, true
		}
	}
	return b.RetryAt, false
}

// succeeded records an answer from the agent (any answer that is not a transient failure:
// the agent is reachable): the breaker closes and the count starts again.
func succeeded(b record.Breaker) (next record.Breaker, write bool) {
	if b.State != record.BreakerOpen && b.State != record.BreakerHalfOpen && b.Failures == 0 {
		return b, false
	}
	b.State, b.Failures = record.BreakerClosed, 0
	b.FirstFailureAt, b.LastFailureAt, b.RetryAt, b.ProbeUntil, b.OpenedAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}, time.Time{}
	return b, true
}

// failed records a transient failure of a call admitted as v at started that ended at now.
// At a closed breaker it counts, and opens the breaker at Failures. The streak goes on while
// each failed call began within Window after the previous failure ended, so a call that hangs
// until its timeout (30 s, maybe longer than Window) never takes its own duration out of the
// window: one stream of calls retried after their timeouts opens the breaker as surely as a
// burst of fast 503s. A failed probe opens it again for another cool-down. A failure of a
// call let through before the breaker opened changes nothing: the breaker already knows.
func failed(b record.Breaker, s Settings, started, now time.Time, v verdict, reason string) (next record.Breaker, write bool) {
	switch {
	case v == probe && b.State == record.BreakerHalfOpen:
		b.State, b.RetryAt, b.ProbeUntil, b.LastError = record.BreakerOpen, now.Add(s.Cooldown), time.Time{}, reason
		return b, true
	case b.State == record.BreakerOpen || b.State == record.BreakerHalfOpen:
		return b, false
	}
	if b.Failures == 0 || started.Sub(b.LastFailureAt) > s.Window {
		b.Failures, b.FirstFailureAt, b.LastFailureAt = 0, started, time.Time{}
	}
	b.Failures++
	if now.After(b.LastFailureAt) {
		b.LastFailureAt = now
	}
	b.State, b.LastError = record.BreakerClosed, reason
	if b.Failures >= s.Failures {
		b.State, b.OpenedAt, b.RetryAt, b.Trips = record.BreakerOpen, now, now.Add(s.Cooldown), b.Trips+1
	}
	return b, true
}
