package create_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/adcptest"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/stage"
	"github.com/buyflow/buyflow/internal/stagetest"
	"github.com/buyflow/buyflow/internal/webhookroute"
	"github.com/buyflow/buyflow/internal/workflow"
)

func TestCreateSyncWriteAheadAndFrozenBytes(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{})
	op := e.NewOp("approved,sync", false)
	e.Check(op)

	// The intent must be in the ledger, byte for byte, before the seller sees the call.
	var sawIntent atomic.Bool
	e.AdCP.BeforeCreate = func(in adcp.Intent) {
		li, err := e.Store.GetIntent(context.Background(), stagetest.Tenant, op.ID, "create_media_buy")
		if err != nil {
			t.Errorf("intent not stored before the call: %v", err)
			return
		}
		if !bytes.Equal(li.Request, in.Body) || li.IdempotencyKey != in.Key {
			t.Errorf("sent bytes differ from the stored intent")
		}
		sawIntent.Store(true)
	}
	out := e.Create(op)
	if !sawIntent.Load() {
		t.Fatal("create_media_buy was not called")
	}
	if !out.Terminal || out.Status != workflow.StatusCompleted || !stagetest.SafetyNet(out.Next.IntervalSeconds) {
		t.Fatalf("output = %+v", out)
	}
	got := e.Op(op.ID)
	if got.Status != workflow.StatusCompleted || got.MediaBuyID == "" || got.Deadline.IsZero() {
		t.Fatalf("operation = %+v", got)
	}

	li, err := e.Store.GetIntent(context.Background(), stagetest.Tenant, op.ID, "create_media_buy")
	if err != nil {
		t.Fatal(err)
	}
	calls := e.Seller.CallsTo("create_media_buy")
	if len(calls) != 1 {
		t.Fatalf("%d create calls", len(calls))
	}
	// The seller received exactly the stored bytes (the MCP layer may only re-space them).
	if !jsonEqual(calls[0].Arguments, li.Request) {
		t.Fatalf("seller got\n%s\nstored\n%s", calls[0].Arguments, li.Request)
	}
	var args struct {
		IdempotencyKey    string `json:"idempotency_key"`
		PlanID            string `json:"plan_id"`
		GovernanceContext string `json:"governance_context"`
		Push              struct {
			URL         string `json:"url"`
			OperationID string `json:"operation_id"`
			Token       string `json:"token"`
		} `json:"push_notification_config"`
		Context map[string]any `json:"context"`
	}
	if err := json.Unmarshal(li.Request, &args); err != nil {
		t.Fatal(err)
	}
	if args.IdempotencyKey != li.IdempotencyKey || args.PlanID != stagetest.PlanID || args.GovernanceContext != got.GovernanceContext ||
		args.Push.URL != stagetest.BaseURL+"/v1/webhooks/adcp/"+op.ID || args.Push.OperationID != op.ID || args.Context["operation_id"] != op.ID {
		t.Fatalf("create args = %s", li.Request)
	}
	if record.HashToken(args.Push.Token) != got.WebhookTokenHash || len(args.Push.Token) < 16 {
		t.Fatal("the webhook token's hash is not the one stored on the operation")
	}
	for _, ev := range stagetest.Events(t, e, op.ID) {
		if strings.Contains(string(ev.Detail), args.Push.Token) || strings.Contains(string(ev.Detail), got.GovernanceContext) || strings.Contains(ev.Reason, args.Push.Token) {
			t.Fatalf("event %s leaks a secret: %s", ev.Type, ev.Detail)
		}
	}
	// A create retried after the answer was recorded sends nothing.
	if again := e.Create(op); again.Status != workflow.StatusCompleted || len(e.Seller.CallsTo("create_media_buy")) != 1 {
		t.Fatalf("retry = %+v", again)
	}
}

