package create_test

import (
	"context"
	"testing"

	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/stagetest"
	"github.com/buyflow/buyflow/internal/workflow"
)

// The seller's webhook completes the buy while a retried create checks its lapsed claim: the
// check is not recorded after the completion (it asked about a status that was gone), and
// the retry reports the buy as the ledger holds it.
func TestLapsedClaimCheckIsNotRecordedAfterTheWebhookCompletedTheBuy(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{})
	op := committedThenCrashed(e)
	e.AdCP.BeforeListBuys = func() {
		mb := e.Seller.MediaBuys()[0]["media_buy_id"].(string)
		if _, err := e.Store.Transition(context.Background(), stagetest.Tenant, op.ID, workflow.StatusCompleted, record.AnyVersion,
			record.Patch{MediaBuyID: &mb, Actor: "seller:" + stagetest.SellerID, EventType: record.EventWebhook}); err != nil {
			t.Errorf("the webhook's completion: %v", err)
		}
	}
	out := e.Create(op)
	if !out.Terminal || out.Status != workflow.StatusCompleted {
		t.Fatalf("retry: %+v, want the completion the webhook recorded", out)
	}
	evs := stagetest.Events(t, e, op.ID)
	completed := -1
	for i, ev := range evs {
		if ev.To == workflow.StatusCompleted {
			completed = i
		}
		if ev.Type == record.EventLapsedClaimCheck && completed >= 0 {
			t.Errorf("event %d: %s after the completion at %d", i, ev.Type, completed)
		}
	}
	if completed < 0 {
		t.Fatal("no completion in the timeline")
	}
}
