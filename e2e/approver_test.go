package e2e

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/api"
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
	op := waitFor(t, c, sub.OperationID, 30*time.Second, func(op api.MediaBuy) bool {
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
	i := slices.IndexFunc(inbox.Items, func(e api.InboxItem) bool { return e.ApprovalID == a.ApprovalID })
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
	if other, err := stranger.Approvals(ctx); err != nil || slices.ContainsFunc(other.Items, func(e api.InboxItem) bool { return e.ApprovalID == a.ApprovalID }) {
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

// An approver who lost the Slack link finds a waiting campaign in their inbox, once, with the
// legs its approval covers and their total (a leg governance denied is neither, under
// best_effort), opens it, decides from the link it gives them, and the requester's view of the
// campaign shows the same total and legs. Another tenant's approver sees nothing of it.
func TestApproverInboxHoldsACampaign(t *testing.T) {
	c := begin(t)
	if suite.local == nil {
		t.Skip("the approver routes take the approver from the IAM identity; on a deployed stack run them as a mapped approver")
	}
	sub := submitCampaign(t, c, "best_effort", []float64{4000.25, 9000, 6000}, "", "denied")
	approver := client(t, c.Tenant)
	approver.Principal = "dev:approver"
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var entry api.InboxItem
	for entry.ApprovalID == "" {
		inbox, err := approver.Approvals(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range inbox.Items {
			if e.CampaignID == sub.CampaignID {
				if entry.ApprovalID != "" {
					t.Fatalf("the campaign is listed twice: %+v", inbox.Items)
				}
				entry = e
			}
		}
		if entry.ApprovalID == "" {
			select {
			case <-ctx.Done():
				t.Fatalf("campaign %s never reached the inbox: %+v", sub.CampaignID, inbox)
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
	var legs []string
	for _, l := range entry.Legs {
		legs = append(legs, l.OperationID)
	}
	covered := []string{sub.Legs[0].OperationID, sub.Legs[2].OperationID}
	if entry.Amount != "USD 10,000.25" || !slices.Equal(legs, covered) || entry.OperationID != "" {
		t.Fatalf("the campaign's entry: %+v; want USD 10,000.25 of legs %v", entry, covered)
	}
	opened, err := approver.OpenApproval(ctx, entry.ApprovalID)
	if err != nil || opened.Amount != entry.Amount || len(opened.Legs) != 2 || opened.ReviewURL == "" {
		t.Fatalf("opened %+v, %v", opened, err)
	}
	stranger := client(t, "t"+randomID(t))
	stranger.Principal = "dev:approver"
	if other, err := stranger.Approvals(ctx); err != nil || slices.ContainsFunc(other.Items, func(e api.InboxItem) bool { return e.ApprovalID == entry.ApprovalID }) {
		t.Errorf("another tenant's approver: %+v, %v", other, err)
	}
	if _, err := stranger.OpenApproval(ctx, entry.ApprovalID); apiclient.StatusOf(err) != http.StatusNotFound {
		t.Errorf("another tenant opens the campaign's approval: %v, want 404", err)
	}
	cp, err := c.GetCampaign(ctx, sub.CampaignID)
	if err != nil || cp.Approval == nil || cp.Approval.Amount != "10000.25 USD" || !slices.Equal(cp.Approval.Legs, covered) {
		t.Errorf("the requester's view of the approval: %+v, %v", cp.Approval, err)
	}

	code, heading, err := apiclient.Decide(ctx, &http.Client{Timeout: 30 * time.Second}, opened.ReviewURL, "approve", "e2e: from the terminal")
	if err != nil || code != http.StatusOK {
		t.Fatalf("approve from the inbox link: HTTP %d %q %v", code, heading, err)
	}
	cp = finishedCampaign(t, c, sub.CampaignID)
	if cp.Status != "partially_completed" || cp.Committed != "10000.25" || cp.Approval == nil || cp.Approval.DecidedBy != "U0LOCALAPPROVER" {
		t.Errorf("campaign %s committed %s, approval %+v", cp.Status, cp.Committed, cp.Approval)
	}
}
