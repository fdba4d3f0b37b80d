package modify_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/url"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/adcptest"
	"github.com/buyflow/buyflow/internal/buy"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/modify"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/stagetest"
	"github.com/buyflow/buyflow/internal/webhookroute"
	"github.com/buyflow/buyflow/internal/workflow"
)

// The ledger task names of a change's update and outcome report intents.
const (
	updateIntent = "update_media_buy#change"
	reportIntent = "report_plan_outcome#change"
)

// crashingLedger is the real ledger, except that the first transition of a change to crashTo
// fails, as when the Lambda dies after the seller answered and before the answer was recorded.
type crashingLedger struct {
	*ledger.Store
	crashTo workflow.Status
	crashed atomic.Bool
}

func (c *crashingLedger) Transition(ctx context.Context, tenant, id string, to workflow.Status, v int64, ch record.Patch) (*record.Operation, error) {
	if to == c.crashTo && c.crashed.CompareAndSwap(false, true) {
		return nil, errors.New("lambda died")
	}
	return c.Store.Transition(ctx, tenant, id, to, v, ch)
}

// changeWorld is a placed buy at the simulated seller and the modification stages over the
// stage test world's ledger and agents.
type changeWorld struct {
	e      *stagetest.Env
	ledger *crashingLedger
	svc    *modify.Service
	buy    *record.Operation
}

func newChangeWorld(t *testing.T, o stagetest.Options) *changeWorld {
	t.Helper()
	return newChangeWorldOf(t, o, "approved,sync")
}

// newChangeWorldOf is newChangeWorld with the buy placed as the simulation tokens sim say.
func newChangeWorldOf(t *testing.T, o stagetest.Options, sim string) *changeWorld {
	t.Helper()
	e := stagetest.NewEnv(t, o)
	placed, out := e.Placed(sim)
	if out.Status != workflow.StatusCompleted {
		t.Fatalf("the buy was not placed: %+v", out)
	}
	l := &crashingLedger{Store: e.Store}
	svc := modify.New(l, e.AdCP, modify.Policy{}, modify.Config{CallerURI: stagetest.CallerURI, PublicBaseURL: stagetest.BaseURL,
		Now: e.Clock.Now, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	return &changeWorld{e: e, ledger: l, svc: svc, buy: placed}
}

// checked submits a budget change of the buy and runs its governance check.
func (w *changeWorld) checked(t *testing.T, total string) string {
	t.Helper()
	c, err := modify.ParsePatch([]byte(`{"budget":{"total":` + total + `},"reason":"more reach","context":{"sim":"approved,sync"}}`))
	if err != nil {
		t.Fatal(err)
	}
	reqs := modify.NewRequests(w.e.Store, &startedExecutions{names: map[string]int{}}, modify.RequestConfig{StateMachineARN: "arn:sm", Now: w.e.Clock.Now})
	acc, err := reqs.Submit(context.Background(), buy.Caller{Tenant: stagetest.Tenant, Principal: "alice"}, w.buy.ID, "key-"+total, c)
	if err != nil {
		t.Fatal(err)
	}
	out, err := w.svc.Check(context.Background(), w.in(acc.ChangeID, modify.ActionCheck))
	if err != nil || out.Decision != workflow.GovernanceProceed {
		t.Fatalf("check of the change: %+v, %v", out, err)
	}
	return acc.ChangeID
}

func (w *changeWorld) in(id string, a workflow.Action) workflow.StageInput {
	return workflow.StageInput{Action: a, OperationID: id, Tenant: stagetest.Tenant, Config: stagetest.RunConfig()}
}

func (w *changeWorld) update(id string) (workflow.SellerOutput, error) {
	return w.svc.Update(context.Background(), w.in(id, modify.ActionUpdate))
}

// committedThenCrashed runs the change's first update, which dies after the seller applied it.
func (w *changeWorld) committedThenCrashed(t *testing.T, id string) {
	t.Helper()
	w.ledger.crashTo = workflow.StatusCompleted
	if _, err := w.update(id); err == nil {
		t.Fatal("the simulated crash did not fail the first update")
	}
	if n := len(w.e.Seller.CallsTo(adcp.ToolUpdateMediaBuy)); n != 1 {
		t.Fatalf("%d update_media_buy before the crash, want 1", n)
	}
}

func (w *changeWorld) intent(t *testing.T, id, task string) *record.Intent {
	t.Helper()
	in, err := w.e.Store.GetIntent(context.Background(), stagetest.Tenant, id, task)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// originals counts the calls of tool the agent executed (its replays aside).
func originals(calls []adcptest.Call) int {
	n := 0
	for _, c := range calls {
		if c.Fault == "" && !c.Replayed && !c.IsError {
			n++
		}
	}
	return n
}

// lapsedChecks returns the applied verdicts of the change's looks at the seller before a resend.
func lapsedChecks(t *testing.T, w *changeWorld, id string) []bool {
	t.Helper()
	var out []bool
	for _, ev := range stagetest.Events(t, w.e, id) {
		var d struct {
			Applied bool `json:"applied"`
		}
		if ev.Type == record.EventLapsedClaimCheck && json.Unmarshal(ev.Detail, &d) == nil {
			out = append(out, d.Applied)
		}
	}
	return out
}

// The update retried after a crash first reads the buy at the seller, as a create does: the
// seller already applied it (the planned revision moved on, with the planned packages), so it
// is recorded as the seller's success and nothing is sent again, at a seller with a replay
// window or without one.
func TestChangeRetriedAfterACrashFindsTheUpdateApplied(t *testing.T) {
	t.Parallel()
	for name, idem := range map[string]adcptest.IdempotencyMode{"window": adcptest.IdempotencyDeclared, "no window": adcptest.IdempotencyUnsupported} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w := newChangeWorld(t, stagetest.Options{Seller: adcptest.SellerOptions{Idempotency: idem}})
			id := w.checked(t, "3500")
			w.committedThenCrashed(t, id)
			if in := w.intent(t, id, updateIntent); in.Claims != 1 || in.Unsent {
				t.Fatalf("the update intent after the crash: %d claims, unsent %v; want one claim standing", in.Claims, in.Unsent)
			}
			out, err := w.update(id)
			if err != nil || out.Status != workflow.StatusCompleted {
				t.Fatalf("the retried update: %+v, %v", out, err)
			}
			if n := len(w.e.Seller.CallsTo(adcp.ToolUpdateMediaBuy)); n != 1 {
				t.Fatalf("%d update_media_buy reached the seller, want only the one before the crash", n)
			}
			if got := lapsedChecks(t, w, id); !slices.Equal(got, []bool{true}) {
				t.Errorf("looks at the seller %v, want one that found the update applied", got)
			}
			got, err := w.svc.Apply(context.Background(), w.in(id, modify.ActionApply))
			if err != nil || got.Outcome != modify.OutcomeApplied || got.Revision != 2 {
				t.Fatalf("apply after the look: %+v, %v", got, err)
			}
		})
	}
}

