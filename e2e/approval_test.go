package e2e

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/apiclient"
)

func awaitingApproval(op api.MediaBuy) bool {
	return op.Status == "awaiting_approval" || apiclient.Terminal(op.Status)
}

// decide opens the approval link from Slack and submits decision, as the approver would.
func decide(t *testing.T, op api.MediaBuy, decision string) {
	t.Helper()
	link := approvalLink(t, op)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code, heading, err := apiclient.Decide(ctx, &http.Client{Timeout: 30 * time.Second}, link, decision, "e2e: "+decision)
	if err != nil {
		t.Fatalf("%s from the Slack link: %v", decision, err)
	}
	if code != http.StatusOK {
		t.Fatalf("%s: result page HTTP %d %q", decision, code, heading)
	}
	t.Logf("%s: %q", decision, heading)
}

// A buy over the threshold waits for a person, who approves it from the Slack link.
func TestApprovalApproved(t *testing.T) {
	c := begin(t)
	sub := submit(t, c, buy{PO: po(t), Budgets: []float64{12000, 3000}, Sim: "async_complete"})
	op := waitFor(t, c, sub.OperationID, 30*time.Second, awaitingApproval)
	if op.Status != "awaiting_approval" {
		t.Fatalf("status %s (reason %q), want awaiting_approval", op.Status, op.Reason)
	}
	decide(t, op, "approve")
	finished(t, c, sub.OperationID, "completed")
	if !slices.Contains(types(timeline(t, c, sub.OperationID)), "decision") {
		t.Error("the timeline has no decision event")
	}
}

// The approver rejects: nothing is bought and the buy ends rejected.
func TestApprovalRejected(t *testing.T) {
	c := begin(t)
	sub := submit(t, c, buy{PO: po(t), RequireApproval: true, Sim: "async_complete"})
	op := waitFor(t, c, sub.OperationID, 30*time.Second, awaitingApproval)
	if op.Status != "awaiting_approval" {
		t.Fatalf("status %s (reason %q), want awaiting_approval", op.Status, op.Reason)
	}
	decide(t, op, "reject")
	op = finished(t, c, sub.OperationID, "rejected")
	if !readable(op.Reason) {
		t.Errorf("reason %q is not readable", op.Reason)
	}
	if slices.Contains(types(timeline(t, c, sub.OperationID)), "seller_call") {
		t.Error("the seller was called after the rejection")
	}
}

// Nobody decides within the approval window: the buy expires and its link no longer works.
func TestApprovalExpired(t *testing.T) {
	c := begin(t)
	sub := submit(t, c, buy{PO: po(t), RequireApproval: true, Sim: "async_complete"})
	op := waitFor(t, c, sub.OperationID, 30*time.Second, awaitingApproval)
	if op.Status != "awaiting_approval" {
		t.Fatalf("status %s (reason %q), want awaiting_approval", op.Status, op.Reason)
	}
	link := ""
	if suite.slackURL != "" {
		link = approvalLink(t, op)
	}
	op = waitFor(t, c, sub.OperationID, time.Duration(runConfig.ApprovalTimeoutSeconds)*time.Second+60*time.Second, nil)
	if op.Status != "expired" {
		t.Errorf("final status %s (reason %q), want expired", op.Status, op.Reason)
		logTimeline(t, c, sub.OperationID)
	}
	// The reason is a sentence, not the engine's "States.Timeout: States.Timeout".
	if !readable(op.Reason) || !strings.Contains(op.Reason, "approval expired") {
		t.Errorf("reason %q does not say in words that the approval expired", op.Reason)
	}
	if link != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if code, heading, err := apiclient.Decide(ctx, nil, link, "approve", ""); err == nil && code == http.StatusOK {
			t.Errorf("approving an expired approval answered HTTP %d %q", code, heading)
		}
	}
}
