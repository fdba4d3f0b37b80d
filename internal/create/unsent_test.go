package create_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/adcptest"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/stage"
	"github.com/buyflow/buyflow/internal/stagetest"
	"github.com/buyflow/buyflow/internal/workflow"
)

// breakers are the seller's circuit breaker settings of these tests: 3 transient failures in
// a row open it for 120 s.
var breakers = json.RawMessage(`{"circuit_breaker":{"failures":3,"cooldown_seconds":120}}`)

func storedIntent(t *testing.T, e *stagetest.Env, opID, task string) *record.Intent {
	t.Helper()
	in, err := e.Store.GetIntent(context.Background(), stagetest.Tenant, opID, task)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// openSellerBreaker fails three reads at the seller in a row (as other functions' calls
// would), which opens its breaker.
func openSellerBreaker(t *testing.T, e *stagetest.Env) {
	t.Helper()
	e.Seller.FailNextHTTP(3, 503)
	for range 3 {
		if _, err := e.Client.GetMediaBuys(context.Background(), stagetest.SellerID, adcp.GetMediaBuysRequest{}); adcp.Decide(err) != adcp.DecisionRetry {
			t.Fatalf("read at the failing seller: %v", err)
		}
	}
}

// A seller without a replay window whose breaker is open at the first create: the refused
// creates sent nothing, so once the breaker closes the create goes out as a first send (a
// resend would be refused for good at such a seller), exactly once, with nothing to
// reconcile.
func TestBreakerRefusedCreateIsAFirstSendWhenTheBreakerCloses(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{Breakers: breakers, Seller: adcptest.SellerOptions{Idempotency: adcptest.IdempotencyUnsupported}})
	op := e.NewOp("approved,sync", false)
	e.Check(op)

	openSellerBreaker(t, e)
	reads := len(e.Seller.CallsTo("get_media_buys"))
	for range 2 {
		if out := e.Create(op); out.Unavailable == nil || out.Terminal {
			t.Fatalf("create while the breaker is open: output %+v, want a wait for the seller", out)
		}
		if in := storedIntent(t, e, op.ID, stage.IntentCreate); !in.Unsent {
			t.Errorf("intent after a refused create: %d claims, unsent %v; want unsent", in.Claims, in.Unsent)
		}
	}
	fixed := storedIntent(t, e, op.ID, stage.IntentCreate)

	e.Clock.Advance(121 * time.Second)
	out, err := e.CreateStage.CreateMediaBuy(context.Background(), stagetest.StageIn(op, workflow.ActionCreate))
	if err != nil || !out.Terminal || out.Status != workflow.StatusCompleted {
		t.Fatalf("create after the cool-down: %+v, %v", out, err)
	}
	calls := e.Seller.CallsTo("create_media_buy")
	if len(calls) != 1 || calls[0].Replayed {
		t.Fatalf("%d create_media_buy calls reached the seller, want 1 original", len(calls))
	}
	if got := stagetest.LastArgs(t, calls)["idempotency_key"]; got != fixed.IdempotencyKey {
		t.Fatalf("the seller got key %v, want the intent fixed before the refusals", got)
	}
	if n := len(e.Seller.CallsTo("get_media_buys")) - reads; n != 0 {
		t.Fatalf("%d get_media_buys by the create: nothing was ever sent, so there is no lapsed claim to reconcile", n)
	}
	if in := storedIntent(t, e, op.ID, stage.IntentCreate); in.Unsent || in.Claims != 3 {
		t.Fatalf("intent after the send: %d claims, unsent %v; want maybe sent after 3 claims", in.Claims, in.Unsent)
	}
}

// An intent whose send may have happened (the Lambda died after the seller committed) stays
// a resend through a refusal: the refused retry releases nothing, and the retry after it
// reconciles before anything is sent again.
func TestMaybeSentCreateStaysAResendThroughARefusal(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{Breakers: breakers})
	op := committedThenCrashed(e)
	openSellerBreaker(t, e)

	if out := e.Create(op); out.Unavailable == nil {
		t.Fatalf("refused retry: %+v, want a wait", out)
	}
	if in := storedIntent(t, e, op.ID, stage.IntentCreate); in.Unsent {
		t.Fatalf("intent after a refused resend: %d claims, unsent; want it still maybe sent", in.Claims)
	}
	e.Clock.Advance(121 * time.Second)
	if out := e.Create(op); out.Status != workflow.StatusCompleted {
		t.Fatalf("retry: %+v", out)
	}
	if n := len(e.Seller.CallsTo("create_media_buy")); n != 1 {
		t.Fatalf("%d create_media_buy calls, want 1 (the buy found by get_media_buys)", n)
	}
}

// A cancel the breaker refused is sent as a first send once it closes: a seller without a
// replay window would refuse a resend for good, and the buy would stay placed.
func TestBreakerRefusedCancelIsAFirstSendWhenTheBreakerCloses(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{Breakers: breakers, Seller: adcptest.SellerOptions{Idempotency: adcptest.IdempotencyUnsupported}})
	op, out := e.Placed("approved,sync")
	if out.Status != workflow.StatusCompleted {
		t.Fatalf("placed: %+v", out)
	}
	openSellerBreaker(t, e)
	cancel := workflow.StageInput{Action: workflow.ActionCancel, OperationID: op.ID, Tenant: stagetest.Tenant, Config: stagetest.RunConfig()}
	_, err := stagetest.Handle(t, e.CreateStage.Handle, cancel)
	stagetest.WantBare(t, err, "TransientError")
	if in := storedIntent(t, e, op.ID, stage.IntentCancel); !in.Unsent {
		t.Errorf("cancel intent after the refusal: %d claims, unsent %v; want unsent", in.Claims, in.Unsent)
	}
	e.Clock.Advance(121 * time.Second)
	got, err := e.CreateStage.Cancel(context.Background(), cancel)
	if err != nil || got.Status != workflow.StatusCanceled {
		t.Fatalf("cancel after the cool-down: %+v, %v", got, err)
	}
	if n := len(e.Seller.CallsTo("update_media_buy")); n != 1 {
		t.Fatalf("%d update_media_buy calls, want 1", n)
	}
}
