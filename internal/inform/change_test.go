package inform

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/statusevent"
	"github.com/buyflow/buyflow/internal/workflow"
)

// What the requester is told about a change comes from the change's own record: the approved
// "after" is the approval's amount, the applied one is what the change asked the seller for,
// whether or not the change's applied event is readable yet (it is written after the status
// the message tells about).
func TestAChangeIsToldWithItsOwnAmounts(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	f.buy(t, "op-1")
	if _, err := f.store.CreateOperation(ctx, record.Operation{ID: "chg-1", Tenant: "acme", SellerID: "seller-a", Kind: record.KindModification,
		ParentID: "op-1", BudgetTotal: "3000.00", Currency: "USD", NotifySlack: "U024BE7LH",
		Change: json.RawMessage(`{"kind":"budget","total":"14000.25"}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.CreateApproval(ctx, record.Approval{ID: "ap-c", Tenant: "acme", OperationID: "chg-1", TaskToken: "token",
		Approvers: []string{"U0APPROVER"}, Amount: "14000.25", Currency: "USD", ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := f.store.AppendEvent(ctx, "acme", "chg-1", record.Event{Type: record.EventApprovalRequested, Detail: json.RawMessage(`{"approval_id":"ap-c"}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Decide(ctx, "ap-c", record.Decision{Outcome: record.ApprovalApproved, By: "U0APPROVER"}); err != nil {
		t.Fatal(err)
	}
	ev := func(seq int64, from, to workflow.Status) json.RawMessage {
		return envelope(t, statusevent.Detail{Kind: statusevent.KindChange, OperationID: "chg-1", ParentID: "op-1", Sequence: seq,
			From: string(from), To: string(to), SellerID: "seller-a", Amount: &statusevent.Amount{Value: "3000.00", Currency: "USD"},
			Links: statusevent.Links{Self: "https://api.example.com/v1/media-buys/op-1"}})
	}
	approved := f.handled(t, ev(4, workflow.StatusAwaitingApproval, workflow.StatusCreating))
	wantAll(t, approved, "Approved: your change", "USD 3,000.00 → USD 14,000.25")
	// No modification_applied event on the change's timeline: the message must not need one.
	applied := f.handled(t, ev(6, workflow.StatusWorking, workflow.StatusCompleted))
	wantAll(t, applied, "Applied: your change", "the budget is now USD 3,000.00 → USD 14,000.25")
	for _, body := range []string{approved, applied} {
		if strings.Contains(body, "unchanged") {
			t.Errorf("a budget change is told as unchanged: %s", body)
		}
	}
}
