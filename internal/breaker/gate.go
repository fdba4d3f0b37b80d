// Package breaker is the circuit breaker per AdCP agent (seller or governance agent): after
// Settings.Failures consecutive transient failures, none begun more than Settings.Window
// after the previous one ended, an agent's breaker opens and no function calls that agent;
// after Settings.Cooldown exactly one probe is let through (half-open, claimed with a
// conditional write); its success closes the breaker, its failure opens it for another
// cool-down. A caller refused while the probe is out is told to try again a few seconds
// after the probe was let through, when its answer is due, not when the probe would count as
// lost.
//
// The breaker lives in the ledger (record.Breaker, one item per agent, every write conditioned
// on the version read), so every function that calls agents shares it. A Gate is the
// adcp.Guard of a function's AdCP client: every exchange with an agent, whichever stage or
// sweep makes it, asks the gate first and reports how it ended. A refused call returns a
// transient *adcp.Error (adcp.CodeAgentUnavailable) wrapping an *adcp.UnavailableError:
// the stages turn it into output the state machine waits on, never into spent retries.
//
// What counts as a failure is the AdCP client's own classification: a call adcp.Decide says
// to retry (timeouts, connection failures, HTTP 429/5xx, an agent's transient AdCP error).
// Any other answer, a refusal included, shows the agent is reachable and closes the breaker.
// Failures of buyflow's own (a credential that could not be read) do not count.
package breaker

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/record"
)

// store keeps the breakers; *ledger.Store satisfies it.
type store interface {
	GetBreaker(ctx context.Context, agentID string) (record.Breaker, error)
	PutBreaker(ctx context.Context, b record.Breaker) (record.Breaker, error)
}

// agentSettings returns an agent's registry settings object (internal/registry Record.Settings).
type agentSettings func(ctx context.Context, agentID string) (json.RawMessage, error)

// maxRaces bounds how often one decision is read again after losing a write to another
// function: each loss means another function moved the breaker, so a few suffice.
const maxRaces = 8

// Gate is the circuit breaker of every agent a function calls; it satisfies adcp.Guard. Safe
// for concurrent use.
type Gate struct {
	store    store
	settings agentSettings
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Metrics receives metrics.AgentUnavailable and metrics.BreakerOpened; nil records nothing.
	Metrics *metrics.Recorder
	// Log defaults to slog.Default().
	Log *slog.Logger
}

var _ adcp.Guard = (*Gate)(nil)

// New returns the gate over store, with each agent's thresholds read from settings (Defaults
// for an agent that sets none or cannot be read).
func New(store store, settings agentSettings) *Gate {
	return &Gate{store: store, settings: settings, Now: time.Now, Log: slog.Default()}
}

// Admit lets a call to agentID through, or refuses it with an *adcp.UnavailableError while
// the agent's breaker is open (or half-open with its probe in flight). When the breaker
// cannot be read the call goes through: the breaker protects sellers, it is not a gate of its
// own (the governance gate stays closed by the stages, whatever the breaker says).
func (g *Gate) Admit(ctx context.Context, agentID string) (func(error), error) {
	s := g.thresholds(ctx, agentID)
	for range maxRaces {
		b, err := g.read(ctx, agentID)
		if err != nil {
			g.Log.WarnContext(ctx, "circuit breaker unreadable, calling anyway", "agent", agentID, "err", err)
			return func(error) {}, nil
		}
		now := g.Now().UTC()
		next, write, v := admit(b, s, now)
		if v == refuse {
			g.Metrics.Count(metrics.AgentUnavailable, metrics.Dims{"Agent": agentID}, 1)
			g.Metrics.Count(metrics.AgentUnavailable, nil, 1)
			at, soon := refusedUntil(b, s, now)
			return nil, &adcp.UnavailableError{Agent: agentID, Since: b.OpenedAt, RetryAt: at, Probing: soon}
		}
		if write {
			if next, err = g.store.PutBreaker(ctx, next); errors.Is(err, record.ErrContention) {
				continue // another function claimed the probe or moved the breaker: decide again
			} else if err != nil {
				g.Log.WarnContext(ctx, "circuit breaker probe not claimed, calling anyway", "agent", agentID, "err", err)
				return func(error) {}, nil
			}
			g.Log.InfoContext(ctx, "circuit breaker half-open: probing", "agent", agentID, "openedAt", next.OpenedAt)
		}
		return func(err error) { g.record(context.WithoutCancel(ctx), agentID, s, v, now, err) }, nil
	}
	g.Log.WarnContext(ctx, "circuit breaker kept changing, calling anyway", "agent", agentID)
	return func(error) {}, nil
}

