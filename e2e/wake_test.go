package e2e

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/apiclient"
	"github.com/buyflow/buyflow/internal/devstack"
)

// The tests in this file decide who tells a parked buy that its seller finished: the seller's
// webhook or the sweep, never the buy's own poll, whatever the machine's speed. Each holds the
// scheduled sweep and the buy's polls (their read of the operation, in the local stack's
// proxy), so each is the proof in docs/iam-grants.md of the calls only that party makes.

// heldBuy is a buy whose seller holds its task, parked on its AwaitSeller token, with the
// sweep and its own polls held.
type heldBuy struct {
	api.MediaBuy
	// livePark says the wait was still open when heldBuy returned: a wake completes it, where
	// a wake after its timeout finds the token gone (the poll, released, then finishes the buy).
	livePark bool
	// releasePolls lets the buy's polls go on.
	releasePolls func()
}

// parkHeldBuy submits a buy with sim (to which "async_complete hold" is added), holds the
// sweep and the buy's polls, and returns once the buy's park has stored its token: from then
// on only what the test does moves the buy. It needs the local stack.
func parkHeldBuy(t *testing.T, c *apiclient.Client, sim string) heldBuy {
	t.Helper()
	if suite.local == nil {
		t.Skip("holding the sweep and the buy's polls needs the local stack")
	}
	t.Cleanup(suite.local.HoldSweep())
	sub := submit(t, c, buy{PO: po(t), Sim: "async_complete hold " + sim})
	// A poll before the release reads the operation first (stage.Load, a GetItem naming it);
	// held there, it cannot read the seller's finished task before the party under test.
	// One that ran before this line read a task the seller still holds: no news.
	_, release := suite.local.HoldAt(devstack.CallPoint{Function: "poll", Target: "DynamoDB_20120810.GetItem", BodyContains: sub.OperationID})
	t.Cleanup(release)
	op := waitFor(t, c, sub.OperationID, time.Minute, func(op api.MediaBuy) bool {
		return op.SellerTaskID != "" || apiclient.Terminal(op.Status)
	})
	if op.SellerTaskID == "" {
		t.Fatalf("the buy ended %s before its seller held a task", op.Status)
	}
	live := false
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		stored, open := parkState(history(t, sub.OperationID))
		if stored {
			live = open
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the buy's AwaitSeller never stored its token:%s", summarize(history(t, sub.OperationID)))
		}
	}
	return heldBuy{MediaBuy: op, livePark: live, releasePolls: release}
}

// parkState reads the first AwaitSeller attempt of a history: stored once its park returned
// (TaskSubmitted: the token is on the operation), open while no outcome followed.
func parkState(h []sfntypes.HistoryEvent) (stored, open bool) {
	in := false
	for _, ev := range h {
		switch {
		case ev.StateEnteredEventDetails != nil:
			if in {
				return stored, false
			}
			in = aws.ToString(ev.StateEnteredEventDetails.Name) == "AwaitSeller"
		case !in:
		case ev.Type == sfntypes.HistoryEventTypeTaskSubmitted:
			stored, open = true, true
		case ev.Type == sfntypes.HistoryEventTypeTaskSucceeded, ev.Type == sfntypes.HistoryEventTypeTaskFailed, ev.Type == sfntypes.HistoryEventTypeTaskTimedOut:
			return stored, false
		}
	}
	return stored, open
}

// completedBy waits until the buy's timeline reaches completed and returns the type of the
// event that moved it there.
func completedBy(t *testing.T, c *apiclient.Client, id string) string {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if done, ok := reached(timeline(t, c, id), "completed"); ok {
			return done.Type
		}
		if time.Now().After(deadline) {
			logTimeline(t, c, id)
			t.Fatalf("%s never reached completed", id)
		}
	}
}

// The seller finishes a parked buy's task: its signed webhook records the completion and
// completes the parked wait (SendTaskSuccess under the webhook function's role).
func TestWebhookWakesTheParkedBuy(t *testing.T) {
	c := begin(t)
	b := parkHeldBuy(t, c, "")
	if err := suite.local.Seller.Finish(b.SellerTaskID, "completed"); err != nil {
		t.Fatal(err)
	}
	if by := completedBy(t, c, b.OperationID); by != "webhook" {
		t.Errorf("completed by %q, want the seller's webhook (the sweep and the buy's polls are held)", by)
	}
	t.Logf("the webhook found the wait open: %t", b.livePark)
	b.releasePolls()
	finished(t, c, b.OperationID, "completed")
}

// The seller's webhooks are lost and it finishes a parked buy's task: the sweep reads the
// finished task, records it and completes the parked wait (SendTaskSuccess under the
// reconcile function's role). Not parallel: the sweep it runs reads every pending buy, and
// would wake those of the parallel tests that hold the sweep to see another party do it.
func TestSweepWakesTheParkedBuy(t *testing.T) {
	c := localOnly(t)
	b := parkHeldBuy(t, c, "wh_drop_all")
	if err := suite.local.Seller.Finish(b.SellerTaskID, "completed"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := suite.local.SweepNow(ctx); err != nil {
		t.Fatal(err)
	}
	if by := completedBy(t, c, b.OperationID); by != "reconcile" {
		t.Errorf("completed by %q, want the sweep (the webhooks are dropped and the buy's polls held)", by)
	}
	b.releasePolls()
	finished(t, c, b.OperationID, "completed")
}

// The ledger fails (DynamoDB answers 500 to every attempt the SDK makes) while the seller's
// completed webhook is applied: the webhook answers 5xx and releases its receipt, and the
// seller's retry of the same delivery is applied and wakes the buy.
func TestLedgerFailureWhileAWebhookIsAppliedReleasesItsReceipt(t *testing.T) {
	c := begin(t)
	b := parkHeldBuy(t, c, "")
	// The operation's move to completed is one transaction naming it; the receipt's claim and
	// completion are single-item writes, which pass. The SDK sends a 500 up to
	// retry.DefaultMaxAttempts times (functions/internal/awsenv's standard retryer).
	fired, disarm := suite.local.FailAt(devstack.CallPoint{Function: "webhook", Target: "DynamoDB_20120810.TransactWriteItems", BodyContains: b.OperationID},
		"InternalServerError", http.StatusInternalServerError, retry.DefaultMaxAttempts)
	defer disarm()
	if err := suite.local.Seller.Finish(b.SellerTaskID, "completed"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-fired:
	case <-time.After(30 * time.Second):
		t.Fatal("the webhook never tried to record the completion")
	}
	if by := completedBy(t, c, b.OperationID); by != "webhook" {
		t.Errorf("completed by %q, want the seller's retried webhook", by)
	}
	// The seller records an attempt once it has the answer, a moment after the buy moved.
	var answers []int
	for deadline := time.Now().Add(10 * time.Second); len(answers) < 2 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		answers = answers[:0]
		for _, d := range suite.local.Seller.Deliveries() {
			if d.Status == "completed" && d.TaskID == b.SellerTaskID && !d.Dropped {
				answers = append(answers, d.StatusCode)
			}
		}
	}
	if len(answers) != 2 || answers[0] < 500 || answers[1] != http.StatusOK {
		t.Errorf("the completed webhook was answered %v, want a 5xx, then 200 for the retry", answers)
	}
	b.releasePolls()
	finished(t, c, b.OperationID, "completed")
}
