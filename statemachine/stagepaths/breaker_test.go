package stagepaths

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/adcptest"
	"github.com/buyflow/buyflow/internal/apiclient"
	"github.com/buyflow/buyflow/internal/breaker"
	"github.com/buyflow/buyflow/internal/devstack"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/registry"
)

// breakerSettings are the registry settings of the agents these scenarios break: 3
// consecutive failures open the breaker, and its cool-down (8 s) is long enough for the later
// buys to reach the open breaker and wait on it, short enough for a test.
const breakerSettings = `{"circuit_breaker":{"failures":3,"window_seconds":60,"cooldown_seconds":8}}`

// downAgent is a simulated agent of its own (the other scenarios share sim-seller and
// sim-governance, whose breakers must stay closed) behind a switch that makes every request
// answer HTTP 503, as a seller that is down does. It counts what reached it.
type downAgent struct {
	id  string
	srv *httptest.Server

	mu     sync.Mutex
	down   bool
	failed int // requests answered 503
	// watch, when set, records when each request arrived (the breaker's probes only, while
	// it is open).
	watch   bool
	watched []time.Time
	// hold, when set, keeps every request from an answer until it is closed or the caller
	// gives up (an agent that hangs); held counts the requests it kept.
	hold chan struct{}
	held []heldRequest
}

// heldRequest is a request a hanging agent kept: when it came and its JSON-RPC method.
type heldRequest struct {
	at     time.Time
	method string
}

func (h heldRequest) String() string { return h.at.Format("15:04:05.000") + " " + h.method }

func (d *downAgent) ServeHTTPWith(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		if d.watch && r.Method == http.MethodPost {
			d.watched = append(d.watched, time.Now())
		}
		down, hold := d.down, d.hold
		if down && r.Method == http.MethodPost {
			d.failed++
		}
		if hold != nil && r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var rpc struct {
				Method string `json:"method"`
			}
			_ = json.Unmarshal(body, &rpc)
			d.held = append(d.held, heldRequest{at: time.Now(), method: rpc.Method})
		}
		d.mu.Unlock()
		if hold != nil {
			select {
			case <-hold:
			case <-r.Context().Done():
				return // the caller timed out: it got no answer
			}
		}
		if down {
			http.Error(w, "service unavailable", http.StatusServiceUnavailable)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (d *downAgent) set(f func(d *downAgent)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f(d)
}

func (d *downAgent) failures() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.failed
}

func (d *downAgent) heldRequests() []heldRequest {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.held)
}

// hang makes the agent keep every request unanswered until the returned function is called
// (once or more).
func (d *downAgent) hang() (release func()) {
	ch := make(chan struct{})
	d.set(func(d *downAgent) { d.hold = ch })
	return sync.OnceFunc(func() {
		d.set(func(d *downAgent) { d.hold = nil })
		close(ch)
	})
}

// callsBefore returns the watched requests that arrived before t.
func (d *downAgent) callsBefore(t time.Time) []time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	var early []time.Time
	for _, at := range d.watched {
		if at.Before(t) {
			early = append(early, at)
		}
	}
	return early
}

// startDownAgent serves h as agent id (role seller or governance) with the registry settings
// settings, its credential in Secrets Manager and its record in the registry, as an operator
// adds one.
func startDownAgent(t *testing.T, id string, role adcp.Role, h http.Handler, token string, webhook *adcp.WebhookConfig, settings string) *downAgent {
	t.Helper()
	d := &downAgent{id: id}
	mux := http.NewServeMux()
	mux.Handle("/", d.ServeHTTPWith(h))
	d.srv = httptest.NewServer(mux)
	t.Cleanup(d.srv.Close)
	registerAt(t, registry.Record{Agent: adcp.Agent{ID: id, Role: role, MCPURL: d.srv.URL + "/mcp", Webhook: webhook},
		Settings: json.RawMessage(settings)}, token)
	return d
}

// startDownSeller starts a seller of its own whose get_adcp_capabilities declares idem, with
// breakerSettings.
func startDownSeller(t *testing.T, idem adcptest.IdempotencyMode) (*downAgent, *adcptest.Seller) {
	t.Helper()
	return startDownSellerWith(t, idem, breakerSettings)
}

