package webhook_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/sellertask"
	"github.com/buyflow/buyflow/internal/webhook"
	"github.com/buyflow/buyflow/internal/workflow"
)

// The completion webhook the official SDK sends after a synchronous update_media_buy is
// acknowledged in the words of what the task was: an update, not a create.
func TestTheEchoOfASynchronousUpdateIsCalledAnUpdate(t *testing.T) {
	e := newEnv(t)
	op, err := e.store.CreateOperation(e.ctx, record.Operation{ID: "chg-1", Tenant: tenant, SellerID: seller9421, Status: workflow.StatusCreating,
		BudgetTotal: "1500.00", Currency: "USD", Kind: record.KindModification, ParentID: "op-0", MediaBuyID: "mb-sync"})
	if err != nil {
		t.Fatal(err)
	}
	hash := record.HashToken(token("chg-1"))
	if _, err := e.store.Transition(e.ctx, tenant, "chg-1", workflow.StatusCompleted, op.Version, record.Patch{WebhookTokenHash: &hash, Actor: "seller:" + seller9421}); err != nil {
		t.Fatal(err)
	}
	p := payload("chg-1", "completed", key("u"))
	delete(p, "operation_id")
	p["task_id"], p["task_type"] = "sync-6f1c2a8e-2b7d-4a53-9d3e-0c1a2b3c4d5e", "update_media_buy"
	resp := e.deliver("chg-1", seller9421, p, signOpts{})
	if resp.StatusCode != http.StatusOK || outcome(t, resp) != webhook.OutcomeAcknowledged {
		t.Fatalf("answer = %d %s", resp.StatusCode, resp.Body)
	}
	evs := e.webhookEvents("chg-1")
	if len(evs) != 1 || !strings.Contains(evs[0].Reason, "synchronous update") || strings.Contains(evs[0].Reason, "create") {
		t.Fatalf("events %+v", evs)
	}
}

// The seller's own words on a delivery (an IO review under way) stay on the timeline,
// bounded, whether the delivery moved the buy or not.
func TestTheSellersMessageIsKeptOnTheWebhookEvent(t *testing.T) {
	e := newEnv(t)
	e.op("op-1", seller9421, true)
	p := payload("op-1", "working", key("w"))
	p["message"] = "IO review by our sales team; expect 2-3 business days"
	if resp := e.deliver("op-1", seller9421, p, signOpts{}); outcome(t, resp) != webhook.OutcomeApplied {
		t.Fatalf("answer = %d %s", resp.StatusCode, resp.Body)
	}
	long := payload("op-1", "working", key("x"))
	long["message"] = strings.Repeat("é", 3000)
	if resp := e.deliver("op-1", seller9421, long, signOpts{}); outcome(t, resp) != webhook.OutcomeStale {
		t.Fatalf("answer = %d %s", resp.StatusCode, resp.Body)
	}
	evs := e.webhookEvents("op-1")
	if len(evs) != 2 {
		t.Fatalf("%d events, want 2", len(evs))
	}
	for i, want := range []string{"IO review by our sales team; expect 2-3 business days", strings.Repeat("é", 500)} {
		var d struct {
			Message string `json:"message"`
		}
		if err := json.Unmarshal(evs[i].Detail, &d); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(d.Message, want) || len(d.Message) > sellertask.MaxMessageBytes+len("…") {
			t.Errorf("event %d message = %.80q (%d bytes)", i, d.Message, len(d.Message))
		}
	}
}
