package e2e

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// readable reports whether a failure reason reads as a sentence: not empty, not JSON, not an
// engine's error chain.
func readable(reason string) bool {
	r := strings.TrimSpace(reason)
	return len(r) >= 10 && !strings.ContainsAny(r[:1], "{[") && !strings.Contains(r, "States.") &&
		!strings.Contains(r, "errorType") && !strings.Contains(r, "unexpected status")
}

// An asynchronous seller completes the buy and says so by webhook: the workflow resumes on the
// webhook, before its first poll (on a loaded machine the sweep or the poll may read the
// finished task first; the webhook is then recorded stale, see completedByWebhook).
func TestAsyncBuyCompletedByWebhook(t *testing.T) {
	c := begin(t)
	sub := submit(t, c, buy{PO: po(t), Sim: "async_complete"})
	if sub.Status != "requested" {
		t.Errorf("submit status %s, want requested", sub.Status)
	}
	op := finished(t, c, sub.OperationID, "completed")
	if op.MediaBuyID == "" {
		t.Errorf("completed without a seller media buy id: %+v", op)
	}
	evs := webhookTimeline(t, c, sub.OperationID)
	if !completedByWebhook(evs) {
		t.Errorf("no completed webhook from the seller recorded (timeline %v)", types(evs))
	}
	if done, _ := reached(evs, "completed"); done.Type != "webhook" {
		t.Logf("completed by %q before the seller's webhook arrived (recorded stale)", done.Type)
	}
}

// Every webhook is lost: the buy's own polls complete it. The sweep is held on the local stack,
// as disabling its schedule does on AWS (so this test is the poll function's proof in
// docs/iam-grants.md whatever the timing: a sweep 10 s apart sometimes read the finished task
// before the poll 2 s after the create); on a deployed stack either may complete it.
func TestCompletedByPollingWhenWebhooksDropped(t *testing.T) {
	c := begin(t)
	want := []string{"poll"}
	if suite.local != nil {
		defer suite.local.HoldSweep()()
	} else {
		want = append(want, "reconcile")
	}
	sub := submit(t, c, buy{PO: po(t), Sim: "async_complete,wh_drop_all"})
	finished(t, c, sub.OperationID, "completed")
	evs := timeline(t, c, sub.OperationID)
	done, ok := reached(evs, "completed")
	if !ok {
		t.Fatalf("no event reaches completed: %v", types(evs))
	}
	if !slices.Contains(want, done.Type) {
		t.Errorf("completed by %q, want one of %v (timeline %v)", done.Type, want, types(evs))
	}
	if slices.Contains(types(evs), "webhook") {
		t.Errorf("a webhook reached the buy although the seller dropped them all: %v", types(evs))
	}
}

// The seller's task fails: the buy fails with a reason a person can read.
func TestSellerFailureHasReadableReason(t *testing.T) {
	c := begin(t)
	for _, tc := range []struct {
		sim    string
		status []string
	}{
		{"async_fail", []string{"failed"}},           // the seller's task fails after it was accepted
		{"rejected", []string{"failed", "rejected"}}, // the seller refuses the create outright
	} {
		t.Run(tc.sim, func(t *testing.T) {
			t.Parallel()
			sub := submit(t, c, buy{PO: po(t), Sim: tc.sim})
			op := waitFor(t, c, sub.OperationID, 90*time.Second, nil)
			if !slices.Contains(tc.status, op.Status) {
				t.Errorf("final status %s, want one of %v", op.Status, tc.status)
			}
			if !readable(op.Reason) {
				t.Errorf("reason %q is not a sentence a person can read", op.Reason)
				logTimeline(t, c, sub.OperationID)
			}
		})
	}
}

// The governance agent denies: nothing is spent and the buy is rejected.
func TestGovernanceDenied(t *testing.T) {
	c := begin(t)
	sub := submit(t, c, buy{PO: po(t), Sim: "denied"})
	op := finished(t, c, sub.OperationID, "rejected")
	if op.Reason == "" {
		t.Error("rejected without a reason")
	}
	evs := timeline(t, c, sub.OperationID)
	if slices.Contains(types(evs), "seller_call") {
		t.Errorf("the seller was called after a denial: %v", types(evs))
	}
	if suite.local != nil {
		for _, call := range suite.local.Seller.CallsTo("create_media_buy") {
			if strings.Contains(string(call.Arguments), op.PONumber) {
				t.Errorf("the seller got create_media_buy for denied PO %s", op.PONumber)
			}
		}
	}
}
