package breaker_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/breaker"
	"github.com/buyflow/buyflow/internal/clocktest"
	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/workflow"
)

// settings are the registry's settings of every agent in these tests.
const settings = `{"circuit_breaker":{"failures":3,"window_seconds":60,"cooldown_seconds":30}}`

// newGates returns n gates over one fresh table, as n functions (or n concurrent invocations)
// would each build one, sharing a clock.
func newGates(t *testing.T, n int) ([]*breaker.Gate, *ledger.Store, *clocktest.Clock) {
	t.Helper()
	return newGatesWith(t, n, settings)
}

// newGatesWith is newGates with the registry settings agentSettings ("{}": the defaults).
func newGatesWith(t *testing.T, n int, agentSettings string) ([]*breaker.Gate, *ledger.Store, *clocktest.Clock) {
	t.Helper()
	client, table := dynamotest.Start(t)
	clk := clocktest.At(time.Date(2099, 1, 1, 12, 0, 0, 0, time.UTC))
	store := ledger.New(client, table)
	store.Now = clk.Now
	gates := make([]*breaker.Gate, n)
	for i := range gates {
		gates[i] = breaker.New(store, func(context.Context, string) (json.RawMessage, error) { return json.RawMessage(agentSettings), nil })
		gates[i].Now = clk.Now
	}
	return gates, store, clk
}

var unavailable503 = &adcp.Error{Kind: adcp.KindTransport, HTTPStatus: 503, Recovery: adcp.RecoveryTransient}

// call runs one exchange through the gate as the AdCP client does; it reports whether the
// call was let through.
func call(t *testing.T, g *breaker.Gate, agent string, outcome error) bool {
	t.Helper()
	done, err := g.Admit(context.Background(), agent)
	if err != nil {
		var u *adcp.UnavailableError
		if !errors.As(err, &u) || u.Agent != agent {
			t.Fatalf("refusal is %T %v, want *adcp.UnavailableError of %s", err, err, agent)
		}
		return false
	}
	done(outcome)
	return true
}

func TestGateTripsAfterFailuresRefusesThenProbeCloses(t *testing.T) {
	gates, store, clk := newGates(t, 1)
	g := gates[0]
	ctx := context.Background()
	for i := range 3 {
		if !call(t, g, "seller-a", unavailable503) {
			t.Fatalf("call %d refused before the breaker opened", i+1)
		}
	}
	b, err := store.GetBreaker(ctx, "seller-a")
	if err != nil || b.State != record.BreakerOpen || b.Failures != 3 || b.Trips != 1 {
		t.Fatalf("after 3 failures: %+v %v", b, err)
	}
	// Other agents are not affected.
	if !call(t, g, "seller-b", nil) {
		t.Fatal("another agent was refused")
	}
	_, err = g.Admit(ctx, "seller-a")
	u := breaker.Unavailable(err)
	if u == nil || !u.Since.Equal(b.OpenedAt) || !u.RetryAt.Equal(b.RetryAt) {
		t.Fatalf("open breaker: %v (breaker %+v)", err, b)
	}
	clk.Advance(30 * time.Second)
	// The probe fails: open again for another cool-down.
	if !call(t, g, "seller-a", unavailable503) {
		t.Fatal("the probe was refused after the cool-down")
	}
	if call(t, g, "seller-a", nil) {
		t.Fatal("a call went through after a failed probe")
	}
	clk.Advance(30 * time.Second)
	if !call(t, g, "seller-a", nil) {
		t.Fatal("the second probe was refused")
	}
	b, _ = store.GetBreaker(ctx, "seller-a")
	if b.State != record.BreakerClosed || b.Failures != 0 {
		t.Fatalf("after a successful probe: %+v", b)
	}
	if !call(t, g, "seller-a", nil) {
		t.Fatal("a closed breaker refused a call")
	}
}