func TestCreateAsyncSubmitted(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{})
	op, out := e.Placed("approved,async_complete")
	// The first wait is a full safety-net round: the sweep, not a short first poll, notices a
	// quick seller.
	if out.Terminal || out.Status != workflow.StatusSubmitted || out.NeedsDecision() || !stagetest.SafetyNet(out.Next.IntervalSeconds) ||
		out.Next.DeadlineUnix == 0 || out.Next.Round != 0 {
		t.Fatalf("output = %+v", out)
	}
	if op.Status != workflow.StatusSubmitted || op.SellerTaskID == "" {
		t.Fatalf("operation = %+v", op)
	}
}

// TestCreateLongNetWhileSweepRuns: a buy placed while the sweep's heartbeat is fresh waits
// until its deadline before its own first poll: the sweep will notice the seller first.
func TestCreateLongNetWhileSweepRuns(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{})
	now := e.Clock.Now()
	if err := e.Store.PutSweepHeartbeat(context.Background(), record.SweepHeartbeat{At: now, Until: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	// The stage reads the clock somewhere between before and after (seconds apart on a loaded
	// machine): the interval is what was left to the deadline then.
	before := e.Clock.Now().Unix()
	_, out := e.Placed("approved,async_complete")
	if left := out.Next.DeadlineUnix - before; int64(out.Next.IntervalSeconds) < out.Next.DeadlineUnix-e.Clock.Now().Unix()-5 || int64(out.Next.IntervalSeconds) > left {
		t.Fatalf("first interval %d s with %d s to the deadline; want until the deadline", out.Next.IntervalSeconds, left)
	}
}

func TestCreateInputRequired(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{})
	op, out := e.Placed("approved,input_required")
	if out.Status != workflow.StatusInputRequired || !out.NeedsDecision() || op.SellerTaskID == "" {
		t.Fatalf("output = %+v, operation %+v", out, op)
	}
}

// committedThenCrashed checks a new sync buy and runs its first create, which dies after the
// seller committed the buy and before the answer was recorded (crashOnce).
func committedThenCrashed(e *stagetest.Env) *record.Operation {
	e.T.Helper()
	op := e.NewOp("approved,sync", false)
	e.Check(op)
	crashOnce(e, workflow.StatusCompleted)
	if _, err := e.CreateStage.CreateMediaBuy(context.Background(), stagetest.StageIn(op, workflow.ActionCreate)); err == nil {
		e.T.Fatal("the simulated crash did not fail the first attempt")
	}
	return op
}

// crashOnce makes the first transition to status to fail, as if the Lambda died after the
// seller answered and before the answer was recorded.
func crashOnce(e *stagetest.Env, to workflow.Status) {
	var crashed atomic.Bool
	e.Ledger.OnTransition = func(ctx context.Context, tn, id string, st workflow.Status, v int64, ch record.Patch) (*record.Operation, error) {
		if st == to && crashed.CompareAndSwap(false, true) {
			return nil, errors.New("lambda died")
		}
		return e.Store.Transition(ctx, tn, id, st, v, ch)
	}
}

func TestCreateRetryAfterCrashReusesKeyAndBytes(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{})
	op := e.NewOp("approved,async_complete", false)
	e.Check(op)
	crashOnce(e, workflow.StatusSubmitted)

	_, err := stagetest.Handle(t, e.CreateStage.Handle, stagetest.StageIn(op, workflow.ActionCreate))
	stagetest.WantBare(t, err, "TransientError")
	out := e.Create(op)
	if out.Status != workflow.StatusSubmitted {
		t.Fatalf("output = %+v", out)
	}
	calls := e.Seller.CallsTo("create_media_buy")
	if len(calls) != 2 || !jsonEqual(calls[0].Arguments, calls[1].Arguments) || !calls[1].Replayed {
		t.Fatalf("want the same bytes resent and replayed; %d calls", len(calls))
	}
	if n := len(e.Seller.CallsTo("get_media_buys")); n != 1 {
		t.Fatalf("%d get_media_buys, want the lapsed claim reconciled first", n)
	}
	if n := len(e.Seller.Tasks()); n != 1 {
		t.Fatalf("%d seller tasks, want 1", n)
	}
	if got := e.Op(op.ID); got.SellerTaskID != e.Seller.Tasks()[0].ID {
		t.Fatalf("task id = %q", got.SellerTaskID)
	}
}

