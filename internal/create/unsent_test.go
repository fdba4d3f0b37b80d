package create_test

import (
	"context"
	"testing"

	"github.com/buyflow/buyflow/internal/adcptest"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/stage"
	"github.com/buyflow/buyflow/internal/workflow"
)

func storedIntent(t *testing.T, e *env, opID, task string) *ledger.Intent {
	t.Helper()
	in, err := e.store.GetIntent(context.Background(), tenant, opID, task)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// A seller without a replay window whose breaker is open at the first create: the refused
// calls sent nothing, so once the breaker closes the create goes out as a first send (a
// resend would be refused for good at such a seller), exactly once, with nothing to
// reconcile.
func TestBreakerRefusedCreateIsAFirstSendWhenTheBreakerCloses(t *testing.T) {
	t.Parallel()
	guard := &switchGuard{}
	e := newEnv(t, envOptions{guard: guard, seller: adcptest.SellerOptions{Idempotency: adcptest.IdempotencyUnsupported}})
	op := e.newOp("approved,sync", false)
	e.check(op)

	guard.refusing.Store(true)
	for range 2 {
		if out := e.create(op); out.Unavailable == nil || out.Terminal {
			t.Fatalf("refused create: output %+v, want a wait for the seller", out)
		}
		if in := storedIntent(t, e, op.ID, stage.IntentCreate); !in.Unsent {
			t.Errorf("intent after a refused create: %d claims, unsent %v; want unsent", in.Claims, in.Unsent)
		}
	}
	fixed := storedIntent(t, e, op.ID, stage.IntentCreate)

	guard.refusing.Store(false)
	out, err := e.createStage.CreateMediaBuy(context.Background(), stageIn(op, workflow.ActionCreate))
	if err != nil || !out.Terminal || out.Status != workflow.StatusCompleted {
		t.Fatalf("create after the breaker closed: %+v, %v", out, err)
	}
	calls := e.seller.CallsTo("create_media_buy")
	if len(calls) != 1 || calls[0].Replayed {
		t.Fatalf("%d create_media_buy calls reached the seller, want 1 original", len(calls))
	}
	if got := lastArgs(t, calls)["idempotency_key"]; got != fixed.IdempotencyKey {
		t.Fatalf("the seller got key %v, want the intent fixed before the refusals", got)
	}
	if n := len(e.seller.CallsTo("get_media_buys")); n != 0 {
		t.Fatalf("%d get_media_buys: nothing was ever sent, so there is no lapsed claim to reconcile", n)
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
	guard := &switchGuard{}
	e := newEnv(t, envOptions{guard: guard})
	op := e.committedThenCrashed()

	guard.refusing.Store(true)
	if out := e.create(op); out.Unavailable == nil {
		t.Fatalf("refused retry: %+v, want a wait", out)
	}
	if in := storedIntent(t, e, op.ID, stage.IntentCreate); in.Unsent {
		t.Fatalf("intent after a refused resend: %d claims, unsent; want it still maybe sent", in.Claims)
	}
	guard.refusing.Store(false)
	if out := e.create(op); out.Status != workflow.StatusCompleted {
		t.Fatalf("retry: %+v", out)
	}
	if n := len(e.seller.CallsTo("create_media_buy")); n != 1 {
		t.Fatalf("%d create_media_buy calls, want 1 (the buy found by get_media_buys)", n)
	}
	if n := len(e.seller.CallsTo("get_media_buys")); n != 1 {
		t.Fatalf("%d get_media_buys, want the lapsed claim reconciled", n)
	}
}

// A cancel the breaker refused is sent as a first send once it closes: a seller without a
// replay window would refuse a resend for good, and the buy would stay placed.
func TestBreakerRefusedCancelIsAFirstSendWhenTheBreakerCloses(t *testing.T) {
	t.Parallel()
	guard := &switchGuard{}
	e := newEnv(t, envOptions{guard: guard, seller: adcptest.SellerOptions{Idempotency: adcptest.IdempotencyUnsupported}})
	op, out := e.placed("approved,sync")
	if out.Status != workflow.StatusCompleted {
		t.Fatalf("placed: %+v", out)
	}
	ctx := context.Background()
	guard.refusing.Store(true)
	_, err := handle(t, e.createStage.Handle, workflow.StageInput{Action: workflow.ActionCancel, OperationID: op.ID, Tenant: tenant, Config: cfg()})
	wantBare(t, err, "TransientError")
	if in := storedIntent(t, e, op.ID, stage.IntentCancel); !in.Unsent {
		t.Errorf("cancel intent after the refusal: %d claims, unsent %v; want unsent", in.Claims, in.Unsent)
	}
	guard.refusing.Store(false)
	got, err := e.createStage.Cancel(ctx, workflow.StageInput{OperationID: op.ID, Tenant: tenant, Config: cfg()})
	if err != nil || got.Status != workflow.StatusCanceled {
		t.Fatalf("cancel after the breaker closed: %+v, %v", got, err)
	}
	if n := len(e.seller.CallsTo("update_media_buy")); n != 1 {
		t.Fatalf("%d update_media_buy calls, want 1", n)
	}
}
