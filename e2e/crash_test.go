package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/buyflow/buyflow/internal/adcptest"
	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/apiclient"
	"github.com/buyflow/buyflow/internal/devstack"
)

// Crash injection on the local stack: a function's processes are killed at the worst moment
// (the stack replaces them, as Lambda starts new sandboxes), and the buy must still end with
// one create at the seller, one decision, one outcome report, a ledger that tells the truth and
// an execution status that agrees with it; the function serves again afterwards. Like the
// fault tests, these do not run in parallel (a crash kills every process of the function).

// callsFor returns the agent's calls of tool whose arguments mention po, split into originals
// and idempotent replays.
func callsFor(calls []adcptest.Call, po string) (originals, replays int) {
	for _, c := range calls {
		if !strings.Contains(string(c.Arguments), po) || c.Fault != "" || c.IsError {
			continue
		}
		if c.Replayed {
			replays++
		} else {
			originals++
		}
	}
	return originals, replays
}

// reportsFor lists the outcomes of the report_plan_outcome calls governance received for the
// operation (its id is in the echoed context); a replay is the same report, not counted.
func reportsFor(calls []adcptest.Call, operationID string) []string {
	var out []string
	for _, c := range calls {
		var a struct {
			Outcome string `json:"outcome"`
		}
		if c.Replayed || c.Fault != "" || !strings.Contains(string(c.Arguments), operationID) || json.Unmarshal(c.Arguments, &a) != nil {
			continue
		}
		out = append(out, a.Outcome)
	}
	return out
}

// wantConsistent checks a buy after a crash: completed in the ledger and in Step Functions,
// one create at the seller, one outcome report ("completed"), nothing after the terminal
// status but the documented events (below).
func wantConsistent(t *testing.T, c *apiclient.Client, id string) {
	t.Helper()
	op := finished(t, c, id, "completed")
	evs := settled(t, c, id)
	if n, _ := callsFor(suite.local.Seller.CallsTo("create_media_buy"), op.PONumber); n != 1 {
		t.Errorf("%d creates at the seller (not counting replays), want 1", n)
	}
	if got := reportsFor(suite.local.Governance.CallsTo("report_plan_outcome"), id); !slices.Equal(got, []string{"completed"}) {
		t.Errorf("outcome reports %v, want one completed", got)
	}
	// After the terminal status only the documented events follow: the wake that hands the
	// status to the parked execution (when the webhook finds it parked), the outcome report,
	// the lock release, the buy being live, the sweep's delivery reads, a seller's webhook
	// that arrives after the poll or the sweep completed the buy, recorded stale (it moves
	// nothing), and the answer to a crashed create's resend when the seller's webhooks
	// completed the buy while it was under way (a call that really happened; it moves nothing).
	end := slices.IndexFunc(evs, func(e api.Event) bool { return e.To == "completed" })
	for _, e := range evs[end+1:] {
		var call struct {
			Attempt int `json:"attempt"`
		}
		if e.Type == "webhook" && e.To == "" && strings.HasPrefix(e.Reason, "stale") ||
			e.Type == "seller_call" && e.To == "" && json.Unmarshal(e.Detail, &call) == nil && call.Attempt > 0 {
			continue
		}
		if !slices.Contains([]string{"wake", "outcome_report", "lock_released", "delivery"}, e.Type) {
			t.Errorf("event %s after completed", e.Type)
		}
	}
	if slices.Contains(types(evs), "failure") {
		t.Errorf("a failure event in the timeline of a completed buy: %v", types(evs))
	}
	h := finalHistory(t, id)
	if last := h[len(h)-1]; last.Type != sfntypes.HistoryEventTypeExecutionSucceeded {
		t.Errorf("execution ended %s for a buy the ledger records completed:%s", last.Type, summarize(h))
	}
}