// startDownSellerWith is startDownSeller with the registry settings settings.
func startDownSellerWith(t *testing.T, idem adcptest.IdempotencyMode, settings string) (*downAgent, *adcptest.Seller) {
	t.Helper()
	signer, jwks, err := adcptest.NewWebhookKey("breaker-seller", nil)
	if err != nil {
		t.Fatal(err)
	}
	token := randomHex(16)
	seller := adcptest.NewSeller(adcptest.SellerOptions{Token: token, Version: adcptest.Version32, Behavior: adcptest.SellerSync, WebhookSigner: signer, JWKS: jwks, Idempotency: idem})
	t.Cleanup(seller.Close)
	d := startDownAgent(t, "brk-seller-"+randomHex(4), adcp.RoleSeller, seller, token, &adcp.WebhookConfig{Mode: adcp.WebhookRFC9421, JWKS: jwks}, settings)
	refusesNothing(t, d.id, seller.Calls)
	return d, seller
}

// submitTo submits a one-package buy of 3,000 USD of r at seller, checked by governance (the
// ids of the registry).
func (r *buyRun) submitTo(seller, governance string) string {
	r.t.Helper()
	body, err := apiclient.Buy{PO: r.po, Sim: "sync", Seller: seller, Budgets: []float64{3000}}.Body(sys.root)
	if err != nil {
		r.t.Fatal(err)
	}
	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil {
		r.t.Fatal(err)
	}
	req["governance"].(map[string]any)["agent_id"] = governance
	body, _ = json.Marshal(req)
	return r.submitBody(body)
}

// waitingFor waits until the buy's timeline shows it waiting on agent's open breaker.
func (r *buyRun) waitingFor(agent string, timeout time.Duration) {
	r.t.Helper()
	eventually(r.t, timeout, "buy "+r.op+" waits for "+agent, func() bool {
		evs, err := r.client.Events(context.Background(), r.op)
		if err != nil {
			return false
		}
		for _, e := range evs {
			if e.Type == record.EventAgentUnavailable {
				return true
			}
		}
		return false
	})
}

// checkWaiting checks that GET /v1/media-buys/{id} says the buy waits for agent since its
// breaker opened, and that its timeline records the wait.
func checkWaiting(t *testing.T, r *buyRun, reason, agent string, opened record.Breaker) {
	t.Helper()
	w := r.operation().Waiting
	if w == nil || w.Reason != reason || w.AgentID != agent || w.Since != opened.OpenedAt.UTC().Format(time.RFC3339) {
		t.Errorf("buy %s: waiting %+v, want %s for %s since %s", r.op, w, reason, agent, opened.OpenedAt)
	}
	if tl := r.timeline(); !slices.Contains(tl, record.EventAgentUnavailable) {
		t.Errorf("buy %s: timeline %v has no %s", r.op, tl, record.EventAgentUnavailable)
	}
}

func breakerOf(t *testing.T, agent string) record.Breaker {
	t.Helper()
	b, err := ledger.New(sys.ddb, sys.table).GetBreaker(context.Background(), agent)
	if err != nil && !errors.Is(err, record.ErrNotFound) {
		t.Fatal(err)
	}
	return b
}

// placedAfterAWait checks that r's execution waited for the seller's breaker and completed,
// the buy is completed, and exactly one create_media_buy of it reached seller.
func placedAfterAWait(t *testing.T, r *buyRun, seller *adcptest.Seller) {
	t.Helper()
	exs := r.finish(90 * time.Second)
	last := exs[len(exs)-1]
	if last.Status != "SUCCEEDED" || !slices.Contains(last.States, "WaitForSeller") || !slices.Contains(last.States, "MediaBuyCompleted") {
		t.Errorf("buy %s: %s %s, states %v: want a wait for the seller, then completed", r.op, last.Status, last.Error, last.States)
	}
	if op := r.operation(); op.Status != "completed" {
		t.Errorf("buy %s is %s", r.op, op.Status)
	}
	if n := len(mine(seller.Calls(), adcp.ToolCreateMediaBuy, r.keys(seller.Calls()))); n != 1 {
		t.Errorf("buy %s: %d create_media_buy calls reached the seller, want 1", r.op, n)
	}
}

