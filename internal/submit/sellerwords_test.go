package submit

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/buyflow/buyflow/internal/buytest"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/workflow"
)

// While the buy waits on the seller, GET shows the seller's latest words about it (a poll's or
// a webhook's message), with the status they came with; once the buy is placed it no longer
// waits, and they are left to the timeline.
func TestGetShowsWhatTheSellerSaysTheBuyWaitsFor(t *testing.T) {
	svc, store, _ := newService(t)
	ctx := context.Background()
	out, err := svc.Submit(ctx, acme, "key-words-1", buytest.Marshal(t, buytest.Example(t, "media-buy.json")))
	if err != nil {
		t.Fatal(err)
	}
	op, err := store.GetOperation(ctx, "acme", out.OperationID)
	if err != nil {
		t.Fatal(err)
	}
	for _, to := range []workflow.Status{workflow.StatusCreating, workflow.StatusSubmitted, workflow.StatusWorking} {
		if op, err = store.Transition(ctx, "acme", op.ID, to, op.Version, record.Patch{Actor: "system"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, ev := range []record.Event{
		{Type: record.EventPoll, Actor: "seller:sim-seller", Detail: json.RawMessage(`{"seller_status":"submitted","message":"queued"}`)},
		{Type: record.EventWebhook, Actor: "seller:sim-seller", Detail: json.RawMessage(`{"seller_status":"working","message":"IO review by <b>our</b> sales team"}`)},
		{Type: record.EventPoll, Actor: "seller:sim-seller", Detail: json.RawMessage(`{"seller_status":"working"}`)},
	} {
		if err := store.AppendEvent(ctx, "acme", op.ID, ev); err != nil {
			t.Fatal(err)
		}
	}
	v, err := svc.Get(ctx, "acme", op.ID)
	if err != nil {
		t.Fatal(err)
	}
	if v.Seller == nil || v.Seller.Message != "IO review by <b>our</b> sales team" || v.Seller.SellerStatus != "working" || v.Seller.At == "" {
		t.Fatalf("seller = %+v, want the webhook's words", v.Seller)
	}
	if _, err := store.Transition(ctx, "acme", op.ID, workflow.StatusCompleted, op.Version, record.Patch{Actor: "system"}); err != nil {
		t.Fatal(err)
	}
	if v, _ = svc.Get(ctx, "acme", op.ID); v.Seller != nil {
		t.Fatalf("a placed buy still says it waits: %+v", v.Seller)
	}
}
