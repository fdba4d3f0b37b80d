package webhook_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/buyflow/buyflow/internal/record"
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