func TestGateCountsOnlyTransientFailuresOfTheAgent(t *testing.T) {
	gates, store, _ := newGates(t, 1)
	g := gates[0]
	refused := &adcp.Error{Kind: adcp.KindAdCP, Code: "INVALID_REQUEST", Recovery: adcp.RecoveryCorrectable}
	ownFault := &adcp.Error{Kind: adcp.KindLocal, Recovery: adcp.RecoveryTransient, Message: "resolve credential"}
	for range 5 {
		call(t, g, "seller-a", refused)
		call(t, g, "seller-a", ownFault)
	}
	call(t, g, "seller-a", unavailable503)
	call(t, g, "seller-a", unavailable503)
	call(t, g, "seller-a", refused) // the agent answered: the streak ends
	call(t, g, "seller-a", unavailable503)
	b, err := store.GetBreaker(context.Background(), "seller-a")
	if err != nil || b.State != record.BreakerClosed || b.Failures != 1 {
		t.Fatalf("breaker %+v %v: refusals and buyflow's own failures must not count, an answer ends a streak", b, err)
	}
}

// Several functions find the cool-down over at once: exactly one claims the probe, the others
// are refused until it ends.
func TestConcurrentFunctionsClaimExactlyOneProbe(t *testing.T) {
	dynamotest.SkipOnMoto(t, "moto does not isolate concurrent conditional writes")
	const n = 12
	gates, _, clk := newGates(t, n)
	for range 3 {
		call(t, gates[0], "seller-a", unavailable503)
	}
	clk.Advance(31 * time.Second)
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		probes []func(error)
	)
	for _, g := range gates {
		wg.Add(1)
		go func() {
			defer wg.Done()
			done, err := g.Admit(context.Background(), "seller-a")
			if err != nil {
				if breaker.Unavailable(err) == nil {
					t.Errorf("refusal %v", err)
				}
				return
			}
			mu.Lock()
			probes = append(probes, done)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(probes) != 1 {
		t.Fatalf("%d of %d racing functions were let through, want exactly one probe", len(probes), n)
	}
	probes[0](nil)
	if !call(t, gates[5], "seller-a", nil) {
		t.Fatal("refused after the probe closed the breaker")
	}
}

// Failures recorded by several functions at once are all counted: none is lost to a race, and
// the breaker opens once.
func TestConcurrentFailuresAreAllCounted(t *testing.T) {
	dynamotest.SkipOnMoto(t, "moto does not isolate concurrent conditional writes")
	gates, store, _ := newGates(t, 3)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			done, err := gates[i].Admit(context.Background(), "seller-a")
			if err != nil {
				t.Error(err)
				return
			}
			done(unavailable503)
		}()
	}
	wg.Wait()
	b, err := store.GetBreaker(context.Background(), "seller-a")
	if err != nil || b.Failures != 3 || b.Version != 3 || b.State != record.BreakerOpen || b.Trips != 1 {
		t.Fatalf("breaker %+v %v: want the 3 failures counted in 3 versions, opened once", b, err)
	}
}

// timedOut is a call that hung until the AdCP client's call timeout.
var timedOut = &adcp.Error{Kind: adcp.KindTransport, Recovery: adcp.RecoveryTransient, Message: "timed out or canceled", Err: context.DeadlineExceeded}

// One buy's create at an agent that hangs: each attempt times out after 30 s (half the
// window) and the state machine retries it 2 s later. The third timeout opens the breaker
// although the streak spans 94 s, and the next attempt is refused instead of spent.
func TestOneStreamOfTimeoutsOpensTheBreaker(t *testing.T) {
	gates, store, clk := newGates(t, 1)
	g := gates[0]
	ctx := context.Background()
	for i := range 3 {
		done, err := g.Admit(ctx, "seller-a")
		if err != nil {
			t.Fatalf("attempt %d refused before the breaker opened: %v", i+1, err)
		}
		clk.Advance(30 * time.Second)
		done(timedOut)
		clk.Advance(2 * time.Second)
	}
	b, err := store.GetBreaker(ctx, "seller-a")
	if err != nil || b.State != record.BreakerOpen || b.Failures != 3 || b.Trips != 1 {
		t.Fatalf("after 3 timeouts of one stream: %+v %v, want open", b, err)
	}
	if _, err := g.Admit(ctx, "seller-a"); breaker.Unavailable(err) == nil {
		t.Fatalf("the fourth attempt went through an open breaker: %v", err)
	}
}

