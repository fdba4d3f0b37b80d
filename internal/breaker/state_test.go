package breaker

import (
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/record"
)

var t0 = time.Date(2099, 1, 1, 12, 0, 0, 0, time.UTC)

var tight = Settings{Failures: 3, Window: 10 * time.Second, Cooldown: 30 * time.Second, ProbeTimeout: 40 * time.Second}

// fail records a fast failure (a 503: the call ends as it begins) at t.
func fail(b record.Breaker, t time.Time) record.Breaker {
	b, _ = failed(b, tight, t, t, pass, "503")
	return b
}

func TestFailuresOpenTheBreakerOnlyWhenConsecutiveWithinTheWindow(t *testing.T) {
	b := record.Breaker{AgentID: "s", State: record.BreakerClosed}
	var write bool
	b = fail(b, t0)
	b = fail(b, t0.Add(time.Second))
	if b.State != record.BreakerClosed || b.Failures != 2 {
		t.Fatalf("after 2 failures: %+v", b)
	}
	// A failure begun a whole window after the last one ended starts the count again; one
	// begun exactly at the window's end still counts.
	b = fail(b, t0.Add(12*time.Second))
	if b.State != record.BreakerClosed || b.Failures != 1 || !b.FirstFailureAt.Equal(t0.Add(12*time.Second)) {
		t.Fatalf("failure after the window: %+v", b)
	}
	b = fail(b, t0.Add(22*time.Second))
	if b.Failures != 2 || !b.FirstFailureAt.Equal(t0.Add(12*time.Second)) || !b.LastFailureAt.Equal(t0.Add(22*time.Second)) {
		t.Fatalf("failure at the window's end: %+v", b)
	}
	// A success resets the count.
	b, write = succeeded(b)
	if !write || b.Failures != 0 || !b.LastFailureAt.IsZero() {
		t.Fatalf("success: %+v write=%v", b, write)
	}
	if _, write = succeeded(b); write {
		t.Fatal("a success at a clean closed breaker must write nothing")
	}
	for i := range 3 {
		b = fail(b, t0.Add(30*time.Second+time.Duration(i)*time.Second))
	}
	if b.State != record.BreakerOpen || b.Trips != 1 || !b.OpenedAt.Equal(t0.Add(32*time.Second)) || !b.RetryAt.Equal(t0.Add(62*time.Second)) {
		t.Fatalf("3 consecutive failures: %+v", b)
	}
}

// Calls that each hang until their timeout (30 s, three times the window) and are retried 2 s
// later: every one began within the window after the previous one ended, so one stream of
// them opens the breaker although the streak spans far more than the window.
func TestHangingCallsRetriedOneAfterAnotherOpenTheBreaker(t *testing.T) {
	b := record.Breaker{AgentID: "s", State: record.BreakerClosed}
	start := t0
	for i := range 3 {
		b, _ = failed(b, tight, start, start.Add(30*time.Second), pass, "timed out")
		if i < 2 && (b.State != record.BreakerClosed || b.Failures != i+1) {
			t.Fatalf("after %d timeouts: %+v", i+1, b)
		}
		start = start.Add(32 * time.Second)
	}
	if b.State != record.BreakerOpen || !b.FirstFailureAt.Equal(t0) || !b.OpenedAt.Equal(t0.Add(94*time.Second)) {
		t.Fatalf("3 timeouts in a row: %+v, want open", b)
	}
	// Concurrent calls: one that began before the last failure ended counts too.
	c := record.Breaker{AgentID: "s", State: record.BreakerClosed}
	c, _ = failed(c, tight, t0, t0.Add(30*time.Second), pass, "timed out")
	c, _ = failed(c, tight, t0.Add(5*time.Second), t0.Add(20*time.Second), pass, "503")
	if c.Failures != 2 || !c.LastFailureAt.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("overlapping failures: %+v, want 2 counted and the later end kept", c)
	}
}