func TestCreateLapsedClaimReconciledWithoutResend(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{})
	op := committedThenCrashed(e)
	out := e.Create(op)
	if !out.Terminal || out.Status != workflow.StatusCompleted {
		t.Fatalf("output = %+v", out)
	}
	if n := len(e.Seller.CallsTo("create_media_buy")); n != 1 {
		t.Fatalf("%d create calls, want 1: the buy was found by get_media_buys", n)
	}
	buys := e.Seller.MediaBuys()
	if len(buys) != 1 || e.Op(op.ID).MediaBuyID != buys[0]["media_buy_id"] {
		t.Fatalf("media buys = %v, recorded %q", buys, e.Op(op.ID).MediaBuyID)
	}
	// Finance tells the create stage's check apart from the sweep's events.
	checks := 0
	for _, ev := range stagetest.Events(t, e, op.ID) {
		switch ev.Type {
		case record.EventLapsedClaimCheck:
			checks++
		case record.EventReconcile:
			t.Errorf("the create stage wrote a sweep event: %+v", ev)
		}
	}
	if checks != 1 {
		t.Errorf("%d lapsed_claim_check events, want 1", checks)
	}
}

func TestCreateIdempotencyConflictIsTerminal(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{})
	op := e.NewOp("approved,sync", false)
	e.Check(op)
	ctx := context.Background()

	// Someone used our key at the seller with another body (e.g. a bug that re-planned).
	const key = "conflict-key-0000000000000001"
	in, err := adcp.NewIntent(adcp.ToolCreateMediaBuy, json.RawMessage(`{"idempotency_key":"`+key+`","account":{"account_id":"acc_1"},
		"brand":{"domain":"acme.example"},"start_time":"asap","end_time":"2030-01-31T23:59:59Z",
		"packages":[{"product_id":"prod_1","pricing_option_id":"cpm_1","budget":1}]}`), e.Clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.CreateMediaBuy(ctx, stagetest.SellerID, in); err != nil {
		t.Fatal(err)
	}
	ours, err := adcp.NewIntent(adcp.ToolCreateMediaBuy, json.RawMessage(`{"idempotency_key":"`+key+`","account":{"account_id":"acc_1"},
		"brand":{"domain":"acme.example"},"start_time":"asap","end_time":"2030-01-31T23:59:59Z",
		"packages":[{"product_id":"prod_1","pricing_option_id":"cpm_1","budget":5000}]}`), e.Clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.Store.PutIntent(ctx, record.Intent{Tenant: stagetest.Tenant, OperationID: op.ID, Task: "create_media_buy",
		IdempotencyKey: ours.Key, Request: ours.Body, CreatedAt: ours.Created}); err != nil {
		t.Fatal(err)
	}
	_, err = stagetest.Handle(t, e.CreateStage.Handle, stagetest.StageIn(op, workflow.ActionCreate))
	stagetest.WantBare(t, err, "TerminalError")
	if !strings.Contains(err.Error(), "IDEMPOTENCY_CONFLICT") {
		t.Fatalf("err = %v", err)
	}
}

// A transient failure with the seller's retry_after is waited out exactly (the state machine's
// SellerAvailable → WaitForSeller), not left to the TransientError retrier, whose full jitter
// would resend sooner than the seller asked (the buyer storyboards' retry_delay check).
func TestCreateRateLimitedWaitsRetryAfterThenResends(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{Seller: adcptest.SellerOptions{RetryAfter: 7}})
	op := e.NewOp("approved,sync", false)
	e.Check(op)
	e.Seller.RateLimitNext(1)

	got, err := stagetest.Handle(t, e.CreateStage.Handle, stagetest.StageIn(op, workflow.ActionCreate))
	if err != nil {
		t.Fatalf("err = %v, want the wait as output", err)
	}
	if out := got.(workflow.SellerOutput); out.Unavailable == nil || out.Unavailable.RetryInSeconds != 7 || out.Unavailable.Role != "seller" || out.Terminal {
		t.Fatalf("output = %+v, want a 7 s wait before CreateMediaBuy again", out)
	}
	e.Clock.Advance(7 * time.Second)
	out := e.Create(op)
	if out.Status != workflow.StatusCompleted {
		t.Fatalf("output = %+v", out)
	}
	calls := e.Seller.CallsTo("create_media_buy")
	if len(calls) != 2 || !jsonEqual(calls[0].Arguments, calls[1].Arguments) {
		t.Fatalf("%d calls; the retry must resend the same bytes", len(calls))
	}
	if d := calls[1].Time.Sub(calls[0].Time); d < 7*time.Second {
		t.Errorf("resent after %s, before the seller's retry_after", d)
	}
}