// servesAgain checks that fn was given new processes and that a fresh buy goes through them.
func servesAgain(t *testing.T, c *apiclient.Client, fn string, killed int) {
	t.Helper()
	waitRestarted(t, fn, killed)
	sub := submit(t, c, buy{PO: po(t), Sim: "async_complete"})
	finished(t, c, sub.OperationID, "completed")
}

// The create process is killed after the seller committed the buy and before its answer came
// back (the seller holds the answer): the invocation fails with Runtime.ExitError, the retried
// create finds the buy, and the seller's webhooks complete it.
func TestCrashCreateAfterTheSellerCommitted(t *testing.T) {
	c := localOnly(t)
	before := suite.local.Restarts("create")
	p := po(t)
	sub := submit(t, c, buy{PO: p, Sim: "async_complete,slow_commit"})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if n, _ := callsFor(suite.local.Seller.CallsTo("create_media_buy"), p); n > 0 {
			break // committed; the answer is held
		}
		if time.Now().After(deadline) {
			t.Fatal("the seller got no create_media_buy within 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	killed := suite.local.Kill("create")
	if killed == 0 {
		t.Fatal("no create process to kill")
	}
	wantConsistent(t, c, sub.OperationID)
	h := finalHistory(t, sub.OperationID)
	if got := taskAttempts(h, "CreateMediaBuy"); len(got) < 2 || got[0] != "Runtime.ExitError" || got[len(got)-1] != "ok" {
		t.Errorf("CreateMediaBuy attempts %v, want Runtime.ExitError first and a retry that succeeds", got)
	}
	servesAgain(t, c, "create", before+killed)
}

// The approve process is killed after the decision is written and before SendTaskSuccess: the
// approver sees an error and clicks again, which hands the recorded decision over.
func TestCrashApproveBeforeTheHandOver(t *testing.T) {
	c := localOnly(t)
	before := suite.local.Restarts("approve")
	sub := submit(t, c, buy{PO: po(t), RequireApproval: true, Sim: "async_complete"})
	op := waitFor(t, c, sub.OperationID, 30*time.Second, awaitingApproval)
	if op.Status != "awaiting_approval" {
		t.Fatalf("status %s, want awaiting_approval", op.Status)
	}
	link := approvalLink(t, op)
	fired := suite.local.CrashAt(devstack.CrashPoint{Function: "approve", Target: "AWSStepFunctions.SendTaskSuccess"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	hc := &http.Client{Timeout: 30 * time.Second}
	form, _, _, err := apiclient.OpenApproval(ctx, hc, link)
	if err != nil {
		t.Fatal(err)
	}
	code, heading, err := form.Submit(ctx, hc, "approve", "e2e: approve, crashed")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-fired:
	case <-time.After(10 * time.Second):
		t.Fatalf("the crash point never fired (the click answered %d %q)", code, heading)
	}
	if code < 500 {
		t.Errorf("the crashed click answered %d %q, want a server error", code, heading)
	}
	// The approver resubmits the form (the browser showed an error); the new sandbox serves it.
	// Its cold start, and a click that still reached the dead one, can take seconds on a loaded
	// machine: give the clicks the whole test's budget, not a fixed few seconds.
	deadline, _ := ctx.Deadline()
	for {
		code, heading, err = form.Submit(ctx, hc, "approve", "e2e: approve again")
		if err == nil && code == http.StatusOK {
			break
		}
		t.Logf("click after the crash: %d %q %v", code, heading, err)
		if time.Now().After(deadline) {
			t.Fatalf("the click after the crash answered %d %q (%v)", code, heading, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	wantConsistent(t, c, sub.OperationID)
	evs := timeline(t, c, sub.OperationID)
	decided := 0
	for _, e := range evs {
		if e.Type == "decision" {
			decided++
		}
	}
	if decided != 1 {
		t.Errorf("%d decision events, want 1: %v", decided, types(evs))
	}
	servesAgain(t, c, "approve", before+1)
}

// The webhook process is killed after the webhook's receipt is written and before the update
// is applied: the seller's retry is a duplicate of a receipt, so the poll (or the sweep) must
// find the completion.
func TestCrashWebhookAfterTheReceipt(t *testing.T) {
	c := localOnly(t)
	before := suite.local.Restarts("webhook")
	fired := suite.local.CrashAt(devstack.CrashPoint{Function: "webhook", Target: "DynamoDB_20120810.PutItem", BodyContains: "RECEIPT#", AfterAnswer: true})
	sub := submit(t, c, buy{PO: po(t), Sim: "async_complete"})
	select {
	case <-fired:
	case <-time.After(30 * time.Second):
		t.Fatal("no webhook receipt was written within 30 s")
	}
	wantConsistent(t, c, sub.OperationID)
	servesAgain(t, c, "webhook", before+1)
}

// updatesFor returns the seller's update_media_buy calls of the change (its id is in the
// echoed context), split into executed originals and idempotent replays.
func updatesFor(seller *adcptest.Seller, changeID string) (originals, replays int) {
	return callsFor(seller.CallsTo("update_media_buy"), changeID)
}

// updatesReaching counts every update_media_buy of the change that reached the seller,
// whatever it answered (a second one the seller refused, as a stale revision, reached it too).
func updatesReaching(seller *adcptest.Seller, changeID string) int {
	n := 0
	for _, c := range seller.CallsTo("update_media_buy") {
		if strings.Contains(string(c.Arguments), changeID) && c.Fault == "" {
			n++
		}
	}
	return n
}

// sellerCallAttempts lists the attempt of each update_media_buy the change's timeline records.
func sellerCallAttempts(t *testing.T, c *apiclient.Client, changeID string) []float64 {
	t.Helper()
	var out []float64
	for _, e := range timeline(t, c, changeID) {
		var d struct {
			Attempt *float64 `json:"attempt"`
		}
		if e.Type == "modification_seller_call" && json.Unmarshal(e.Detail, &d) == nil && d.Attempt != nil {
			out = append(out, *d.Attempt)
		}
	}
	return out
}

// lapsedChecks lists the applied verdicts of the change's looks at the seller before a resend.
func lapsedChecks(t *testing.T, c *apiclient.Client, changeID string) []bool {
	t.Helper()
	var out []bool
	for _, e := range timeline(t, c, changeID) {
		var d struct {
			Applied bool `json:"applied"`
		}
		if e.Type == "lapsed_claim_check" && json.Unmarshal(e.Detail, &d) == nil {
			out = append(out, d.Applied)
		}
	}
	return out
}

// changeCommittedThenKilled places a sync buy at seller, sends it a budget change whose
// update_media_buy the seller commits and then holds the answer of (slow_commit), and kills
// every modify process while it waits for that answer. It returns the buy and the change.
func changeCommittedThenKilled(t *testing.T, c *apiclient.Client, sellerID string, seller *adcptest.Seller) (buyID, changeID string, killed int) {
	t.Helper()
	sub := submit(t, c, buy{PO: po(t), Sim: "sync", Seller: sellerID, Budgets: []float64{3000}})
	finished(t, c, sub.OperationID, "completed")
	acc, err := c.Change(context.Background(), sub.OperationID, "chg-key-crash-"+randomID(t),
		[]byte(`{"budget":{"total":3500},"reason":"crash after the commit","context":{"sim":"sync,slow_commit"}}`), false)
	if err != nil {
		t.Fatalf("change: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if n, _ := updatesFor(seller, acc.ChangeID); n > 0 {
			break // committed; the answer is held
		}
		if time.Now().After(deadline) {
			t.Fatal("the seller got no update_media_buy within 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if killed = suite.local.Kill("modify"); killed == 0 {
		t.Fatal("no modify process to kill")
	}
	return sub.OperationID, acc.ChangeID, killed
}

// appliedOnce checks a change after the crash: completed, exactly one update_media_buy of it
// reached the seller (besides idempotent replays), the buy shows the new budget, and the
// retried UpdateMediaBuy (after Runtime.ExitError) either found the update applied at the
// seller or resent it with the same key.
func appliedOnce(t *testing.T, c *apiclient.Client, seller *adcptest.Seller, buyID, changeID string) {
	t.Helper()
	finished(t, c, changeID, "completed")
	executed, replays := updatesFor(seller, changeID)
	if reached := updatesReaching(seller, changeID); executed != 1 || reached != 1+replays {
		t.Errorf("%d update_media_buy of the change reached the seller, %d executed and %d replayed; want one executed, anything else a replay", reached, executed, replays)
	}
	// The retry that decides looks last; on a busy machine an earlier retry may have looked
	// too (and died or timed out before it sent), so only the last look decides what follows.
	looks, attempts := lapsedChecks(t, c, changeID), sellerCallAttempts(t, c, changeID)
	last := len(looks) > 0 && looks[len(looks)-1]
	found := last && len(attempts) == 0
	resent := len(looks) > 0 && !last && slices.Equal(attempts, []float64{1}) && replays == 1
	if !found && !resent {
		t.Errorf("the retry looked at the seller %v and sent attempts %v (%d replays): want the update found applied, or a resend replayed", looks, attempts, replays)
	}
	op := waitFor(t, c, buyID, 30*time.Second, func(op api.MediaBuy) bool {
		return op.Current != nil && op.Current.LastChangeID == changeID
	})
	if cur := op.Current; cur.Budget != "3500.00" || cur.LastOutcome != "applied" {
		t.Errorf("the buy after the change: %+v, want 3500.00 applied", cur)
	}
	if got := taskAttempts(finalHistory(t, changeID), "UpdateMediaBuy"); len(got) < 2 || got[0] != "Runtime.ExitError" || got[len(got)-1] != "ok" {
		t.Errorf("UpdateMediaBuy attempts %v, want Runtime.ExitError first and a retry that succeeds", got)
	}
}

// The modify process is killed after the seller (24 h replay window) committed a change's
// update_media_buy and before its answer came back: the retry, a resend of the same intent,
// looks at the seller first (as a create's does) and the change completes with the budget
// changed once.
func TestCrashModifyAfterTheSellerCommittedTheUpdate(t *testing.T) {
	c := localOnly(t)
	before := suite.local.Restarts("modify")
	buyID, changeID, killed := changeCommittedThenKilled(t, c, devstack.SellerID, suite.local.Seller)
	appliedOnce(t, c, suite.local.Seller, buyID, changeID)
	waitRestarted(t, "modify", before+killed)
}

// The same crash at a seller without a replay window, which would apply a second
// update_media_buy again: the retry sends nothing. It finds the update applied and the change
// completes; exactly one update_media_buy reached the seller. (Had the look not told, the
// resend would be refused and the change end failed, BUYFLOW_NO_REPLAY_WINDOW.)
func TestCrashModifyAtASellerWithoutAReplayWindow(t *testing.T) {
	c := localOnly(t)
	seller := suite.local.OtherSellers[devstack.NoReplaySellerID]
	if seller == nil {
		t.Fatalf("the local stack has no %s", devstack.NoReplaySellerID)
	}
	before := suite.local.Restarts("modify")
	buyID, changeID, killed := changeCommittedThenKilled(t, c, devstack.NoReplaySellerID, seller)
	appliedOnce(t, c, seller, buyID, changeID)
	if n := updatesReaching(seller, changeID); n != 1 {
		t.Errorf("%d update_media_buy of the change reached the seller, want exactly the one before the crash", n)
	}
	waitRestarted(t, "modify", before+killed)
}

// waitRestarted checks that fn was given new processes after killed were killed.
func waitRestarted(t *testing.T, fn string, killed int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for suite.local.Restarts(fn) < killed && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if got := suite.local.Restarts(fn); got < killed {
		t.Errorf("%d new %s processes after %d were killed", got, fn, killed)
	}
}