func TestOpenBreakerRefusesThenLetsOneProbeThrough(t *testing.T) {
	open := record.Breaker{AgentID: "s", State: record.BreakerOpen, Failures: 3, OpenedAt: t0, RetryAt: t0.Add(30 * time.Second), Trips: 1}
	if _, write, v := admit(open, tight, t0.Add(29*time.Second)); v != refuse || write {
		t.Fatalf("during the cool-down: verdict %v write %v", v, write)
	}
	half, write, v := admit(open, tight, t0.Add(30*time.Second))
	if v != probe || !write || half.State != record.BreakerHalfOpen || !half.ProbeUntil.Equal(t0.Add(70*time.Second)) {
		t.Fatalf("after the cool-down: %+v verdict %v write %v", half, v, write)
	}
	// While the probe is out, everyone else is refused until it is lost.
	if _, _, v := admit(half, tight, t0.Add(69*time.Second)); v != refuse {
		t.Fatalf("probe in flight: verdict %v", v)
	}
	// Those refused are told to try again when the probe's answer is due, soon; once it is
	// late, at the end of the cool-down (passed: after their usual interval); never when the
	// probe would count as lost.
	for _, c := range []struct {
		now  time.Duration
		at   time.Duration
		soon bool
	}{{30 * time.Second, 33 * time.Second, true}, {32 * time.Second, 33 * time.Second, true}, {33 * time.Second, 30 * time.Second, false}, {60 * time.Second, 30 * time.Second, false}} {
		if at, soon := refusedUntil(half, tight, t0.Add(c.now)); !at.Equal(t0.Add(c.at)) || soon != c.soon {
			t.Errorf("refused at +%s while the probe is out: retry at %s soon=%v, want +%s soon=%v", c.now, at.Sub(t0), soon, c.at, c.soon)
		}
	}
	if at, soon := refusedUntil(open, tight, t0.Add(10*time.Second)); !at.Equal(open.RetryAt) || soon {
		t.Errorf("refused at an open breaker: retry at %s soon=%v, want the cool-down's end", at, soon)
	}
	again, write, v := admit(half, tight, t0.Add(70*time.Second))
	if v != probe || !write || !again.ProbeUntil.Equal(t0.Add(110*time.Second)) {
		t.Fatalf("lost probe: %+v verdict %v", again, v)
	}
	// A failed probe opens it again for a cool-down, keeping when it first opened.
	reopened, write := failed(half, tight, t0.Add(31*time.Second), t0.Add(35*time.Second), probe, "503 again")
	if !write || reopened.State != record.BreakerOpen || !reopened.RetryAt.Equal(t0.Add(65*time.Second)) || !reopened.OpenedAt.Equal(t0) || reopened.Trips != 1 {
		t.Fatalf("failed probe: %+v", reopened)
	}
	// A late failure of a call let through before the breaker opened changes nothing.
	if _, write := failed(half, tight, t0.Add(3*time.Second), t0.Add(35*time.Second), pass, "late"); write {
		t.Fatal("a late failure must not move a half-open breaker")
	}
	if _, write := failed(open, tight, t0, t0.Add(5*time.Second), pass, "late"); write {
		t.Fatal("a late failure must not move an open breaker")
	}
	closed, write := succeeded(half)
	if !write || closed.State != record.BreakerClosed || closed.Failures != 0 || !closed.OpenedAt.IsZero() || closed.Trips != 1 {
		t.Fatalf("successful probe: %+v", closed)
	}
}

func TestParseSettings(t *testing.T) {
	got, err := ParseSettings([]byte(`{"sweep":{"x":1},"circuit_breaker":{"failures":2,"cooldown_seconds":5}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := Defaults
	want.Failures, want.Cooldown = 2, 5*time.Second
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if got, err := ParseSettings(nil); err != nil || got != Defaults {
		t.Fatalf("no settings: %+v %v", got, err)
	}
	for _, bad := range []string{
		`{"circuit_breaker":{"failures":0}}`,
		`{"circuit_breaker":{"failures":1.5}}`,
		`{"circuit_breaker":{"cooldown":5}}`,
		`{"circuit_breaker":{"window_seconds":-1,"probe_timeout_seconds":5}}`,
		`{"circuit_breaker":"on"}`,
		`[1]`,
	} {
		if _, err := ParseSettings([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

func FuzzParseSettings(f *testing.F) {
	f.Add([]byte(`{"circuit_breaker":{"failures":2,"window_seconds":60,"cooldown_seconds":5,"probe_timeout_seconds":45}}`))
	f.Add([]byte(`{"circuit_breaker":null}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		s, err := ParseSettings(raw)
		if err != nil {
			if s != Defaults {
				t.Fatalf("refused settings must leave the defaults, got %+v", s)
			}
			return
		}
		if s.Failures < 1 || s.Window <= 0 || s.Cooldown <= 0 || s.ProbeTimeout <= 30*time.Second {
			t.Fatalf("accepted settings out of range: %+v", s)
		}
	})
}