// A seller down with 503: the first buy's create trips its breaker after 3 failed calls (the
// state machine's own retries), later buys make no call while it is open, and after the
// cool-down one probe finds the seller back: the breaker closes and every waiting buy is placed.
func TestSellerBreakerOpensWaitsAndCloses(t *testing.T) {
	first := begin(t, nil)
	d, seller := startDownSeller(t, adcptest.IdempotencyDeclared)
	d.set(func(d *downAgent) { d.down = true })
	first.submitTo(d.id, devstack.GovernanceID)
	first.waitingFor(d.id, 30*time.Second)
	if failed := d.failures(); failed != 3 {
		t.Fatalf("the seller was called %d times before its breaker opened, want 3", failed)
	}
	opened := breakerOf(t, d.id)
	if opened.State != record.BreakerOpen || opened.Trips != 1 {
		t.Fatalf("breaker %+v, want open once", opened)
	}

	// While it is open, two more buys reach the create and wait without calling the seller:
	// nothing reaches it before the cool-down ends (then one probe at a time).
	d.set(func(d *downAgent) { d.watch = true })
	later := []*buyRun{newRun(t, nil), newRun(t, nil)}
	for _, r := range later {
		r.submitTo(d.id, devstack.GovernanceID)
	}
	for _, r := range later {
		r.waitingFor(d.id, 30*time.Second)
	}
	if early := d.callsBefore(opened.RetryAt); len(early) != 0 {
		t.Fatalf("requests reached the seller at %v while its breaker was open until %s", early, opened.RetryAt)
	}
	checkWaiting(t, later[0], "seller_unavailable", d.id, opened)
	// The seller recovers; the probe after the cool-down closes the breaker.
	d.set(func(d *downAgent) { d.down = false })

	for _, r := range append([]*buyRun{first}, later...) {
		placedAfterAWait(t, r, seller)
	}
	if b := breakerOf(t, d.id); b.State != record.BreakerClosed || b.Failures != 0 || b.Trips != 1 {
		t.Fatalf("breaker after the recovery %+v, want closed", b)
	}
}

// A seller without a replay window (it never replays, so a create may be sent once and never
// again): the first buy's create cannot even read the seller's capabilities, which trips the
// breaker, and a second buy reaches the open breaker at its first create. Nothing of either
// create was sent, so once the seller is back each buy is created by a first send, exactly
// one create_media_buy each, with no lapsed claim to reconcile.
func TestSellerWithoutReplayWindowCreatesOnceAfterItsBreakerCloses(t *testing.T) {
	first := begin(t, nil)
	d, seller := startDownSeller(t, adcptest.IdempotencyUnsupported)
	d.set(func(d *downAgent) { d.down = true })
	first.submitTo(d.id, devstack.GovernanceID)
	first.waitingFor(d.id, 30*time.Second)
	if failed := d.failures(); failed != 3 {
		t.Fatalf("the seller was called %d times before its breaker opened, want 3", failed)
	}
	second := newRun(t, nil)
	second.submitTo(d.id, devstack.GovernanceID)
	second.waitingFor(d.id, 30*time.Second)
	if b := breakerOf(t, d.id); b.State != record.BreakerOpen {
		t.Fatalf("breaker %+v at the second buy's create, want open", b)
	}
	d.set(func(d *downAgent) { d.down = false })

	for _, r := range []*buyRun{first, second} {
		placedAfterAWait(t, r, seller)
	}
	if n := len(seller.CallsTo(adcp.ToolGetMediaBuys)); n != 0 {
		t.Errorf("%d get_media_buys: no create was ever sent before, so there was no lapsed claim to look for", n)
	}
}

// A governance agent down with 503: its breaker opens after 3 failed checks and the buys wait
// with the gate closed: no create_media_buy is ever sent while it is open. After the cool-down
// the probe's check goes through and the buys are placed, each once.
func TestGovernanceBreakerKeepsTheGateClosed(t *testing.T) {
	first := begin(t, nil)
	token := randomHex(16)
	gov := adcptest.NewGovernance(adcptest.GovernanceOptions{Token: token, Version: adcptest.Version32})
	t.Cleanup(gov.Close)
	d := startDownAgent(t, "brk-gov-"+randomHex(4), adcp.RoleGovernance, gov, token, nil, breakerSettings)
	refusesNothing(t, d.id, gov.Calls)
	d.set(func(d *downAgent) { d.down = true })

	first.submitTo(devstack.SellerID, d.id)
	first.waitingFor(d.id, 30*time.Second)
	if failed := d.failures(); failed != 3 {
		t.Fatalf("governance was called %d times before its breaker opened, want 3", failed)
	}
	opened := breakerOf(t, d.id)
	d.set(func(d *downAgent) { d.watch = true })
	second := newRun(t, nil)
	second.submitTo(devstack.SellerID, d.id)
	second.waitingFor(d.id, 30*time.Second)
	if early := d.callsBefore(opened.RetryAt); len(early) != 0 {
		t.Fatalf("requests reached governance at %v while its breaker was open until %s", early, opened.RetryAt)
	}
	checkWaiting(t, second, "governance_unavailable", d.id, opened)
	for _, r := range []*buyRun{first, second} {
		if n := len(r.sellerCalls(adcp.ToolCreateMediaBuy)); n != 0 {
			t.Fatalf("buy %s: %d create_media_buy sent while governance was unreachable", r.op, n)
		}
		if op := r.operation(); op.Status != "checking_governance" {
			t.Errorf("buy %s is %s while governance is unavailable, want checking_governance", r.op, op.Status)
		}
	}
	d.set(func(d *downAgent) { d.down = false })
	for _, r := range []*buyRun{first, second} {
		exs := r.finish(90 * time.Second)
		last := exs[len(exs)-1]
		if last.Status != "SUCCEEDED" || !slices.Contains(last.States, "WaitForGovernanceAgent") {
			t.Errorf("buy %s: %s %s, states %v: want a wait for governance, then completed", r.op, last.Status, last.Error, last.States)
		}
		if n := len(r.sellerCalls(adcp.ToolCreateMediaBuy)); n != 1 {
			t.Errorf("buy %s: %d create_media_buy calls, want 1", r.op, n)
		}
	}
	if b := breakerOf(t, d.id); b.State != record.BreakerClosed || b.Trips != 1 {
		t.Fatalf("governance breaker after the recovery %+v, want closed", b)
	}
}