// When the look at the seller cannot tell (its get_media_buys fails), a seller with a replay
// window gets a resend with the key and bytes of the first send: it replays it, and the change
// completes with the budget changed once.
func TestChangeRetriedAfterACrashIsAResendOfTheSameKey(t *testing.T) {
	t.Parallel()
	w := newChangeWorld(t, stagetest.Options{})
	id := w.checked(t, "3500")
	w.committedThenCrashed(t, id)
	w.e.Seller.FailNextHTTP(1, 500)

	out, err := w.update(id)
	if err != nil || out.Status != workflow.StatusCompleted {
		t.Fatalf("the retried update: %+v, %v", out, err)
	}
	calls := w.e.Seller.CallsTo(adcp.ToolUpdateMediaBuy)
	if len(calls) != 2 || originals(calls) != 1 || !calls[1].Replayed {
		t.Fatalf("the seller got %d update_media_buy (%d executed), want the first and its replay", len(calls), originals(calls))
	}
	if string(calls[0].Arguments) != string(calls[1].Arguments) {
		t.Errorf("the resend's bytes differ from the first send's:\n%s\n%s", calls[0].Arguments, calls[1].Arguments)
	}
	if in := w.intent(t, id, updateIntent); in.Claims != 2 {
		t.Errorf("the update intent after the resend: %d claims, want 2", in.Claims)
	}
	var attempts []any
	for _, ev := range stagetest.Events(t, w.e, id) {
		var d map[string]any
		if ev.Type == record.EventModificationSellerCall && json.Unmarshal(ev.Detail, &d) == nil && d["attempt"] != nil {
			attempts = append(attempts, d["attempt"])
		}
	}
	if len(attempts) != 2 || attempts[0] != float64(0) || attempts[1] != float64(1) {
		t.Errorf("seller call events record attempts %v, want the first send's 0 and the resend's 1", attempts)
	}
}