// record applies the outcome of a call admitted as v at started.
func (g *Gate) record(ctx context.Context, agentID string, s Settings, v verdict, started time.Time, callErr error) {
	transient := transient(callErr)
	for range maxRaces {
		b, err := g.read(ctx, agentID)
		if err != nil {
			g.Log.WarnContext(ctx, "circuit breaker outcome not recorded", "agent", agentID, "err", err)
			return
		}
		now := g.Now().UTC()
		next, write := succeeded(b)
		if transient {
			next, write = failed(b, s, started, now, v, record.Clip(callErr.Error(), 300))
		}
		if !write {
			return
		}
		stored, err := g.store.PutBreaker(ctx, next)
		if errors.Is(err, record.ErrContention) {
			continue
		}
		if err != nil {
			g.Log.WarnContext(ctx, "circuit breaker outcome not recorded", "agent", agentID, "err", err)
			return
		}
		switch {
		case stored.State == record.BreakerOpen && b.State == record.BreakerClosed:
			g.Metrics.Count(metrics.BreakerOpened, metrics.Dims{"Agent": agentID}, 1)
			g.Log.WarnContext(ctx, "circuit breaker opened", "agent", agentID, "failures", stored.Failures, "retryAt", stored.RetryAt, "lastError", stored.LastError)
		case stored.State == record.BreakerOpen:
			g.Log.WarnContext(ctx, "circuit breaker probe failed, open again", "agent", agentID, "retryAt", stored.RetryAt, "lastError", stored.LastError)
		case stored.State == record.BreakerClosed && b.State != record.BreakerClosed:
			g.Log.InfoContext(ctx, "circuit breaker closed", "agent", agentID, "openedAt", b.OpenedAt)
		}
		return
	}
	g.Log.WarnContext(ctx, "circuit breaker outcome not recorded: it kept changing", "agent", agentID)
}

// read returns agentID's breaker, a closed one when none was ever written.
func (g *Gate) read(ctx context.Context, agentID string) (record.Breaker, error) {
	b, err := g.store.GetBreaker(ctx, agentID)
	if errors.Is(err, record.ErrNotFound) {
		return record.Breaker{AgentID: agentID, State: record.BreakerClosed}, nil
	}
	return b, err
}

func (g *Gate) thresholds(ctx context.Context, agentID string) Settings {
	if g.settings == nil {
		return Defaults
	}
	raw, err := g.settings(ctx, agentID)
	if err != nil {
		return Defaults
	}
	s, err := ParseSettings(raw)
	if err != nil {
		// The registry refuses such settings when they are written; a stored one is old.
		g.Log.WarnContext(ctx, "circuit breaker settings ignored", "agent", agentID, "err", err)
		return Defaults
	}
	return s
}

// transient reports whether err is a failure the breaker counts: one the AdCP client says to
// retry (adcp.Decide), other than buyflow's own (a local error, a refusal of the breaker
// itself).
func transient(err error) bool {
	if adcp.Decide(err) != adcp.DecisionRetry {
		return false
	}
	var ae *adcp.Error
	return !errors.As(err, &ae) || ae.Kind != adcp.KindLocal
}

// Unavailable returns the breaker's refusal inside err (a call that was not sent because the
// agent's breaker is open), or nil.
func Unavailable(err error) *adcp.UnavailableError {
	var u *adcp.UnavailableError
	if errors.As(err, &u) {
		return u
	}
	return nil
}