// Past retryAfterSpan from the first send the wait is no longer taken: the failure goes back to
// the state machine's retrier, which gives up after its attempts.
func TestCreateRateLimitedLongAfterTheFirstSendIsTransient(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{})
	op := e.NewOp("approved,sync", false)
	e.Check(op)
	e.Seller.RateLimitNext(2)
	if out := e.Create(op); out.Unavailable == nil {
		t.Fatalf("first answer = %+v, want a wait", out)
	}
	e.Clock.Advance(11 * time.Minute)
	_, err := stagetest.Handle(t, e.CreateStage.Handle, stagetest.StageIn(op, workflow.ActionCreate))
	stagetest.WantBare(t, err, "TransientError")
	var te *workflow.TransientError
	if !errors.As(err, &te) || te.RetryAfterSeconds < 1 {
		t.Fatalf("err = %#v, want retry_after kept on the error", err)
	}
}

func TestCreateRechecksLapsedGovernanceAfterApproval(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{Policy: stagetest.PolicyFunc(func(string, string) (bool, string) { return true, "over the threshold" })})
	op := e.NewOp("approved,sync", false)
	first := e.Check(op)
	if first.Decision != workflow.GovernanceNeedsApproval {
		t.Fatalf("check = %+v", first)
	}
	// The approval is decided just before the token lapses; create runs just after.
	e.Clock.Advance(e.Op(op.ID).GovernanceExpiresAt.Sub(e.Clock.Now()) + time.Second)
	out := e.Create(op)
	if out.Status != workflow.StatusCompleted {
		t.Fatalf("output = %+v", out)
	}
	got := e.Op(op.ID)
	if n := len(e.Gov.CallsTo("check_governance")); n != 2 || got.GovernanceCheckID == first.CheckID {
		t.Fatalf("%d checks, check id %s (first %s): want a re-check before spend", n, got.GovernanceCheckID, first.CheckID)
	}
	if args := stagetest.LastArgs(t, e.Seller.CallsTo("create_media_buy")); args["governance_context"] != got.GovernanceContext {
		t.Fatal("the seller did not get the re-checked governance_context")
	}
}

func TestCreateGovernanceExpiredSendsNothing(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{})
	op := e.NewOp("approved,sync", false)
	e.Check(op)
	e.Clock.Advance(e.Op(op.ID).GovernanceExpiresAt.Sub(e.Clock.Now()) + 1)
	_, err := stagetest.Handle(t, e.CreateStage.Handle, stagetest.StageIn(op, workflow.ActionCreate))
	stagetest.WantBare(t, err, "TerminalError")
	if n := len(e.Seller.Calls()); n != 0 {
		t.Fatalf("seller saw %d calls", n)
	}
}