// A change to a placed buy whose seller went down: the change's plan (the seller's current
// buy) trips the breaker, the change waits instead of failing, and it is applied once the
// seller is back, with one update_media_buy.
func TestChangeWaitsForAnUnavailableSeller(t *testing.T) {
	r := begin(t, nil)
	d, seller := startDownSeller(t, adcptest.IdempotencyDeclared)
	r.submitTo(d.id, devstack.GovernanceID)
	if exs := r.finish(60 * time.Second); exs[len(exs)-1].Status != "SUCCEEDED" {
		t.Fatalf("the buy was not placed: %+v", exs[len(exs)-1])
	}
	d.set(func(d *downAgent) { d.down = true })
	id := r.change(`{"budget":{"total":3500},"reason":"more reach","context":{"sim":"sync"}}`, false)
	eventually(t, 30*time.Second, "the change waits for the seller", func() bool { return breakerOf(t, d.id).State == record.BreakerOpen })
	if failed := d.failures(); failed != 3 {
		t.Fatalf("the seller was called %d times before its breaker opened, want 3", failed)
	}
	d.set(func(d *downAgent) { d.down = false })
	ex := only(t, r.finishNamed(id, 90*time.Second))
	if ex.Status != "SUCCEEDED" || !slices.Contains(ex.States, "WaitForChangeAgent") || !slices.Contains(ex.States, "ChangeApplied") {
		t.Fatalf("change %s: %s %s, states %v: want a wait for the seller, then applied", id, ex.Status, ex.Error, ex.States)
	}
	if n := len(seller.CallsTo(adcp.ToolUpdateMediaBuy)); n != 1 {
		t.Errorf("%d update_media_buy calls reached the seller, want 1", n)
	}
	if c := r.current(); c.Budget != "3500.00" || c.LastOutcome != "applied" {
		t.Errorf("current = %+v, want the new budget applied", c)
	}
}

// lastEntry is when r's timeline was last written.
func (r *buyRun) lastEntry() time.Time {
	r.t.Helper()
	evs := r.events(r.op)
	at, err := time.Parse(time.RFC3339Nano, evs[len(evs)-1].At)
	if err != nil {
		r.t.Fatal(err)
	}
	return at
}

// refusals returns the agent_unavailable entries of r's timeline: when each was written and the
// retry_at the breaker told the buy.
func (r *buyRun) refusals() (at, retryAt []time.Time) {
	r.t.Helper()
	for _, e := range r.events(r.op) {
		if e.Type != record.EventAgentUnavailable {
			continue
		}
		var d struct {
			RetryAt time.Time `json:"retry_at"`
		}
		when, err := time.Parse(time.RFC3339Nano, e.At)
		if err != nil || json.Unmarshal(e.Detail, &d) != nil {
			r.t.Fatalf("agent_unavailable entry %+v: %v", e, err)
		}
		at, retryAt = append(at, when), append(retryAt, d.RetryAt)
	}
	return at, retryAt
}

