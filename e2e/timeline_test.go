package e2e

import (
	"slices"
	"testing"
	"time"
)

// The timeline of a buy that went through every stage lists each: submission, governance,
// the person's approval, the seller call, the seller's completion, the outcome report and the
// release of the PO lock.
func TestTimelineListsEveryStage(t *testing.T) {
	c := begin(t)
	sub := submit(t, c, buy{PO: po(t), RequireApproval: true, Sim: "async_complete"})
	op := waitFor(t, c, sub.OperationID, 30*time.Second, awaitingApproval)
	if op.Status != "awaiting_approval" {
		t.Fatalf("status %s (reason %q), want awaiting_approval", op.Status, op.Reason)
	}
	decide(t, op, "approve")
	finished(t, c, sub.OperationID, "completed")
	evs := settled(t, c, sub.OperationID)
	got := types(evs)
	for _, want := range []string{"created", "governance_check", "approval_requested", "decision", "seller_call", "outcome_report", "lock_released"} {
		if !slices.Contains(got, want) {
			t.Errorf("timeline lacks %q: %v", want, got)
		}
	}
	for _, status := range []string{"checking_governance", "awaiting_approval", "creating", "completed"} {
		if _, ok := reached(evs, status); !ok {
			t.Errorf("timeline never reaches %s: %v", status, got)
		}
	}
	for i := 1; i < len(evs); i++ {
		prev, err1 := time.Parse(time.RFC3339Nano, evs[i-1].At)
		at, err2 := time.Parse(time.RFC3339Nano, evs[i].At)
		if err1 != nil || err2 != nil {
			t.Errorf("event times are not RFC 3339: %q, %q", evs[i-1].At, evs[i].At)
			continue
		}
		if at.Before(prev) {
			t.Errorf("events out of order: %s (%s) after %s (%s)", evs[i].Type, evs[i].At, evs[i-1].Type, evs[i-1].At)
		}
	}
}