func TestCancelCompensates(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{})
	op, _ := e.Placed("approved,sync")

	raw, err := stagetest.Handle(t, e.CreateStage.Handle, stagetest.StageIn(op, workflow.ActionCancel))
	if err != nil {
		t.Fatal(err)
	}
	if out := raw.(workflow.SellerOutput); out.Status != workflow.StatusCanceled || !out.Terminal {
		t.Fatalf("output = %+v", out)
	}
	args := stagetest.LastArgs(t, e.Seller.CallsTo("update_media_buy"))
	if args["media_buy_id"] != op.MediaBuyID || args["canceled"] != true || args["cancellation_reason"] == "" {
		t.Fatalf("update args = %v", args)
	}
	if st := e.Seller.MediaBuys()[0]["status"]; st != "canceled" {
		t.Fatalf("seller media buy status = %v", st)
	}
	// The ledger says what the seller now holds: the completed buy is canceled.
	if got := e.Op(op.ID); got.Status != workflow.StatusCanceled || got.Reason == "" {
		t.Fatalf("operation after compensation: %s (reason %q), want canceled with a reason", got.Status, got.Reason)
	}
	// A repeated compensation resends the same intent.
	if _, err := e.CreateStage.Cancel(context.Background(), stagetest.StageIn(op, workflow.ActionCancel)); err != nil {
		t.Fatal(err)
	}
	calls := e.Seller.CallsTo("update_media_buy")
	if len(calls) != 2 || !jsonEqual(calls[0].Arguments, calls[1].Arguments) {
		t.Fatalf("%d update calls", len(calls))
	}
}

// A compensation of a buy a change paused meanwhile cancels it too: paused is placed.
func TestCancelCompensatesAPausedBuy(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{})
	op, _ := e.Placed("approved,sync")
	if _, err := e.Store.FollowChange(context.Background(), stagetest.Tenant, op.ID, workflow.StatusCompleted, workflow.StatusPaused, op.BudgetTotal, record.Patch{Actor: "seller:x"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateStage.Cancel(context.Background(), stagetest.StageIn(op, workflow.ActionCancel)); err != nil {
		t.Fatal(err)
	}
	if got := e.Op(op.ID); got.Status != workflow.StatusCanceled || got.Reason != "governance findings required an undo" {
		t.Fatalf("a paused buy after compensation: %s (reason %q), want canceled, with the undo as its reason", got.Status, got.Reason)
	}
}

// Before completion the cancel is recorded but the status is left to RecordFailure, which
// follows on every such path and says why (expired, rejected).
func TestCancelBeforeCompletionLeavesStatusToFailure(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{})
	op, _ := e.Placed("approved,input_required")
	out, err := e.CreateStage.Cancel(context.Background(), stagetest.StageIn(op, workflow.ActionCancel))
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != workflow.StatusInputRequired || out.Terminal || e.Op(op.ID).Status != workflow.StatusInputRequired {
		t.Fatalf("output = %+v, status %s: want input_required left for RecordFailure", out, e.Op(op.ID).Status)
	}
	evs, err := e.Store.ListEvents(context.Background(), op.Tenant, op.ID, 100, "")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(evs.Items, func(ev record.Event) bool { return ev.Type == record.EventCancel }) {
		t.Fatal("no cancel event")
	}
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// A cancel of a buy whose task the seller forgot (a restart lost it) cannot name a media buy;
// its event says an order may still exist at the seller and what to do, not that there is none.
func TestCancelOfALostTaskSaysAnOrderMayExist(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{Seller: adcptest.SellerOptions{ForgetTasksOnRestart: true}})
	op, _ := e.Placed("approved,input_required")
	e.Seller.Restart()
	if _, err := e.CreateStage.Cancel(context.Background(), stagetest.StageIn(op, workflow.ActionCancel)); err != nil {
		t.Fatal(err)
	}
	evs, err := e.Store.ListEvents(context.Background(), op.Tenant, op.ID, 100, "")
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(evs.Items, func(ev record.Event) bool { return ev.Type == record.EventCancel })
	if i < 0 {
		t.Fatal("no cancel event")
	}
	if r := evs.Items[i].Reason; !strings.Contains(r, "may still exist") || !strings.Contains(r, op.PONumber) || !strings.Contains(r, op.SellerTaskID) {
		t.Fatalf("cancel reason %q: want the lost task, the PO and that an order may exist", r)
	}
}