// At a seller without a replay window (it executes every call it gets), when the look cannot
// tell, the update must not reach the seller again: the resend is refused, terminally, and the
// change ends failed for a person to reconcile. Before the claims, the retry was a first send
// and the seller got the change twice.
func TestChangeRetriedAfterACrashAtASellerWithoutAWindowSendsNothing(t *testing.T) {
	t.Parallel()
	w := newChangeWorld(t, stagetest.Options{Seller: adcptest.SellerOptions{Idempotency: adcptest.IdempotencyUnsupported}})
	id := w.checked(t, "3500")
	w.committedThenCrashed(t, id)
	w.e.Seller.FailNextHTTP(1, 500)

	_, err := w.update(id)
	var te *workflow.TerminalError
	if !errors.As(err, &te) || te.Code != adcp.CodeNoReplayWindow {
		t.Fatalf("the retried update: %v, want a TerminalError %s", err, adcp.CodeNoReplayWindow)
	}
	if n := len(w.e.Seller.CallsTo(adcp.ToolUpdateMediaBuy)); n != 1 {
		t.Fatalf("%d update_media_buy reached the seller, want only the one before the crash", n)
	}
	if got := lapsedChecks(t, w, id); !slices.Equal(got, []bool{false}) {
		t.Errorf("looks at the seller %v, want one that could not tell", got)
	}
}

// breakers are the seller's circuit breaker settings: 3 transient failures in a row open it
// for 120 s.
var breakers = json.RawMessage(`{"circuit_breaker":{"failures":3,"cooldown_seconds":120}}`)

// An update the seller's open breaker refused sent nothing: once the breaker closes it goes
// out as a first send, which a seller without a replay window takes (a resend it would refuse
// for good).
func TestChangeRefusedByTheBreakerIsAFirstSendWhenItCloses(t *testing.T) {
	t.Parallel()
	w := newChangeWorld(t, stagetest.Options{Breakers: breakers, Seller: adcptest.SellerOptions{Idempotency: adcptest.IdempotencyUnsupported}})
	id := w.checked(t, "3500")
	w.e.Seller.FailNextHTTP(3, 503)
	for range 3 {
		if _, err := w.e.Client.GetMediaBuys(context.Background(), stagetest.SellerID, adcp.GetMediaBuysRequest{}); adcp.Decide(err) != adcp.DecisionRetry {
			t.Fatalf("read at the failing seller: %v", err)
		}
	}
	for range 2 {
		if out, err := w.update(id); err != nil || out.Unavailable == nil {
			t.Fatalf("update while the breaker is open: %+v, %v; want a wait for the seller", out, err)
		}
		if in := w.intent(t, id, updateIntent); !in.Unsent {
			t.Fatalf("the update intent after a refusal: %d claims, unsent %v; want unsent", in.Claims, in.Unsent)
		}
	}
	w.e.Clock.Advance(121 * time.Second)
	out, err := w.update(id)
	if err != nil || out.Status != workflow.StatusCompleted {
		t.Fatalf("update after the cool-down: %+v, %v", out, err)
	}
	if calls := w.e.Seller.CallsTo(adcp.ToolUpdateMediaBuy); len(calls) != 1 || originals(calls) != 1 {
		t.Fatalf("%d update_media_buy reached the seller, want one first send", len(calls))
	}
}

// legacyIntent stores what a change in flight at the deploy holds: the JSON of the whole
// adcp.Intent under the old key, no claims.
func legacyIntent(t *testing.T, w *changeWorld, id, task string, in adcp.Intent) {
	t.Helper()
	raw, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if _, created, err := w.e.Store.PutIntent(context.Background(), record.Intent{Tenant: stagetest.Tenant, OperationID: id, Task: task,
		IdempotencyKey: task + "-" + id, Request: raw, CreatedAt: w.e.Clock.Now()}); err != nil || !created {
		t.Fatalf("store the old intent: %v (created %v)", err, created)
	}
}