// The timeline with the default settings (5 failures, 60 s window): one buy's create
// at an agent that hangs, each attempt timing out after 30 s, retried by the state machine's
// TransientError policy (2 s doubling, the longest jittered waits). The fifth timeout, 180 s
// in, opens the breaker, and the sixth and last attempt is refused: the buy waits instead of
// failing at 242 s.
func TestDefaultsOpenTheBreakerBeforeOneBuysRetriesRunOut(t *testing.T) {
	gates, store, clk := newGatesWith(t, 1, `{}`)
	g := gates[0]
	ctx := context.Background()
	for i, backoff := range []time.Duration{2, 4, 8, 16, 32} {
		done, err := g.Admit(ctx, "seller-a")
		if err != nil {
			t.Fatalf("attempt %d refused before the breaker opened: %v", i+1, err)
		}
		clk.Advance(30 * time.Second)
		done(timedOut)
		clk.Advance(backoff * time.Second)
	}
	b, err := store.GetBreaker(ctx, "seller-a")
	if err != nil || b.State != record.BreakerOpen || b.Failures != 5 || b.OpenedAt.Sub(b.FirstFailureAt) != 180*time.Second {
		t.Fatalf("after 5 timeouts: %+v %v, want open 180 s after the first attempt began", b, err)
	}
	if _, err := g.Admit(ctx, "seller-a"); breaker.Unavailable(err) == nil {
		t.Fatalf("the sixth attempt went through an open breaker: %v", err)
	}
}

// Callers refused while the probe is out are told to try again when its answer is due, 3 s
// after it was let through, and then at the end of the cool-down (passed), never when the
// probe would count as lost (probe_timeout_seconds later): once the probe succeeded they go.
func TestRefusedWhileProbingRetrySoonAfterTheProbe(t *testing.T) {
	gates, store, clk := newGates(t, 2)
	ctx := context.Background()
	for range 3 {
		call(t, gates[0], "seller-a", unavailable503)
	}
	opened, err := store.GetBreaker(ctx, "seller-a")
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(30 * time.Second)
	probeDone, err := gates[0].Admit(ctx, "seller-a")
	if err != nil {
		t.Fatalf("the probe was refused: %v", err)
	}
	clk.Advance(2 * time.Second)
	_, err = gates[1].Admit(ctx, "seller-a")
	u := breaker.Unavailable(err)
	if due := opened.RetryAt.Add(3 * time.Second); u == nil || !u.RetryAt.Equal(due) || !u.Probing {
		t.Fatalf("refused while probing: %+v, want a short wait until %s", u, due)
	}
	clk.Advance(2 * time.Second)
	_, err = gates[1].Admit(ctx, "seller-a")
	if u = breaker.Unavailable(err); u == nil || !u.RetryAt.Equal(opened.RetryAt) || u.Probing {
		t.Fatalf("refused again while the probe is late: %+v, want the cool-down's end %s", u, opened.RetryAt)
	}
	probeDone(nil)
	if !call(t, gates[1], "seller-a", nil) {
		t.Fatal("refused after the probe closed the breaker")
	}
}

// A refusal while the probe is young waits until its answer is due, below the stages' usual
// interval; any other refusal waits at least that interval.
func TestWaitForShortensOnlyTheWaitForAYoungProbe(t *testing.T) {
	now := time.Date(2099, 1, 1, 12, 0, 0, 0, time.UTC)
	cfg := workflow.DefaultRunConfig()
	for _, c := range []struct {
		u    adcp.UnavailableError
		want int
	}{
		{adcp.UnavailableError{Agent: "s", RetryAt: now.Add(2500 * time.Millisecond), Probing: true}, 3},
		{adcp.UnavailableError{Agent: "s", RetryAt: now.Add(-time.Second), Probing: true}, 1},
		{adcp.UnavailableError{Agent: "s", RetryAt: now.Add(-time.Second)}, cfg.PollInitialSeconds},
		{adcp.UnavailableError{Agent: "s", RetryAt: now.Add(50 * time.Second)}, 50},
	} {
		w := breaker.WaitFor(&c.u, adcp.RoleSeller, adcp.ToolCreateMediaBuy, now, now, cfg)
		if w == nil || w.Wait == nil || w.Wait.RetryInSeconds != c.want {
			t.Errorf("WaitFor(%+v) = %+v, want a wait of %d s", c.u, w, c.want)
		}
	}
}