// A seller listing the compact lifecycle tools (media_buy.lifecycle_tools, AdCP 3.2) is bought
// from and canceled through the create_media_buy/update_media_buy facades, which 3.x keeps
// (docs/seller-onboarding.md: buyflow never calls buy_products, accept_proposal or
// control_media_buy).
func TestCreateAtASellerListingCompactLifecycleToolsUsesTheFacades(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{Seller: adcptest.SellerOptions{Version: adcptest.Version32,
		LifecycleTools: []string{"list_products", "buy_products", "accept_proposal", "control_media_buy"}}})
	op, out := e.Placed("approved,sync")
	if out.Status != workflow.StatusCompleted || op.MediaBuyID == "" {
		t.Fatalf("output = %+v, operation %s", out, op.Status)
	}
	if _, err := e.CreateStage.Cancel(context.Background(), stagetest.StageIn(op, workflow.ActionCancel)); err != nil {
		t.Fatal(err)
	}
	var tools []string
	for _, c := range e.Seller.Calls() {
		tools = append(tools, c.Tool)
		if c.ValidationError != "" || c.IsError {
			t.Errorf("%s refused: %s %s", c.Tool, c.ValidationError, c.ErrorCode)
		}
	}
	for _, want := range []string{"get_adcp_capabilities", "create_media_buy", "update_media_buy"} {
		if !slices.Contains(tools, want) {
			t.Errorf("calls %v lack %s", tools, want)
		}
	}
	for _, compact := range []string{"buy_products", "accept_proposal", "control_media_buy", "list_products"} {
		if slices.Contains(tools, compact) {
			t.Errorf("called the compact tool %s: %v", compact, tools)
		}
	}
	if a := stagetest.LastArgs(t, e.Seller.CallsTo("create_media_buy")); a["adcp_version"] != "3.2" {
		t.Errorf("create spoke %v, want 3.2 (the seller lists only 3.2)", a["adcp_version"])
	}
}

// routeSecret is the route secret TestCreateRegistersTheRoute reads.
type routeSecret []byte

func (r routeSecret) Get(context.Context, string) ([]byte, error) { return r, nil }

// TestCreateRegistersTheRoute: with the route key readable, the webhook URL the seller is given
// carries the operation's route, which opens, for that operation only, to its tenant and
// seller; the reporting_webhook, the same URL, carries it too.
func TestCreateRegistersTheRoute(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{})
	routes := webhookroute.FromSecret(routeSecret("the create stage tests' route secret, 32 bytes+"), "routes")
	e.Build(stage.Options{Routes: routes})
	op := e.NewOp("approved,sync", false)
	e.Check(op)
	if out := e.Create(op); out.Status != workflow.StatusCompleted {
		t.Fatalf("output = %+v", out)
	}
	li, err := e.Store.GetIntent(context.Background(), stagetest.Tenant, op.ID, "create_media_buy")
	if err != nil {
		t.Fatal(err)
	}
	var args struct {
		Push struct {
			URL string `json:"url"`
		} `json:"push_notification_config"`
	}
	if err := json.Unmarshal(li.Request, &args); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(args.Push.URL)
	if err != nil || u.Scheme+"://"+u.Host+u.Path != stagetest.BaseURL+"/v1/webhooks/adcp/"+op.ID {
		t.Fatalf("push URL %q", args.Push.URL)
	}
	route := u.Query().Get(webhookroute.Param)
	if got, ok := routes.Open(context.Background(), op.ID, route); !ok || got != (record.OperationOwner{Tenant: stagetest.Tenant, SellerID: op.SellerID}) {
		t.Errorf("the route opens to %+v, %v", got, ok)
	}
	if strings.Contains(args.Push.URL, stagetest.Tenant) {
		t.Errorf("the URL %q shows the tenant", args.Push.URL)
	}
	if _, ok := routes.Open(context.Background(), "another-op", route); ok {
		t.Error("the route opens for another operation")
	}
}