// oldUpdate is an update_media_buy intent of the change as the first attempt fixed it.
func oldUpdate(t *testing.T, w *changeWorld, id string) adcp.Intent {
	t.Helper()
	// The plan the check fixed: the seller's answer is judged against it.
	var p struct {
		Args adcp.UpdateMediaBuyRequest `json:"args"`
	}
	if err := json.Unmarshal(w.intent(t, id, "modification_plan").Request, &p); err != nil {
		t.Fatal(err)
	}
	args := p.Args
	args.Context = json.RawMessage(`{"change_id":"` + id + `"}`)
	in, err := adcp.NewIntent(adcp.ToolUpdateMediaBuy, args, w.e.Clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// A change in flight at the deploy holds its update intent in the old layout. Its retry reads
// it as the intent it holds and sends it as a resend (the attempt that stored it sent it at
// once): the seller with a replay window gets that intent's own key and bytes again.
func TestChangeInFlightAtTheDeployResendsItsOldIntent(t *testing.T) {
	t.Parallel()
	w := newChangeWorld(t, stagetest.Options{})
	id := w.checked(t, "3500")
	old := oldUpdate(t, w, id)
	legacyIntent(t, w, id, updateIntent, old)

	out, err := w.update(id)
	if err != nil || out.Status != workflow.StatusCompleted {
		t.Fatalf("the update after the deploy: %+v, %v", out, err)
	}
	calls := w.e.Seller.CallsTo(adcp.ToolUpdateMediaBuy)
	if len(calls) != 1 || string(calls[0].Arguments) != string(old.Body) {
		t.Fatalf("the seller got %d update_media_buy, want the old intent's bytes once", len(calls))
	}
	if in := w.intent(t, id, updateIntent); in.Claims != 1 || in.IdempotencyKey != updateIntent+"-"+id {
		t.Errorf("the old intent after its resend: %d claims, key %q; want one claim on the record as it was", in.Claims, in.IdempotencyKey)
	}
}

// The same old intent at a seller without a replay window is not sent again: it may have
// been applied, so the change ends failed rather than risk applying it twice.
func TestChangeInFlightAtTheDeployIsNotSentAgainWithoutAWindow(t *testing.T) {
	t.Parallel()
	w := newChangeWorld(t, stagetest.Options{Seller: adcptest.SellerOptions{Idempotency: adcptest.IdempotencyUnsupported}})
	id := w.checked(t, "3500")
	legacyIntent(t, w, id, updateIntent, oldUpdate(t, w, id))

	_, err := w.update(id)
	var te *workflow.TerminalError
	if !errors.As(err, &te) || te.Code != adcp.CodeNoReplayWindow {
		t.Fatalf("the update after the deploy: %v, want a TerminalError %s", err, adcp.CodeNoReplayWindow)
	}
	if n := len(w.e.Seller.CallsTo(adcp.ToolUpdateMediaBuy)); n != 0 {
		t.Fatalf("%d update_media_buy reached the seller, want none", n)
	}
}

// An old record that does not hold an intent is refused, not sent.
func TestChangeWithAnUnreadableOldIntentSendsNothing(t *testing.T) {
	t.Parallel()
	w := newChangeWorld(t, stagetest.Options{})
	id := w.checked(t, "3500")
	legacyIntent(t, w, id, updateIntent, adcp.Intent{Task: adcp.ToolCreateMediaBuy, Key: "k", Body: []byte(`{}`)})

	_, err := w.update(id)
	var te *workflow.TerminalError
	if !errors.As(err, &te) || te.Code != "bad_intent" {
		t.Fatalf("the update: %v, want a TerminalError bad_intent", err)
	}
	if n := len(w.e.Seller.CallsTo(adcp.ToolUpdateMediaBuy)); n != 0 {
		t.Fatalf("%d update_media_buy reached the seller, want none", n)
	}
}

// The outcome report is claimed as the update is: ApplyChange run again after a crash resends
// the stored report (same key) instead of a first send.
func TestChangeOutcomeReportRetriedIsAResend(t *testing.T) {
	t.Parallel()
	w := newChangeWorld(t, stagetest.Options{})
	id := w.checked(t, "3500")
	if out, err := w.update(id); err != nil || out.Status != workflow.StatusCompleted {
		t.Fatalf("update: %+v, %v", out, err)
	}
	for range 2 {
		if got, err := w.svc.Apply(context.Background(), w.in(id, modify.ActionApply)); err != nil || got.Outcome != modify.OutcomeApplied {
			t.Fatalf("apply: %+v, %v", got, err)
		}
	}
	var mine []adcptest.Call
	for _, c := range w.e.Gov.CallsTo(adcp.ToolReportPlanOutcome) {
		var a struct {
			Context struct {
				ChangeID string `json:"change_id"`
			} `json:"context"`
		}
		if json.Unmarshal(c.Arguments, &a) == nil && a.Context.ChangeID == id {
			mine = append(mine, c)
		}
	}
	if len(mine) != 2 || !mine[1].Replayed || string(mine[0].Arguments) != string(mine[1].Arguments) {
		t.Fatalf("governance got %d reports of the change, want the first and its replay", len(mine))
	}
	if in := w.intent(t, id, reportIntent); in.Claims != 2 {
		t.Errorf("the report intent: %d claims, want 2", in.Claims)
	}
}

// A rate-limited update_media_buy is waited out for the seller's retry_after (the state
// machine's ChangeSellerAvailable → WaitForChangeSeller), not left to the TransientError
// retrier's jitter, and the resend is the same key and bytes.
func TestChangeRateLimitedWaitsRetryAfter(t *testing.T) {
	t.Parallel()
	w := newChangeWorld(t, stagetest.Options{Seller: adcptest.SellerOptions{RetryAfter: 9}})
	id := w.checked(t, "3500")
	w.e.Seller.RateLimitNext(1)

	out, err := w.update(id)
	if err != nil || out.Unavailable == nil || out.Unavailable.RetryInSeconds != 9 {
		t.Fatalf("the rate-limited update: %+v, %v; want a 9 s wait", out, err)
	}
	w.e.Clock.Advance(9 * time.Second)
	if out, err = w.update(id); err != nil || out.Status != workflow.StatusCompleted {
		t.Fatalf("the update after the wait: %+v, %v", out, err)
	}
	calls := w.e.Seller.CallsTo(adcp.ToolUpdateMediaBuy)
	if len(calls) != 2 || string(calls[0].Arguments) != string(calls[1].Arguments) || calls[1].Time.Sub(calls[0].Time) < 9*time.Second {
		t.Fatalf("update_media_buy calls %d; want the same bytes again after 9 s", len(calls))
	}
}

// routeSecret is the route secret TestAChangeRegistersItsRoute reads.
type routeSecret []byte

func (r routeSecret) Get(context.Context, string) ([]byte, error) { return r, nil }

// TestAChangeRegistersItsRoute: the webhook URL an update_media_buy gives the seller carries
// the change's route, as a buy's create does: it opens to the change's tenant and seller, for
// the change only.
func TestAChangeRegistersItsRoute(t *testing.T) {
	w := newChangeWorld(t, stagetest.Options{})
	routes := webhookroute.FromSecret(routeSecret("the modify stage tests' route secret, 32 bytes+"), "routes")
	w.svc = modify.New(w.ledger, w.e.AdCP, modify.Policy{}, modify.Config{CallerURI: stagetest.CallerURI, PublicBaseURL: stagetest.BaseURL,
		Routes: routes, Now: w.e.Clock.Now, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	id := w.checked(t, "1600")
	if out, err := w.update(id); err != nil || out.Status != workflow.StatusCompleted {
		t.Fatalf("update: %+v, %v", out, err)
	}
	var args struct {
		Push struct {
			URL string `json:"url"`
		} `json:"push_notification_config"`
	}
	if err := json.Unmarshal(w.intent(t, id, updateIntent).Request, &args); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(args.Push.URL)
	if err != nil || u.Scheme+"://"+u.Host+u.Path != stagetest.BaseURL+"/v1/webhooks/adcp/"+id {
		t.Fatalf("push URL %q", args.Push.URL)
	}
	route := u.Query().Get(webhookroute.Param)
	if got, ok := routes.Open(context.Background(), id, route); !ok || got != (record.OperationOwner{Tenant: stagetest.Tenant, SellerID: w.buy.SellerID}) {
		t.Errorf("the route opens to %+v, %v", got, ok)
	}
	if _, ok := routes.Open(context.Background(), w.buy.ID, route); ok {
		t.Error("the change's route opens for its buy")
	}
}