// A buy that reaches the seller while the breaker's probe is out is refused, and told to try
// again when the probe's answer is due (or, later, at the end of the cool-down: after its
// usual wait), not when the probe would count as lost (probe_timeout_seconds, 45 s): once the
// probe found the seller back, it is placed right after the buy that probed.
func TestBuyRefusedWhileTheProbeIsOutGoesRightAfterIt(t *testing.T) {
	// The default shortest wait (30 s): the buy refused while the probe is out must not wait
	// it, let alone the probe's timeout.
	timing := map[string]any{"poll_initial_seconds": 30, "poll_max_seconds": 30, "deadline_seconds": 300}
	first := begin(t, timing)
	d, seller := startDownSeller(t, adcptest.IdempotencyDeclared)
	d.set(func(d *downAgent) { d.down = true })
	first.submitTo(d.id, devstack.GovernanceID)
	first.waitingFor(d.id, 30*time.Second)
	opened := breakerOf(t, d.id)

	// The seller is back but keeps its answers until released: after the cool-down, the first
	// buy's create is the probe, and it stays out while a second buy reaches the seller.
	release := d.hang()
	defer release()
	d.set(func(d *downAgent) { d.down = false })
	eventually(t, 60*time.Second, "the probe at the seller", func() bool { return len(d.heldRequests()) > 0 })
	probing := breakerOf(t, d.id)
	if probing.State != record.BreakerHalfOpen || probing.OpenedAt != opened.OpenedAt {
		t.Fatalf("breaker %+v while the probe is out, want half-open since %s", probing, opened.OpenedAt)
	}
	second := newRun(t, timing)
	second.submitTo(d.id, devstack.GovernanceID)
	second.waitingFor(d.id, 30*time.Second)
	released := time.Now()
	release()

	at, retryAt := second.refusals()
	if len(at) == 0 {
		t.Fatal("second buy: no agent_unavailable entry")
	}
	// Refused while the probe was out, the buy is told to try again when the probe's answer
	// is due (3 s after it was let through; the timeline keeps whole seconds), or the
	// cool-down's end if it came later: never the probe's timeout.
	claimed := probing.ProbeUntil.Add(-breaker.Defaults.ProbeTimeout)
	if retryAt[0].After(claimed.Add(3*time.Second)) || retryAt[0].Before(probing.RetryAt.Truncate(time.Second)) {
		t.Errorf("second buy refused at %s told to retry at %s, want by %s, when the probe's answer was due (not the probe's timeout %s)",
			at[0], retryAt[0], claimed.Add(3*time.Second), probing.ProbeUntil)
	}
	for _, r := range []*buyRun{first, second} {
		placedAfterAWait(t, r, seller)
	}
	if b := breakerOf(t, d.id); b.State != record.BreakerClosed || b.Trips != 1 {
		t.Fatalf("breaker after the probe %+v, want closed", b)
	}
	t.Logf("second buy: refused at %s while the probe was out (until %s at the latest), told to retry at %s; "+
		"probe answered %s, first buy's last entry %s later, second's %s later",
		at[0].Format(time.RFC3339Nano), probing.ProbeUntil.Format(time.RFC3339), retryAt[0].Format(time.RFC3339),
		released.Format(time.RFC3339Nano), first.lastEntry().Sub(released), second.lastEntry().Sub(released))
}

// hangSettings break a seller whose calls each hang until the client's 30 s timeout: two
// failures open its breaker, and the window (20 s) is shorter than one call, so a rule that
// measured the streak from the first failure's end could never fit two of them.
const hangSettings = `{"circuit_breaker":{"failures":2,"window_seconds":20,"cooldown_seconds":8}}`

// One buy at a seller that hangs: each create attempt times out after 30 s and the state
// machine retries it. Each timed-out call began within the window after the previous failure
// ended, so the second opens the breaker and the buy waits instead of spending every retry;
// once the seller answers again the probe closes the breaker and the buy is placed.
func TestOneBuyAtAHangingSellerOpensItsBreakerAndWaits(t *testing.T) {
	r := begin(t, map[string]any{"deadline_seconds": 600})
	d, seller := startDownSellerWith(t, adcptest.IdempotencyDeclared, hangSettings)
	release := d.hang()
	defer release()
	r.submitTo(d.id, devstack.GovernanceID)
	// Two calls of 30 s each, then the refusal.
	r.waitingFor(d.id, 150*time.Second)
	b := breakerOf(t, d.id)
	if b.State != record.BreakerOpen || b.Trips != 1 || b.Failures != 2 {
		t.Fatalf("breaker %+v after the buy's timeouts, want open once after 2", b)
	}
	// Nothing reached the seller once its breaker was open (the clocks are the same machine's).
	held := d.heldRequests()
	if len(held) < 2 || held[len(held)-1].at.After(b.OpenedAt) {
		t.Errorf("requests %v reached the hanging seller, want 2 or more before its breaker opened at %s and none after",
			held, b.OpenedAt.Format("15:04:05.000"))
	}
	t.Logf("hanging seller: first timeout streak began %s, breaker opened %s (%s later); requests held %v",
		b.FirstFailureAt.Format(time.RFC3339Nano), b.OpenedAt.Format(time.RFC3339Nano), b.OpenedAt.Sub(b.FirstFailureAt), held)
	release()
	placedAfterAWait(t, r, seller)
}
