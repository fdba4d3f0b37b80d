package e2e

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/apiclient"
)

// The buyer's projection says who is asked until when, the approver finds the buy in their
// terminal with every package, decides from the link it gives them, and the buyer then sees
// who decided. Another tenant's approver sees nothing of it.
func TestApproverInboxAndTheBuyersView(t *testing.T) {
	c := begin(t)
	if suite.local == nil {
		t.Skip("the approver routes take the approver from the IAM identity; on a deployed stack run them as a mapped approver")
	}
	sub := submit(t, c, buy{PO: po(t), Budgets: []float64{8250.5, 4250}, Sim: "async_complete"})
	op := waitFor(t, c, sub.OperationID, 30*time.Second, func(op apiclient.Operation) bool {
		return op.Approval != nil || apiclient.Terminal(op.Status)
	})
	a := op.Approval
	if op.Status != "awaiting_approval" || a == nil || a.Status != "pending" || !slices.Equal(a.Approvers, []string{"U0LOCALAPPROVER"}) ||
		a.ExpiresAt == "" || a.Reason != "policy_threshold" {
		t.Fatalf("status %s, approval %+v; want a pending approval by U0LOCALAPPROVER", op.Status, a)
	}

	approver := client(t, c.Tenant)
	approver.Principal = "dev:approver"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	inbox, err := approver.Approvals(ctx)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(inbox.Items, func(e apiclient.InboxEntry) bool { return e.ApprovalID == a.ApprovalID })
	if inbox.Approver != "U0LOCALAPPROVER" || i < 0 || inbox.Items[i].OperationID != op.OperationID || inbox.Items[i].Amount != "USD 12,500.50" {
		t.Fatalf("inbox %+v lacks approval %s of %s for USD 12,500.50", inbox, a.ApprovalID, op.OperationID)
	}
	opened, err := approver.OpenApproval(ctx, a.ApprovalID)
	if err != nil {
		t.Fatal(err)
	}
	var budgets []string
	for _, p := range opened.Packages {
		budgets = append(budgets, p.Budget)
	}
	if !slices.Equal(budgets, []string{"USD 8,250.50", "USD 4,250.00"}) || opened.ReviewURL == "" {
		t.Fatalf("opened %+v", opened)
	}

	// The same approver identity in another tenant sees nothing, and cannot open it.
	stranger := client(t, "t"+randomID(t))
	stranger.Principal = "dev:approver"
	if other, err := stranger.Approvals(ctx); err != nil || slices.ContainsFunc(other.Items, func(e apiclient.InboxEntry) bool { return e.ApprovalID == a.ApprovalID }) {
		t.Errorf("another tenant's approver: %+v, %v", other, err)
	}
	if _, err := stranger.OpenApproval(ctx, a.ApprovalID); apiclient.StatusOf(err) != http.StatusNotFound {
		t.Errorf("another tenant opens the approval: %v, want 404", err)
	}
	// The buyer is not an approver.
	if _, err := c.Approvals(ctx); apiclient.StatusOf(err) != http.StatusForbidden {
		t.Errorf("the buyer lists approvals: %v, want 403", err)
	}

	code, heading, err := apiclient.Decide(ctx, &http.Client{Timeout: 30 * time.Second}, opened.ReviewURL, "approve", "e2e: from the terminal")
	if err != nil || code != http.StatusOK {
		t.Fatalf("approve from the inbox link: HTTP %d %q %v", code, heading, err)
	}
	op = finished(t, c, sub.OperationID, "completed")
	if a := op.Approval; a == nil || a.Status != "approved" || a.DecidedBy != "U0LOCALAPPROVER" || a.DecidedAt == "" {
		t.Errorf("after the decision the buyer sees %+v", a)
	}
}
