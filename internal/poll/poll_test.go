package poll_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/adcptest"
	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/sellertask"
	"github.com/buyflow/buyflow/internal/stage"
	"github.com/buyflow/buyflow/internal/stagetest"
	"github.com/buyflow/buyflow/internal/workflow"
)

func pollIn(op *record.Operation, wait workflow.WaitState, gen int) workflow.PollInput {
	return workflow.PollInput{Action: workflow.ActionPoll, OperationID: op.ID, Tenant: stagetest.Tenant, Config: stagetest.RunConfig(), Generation: gen, Wait: wait}
}

func parkIn(op *record.Operation, token string, seller workflow.SellerOutput) workflow.CallbackInput {
	return workflow.CallbackInput{Action: workflow.ActionPark, OperationID: op.ID, Tenant: stagetest.Tenant, Config: stagetest.RunConfig(),
		TaskToken: token, Wait: seller.Next, Seller: &seller}
}

func TestParkStoresToken(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{})
	op, out := e.Placed("approved,async_complete")

	if _, err := stagetest.Handle(t, e.PollStage.Handle, parkIn(op, "token-1", out)); err != nil {
		t.Fatal(err)
	}
	if got := e.Op(op.ID); got.TaskToken != "token-1" {
		t.Fatalf("stored token = %q", got.TaskToken)
	}
	if c := e.Completed(); len(c) != 0 {
		t.Fatalf("completed %d tokens; nothing new happened", len(c))
	}
}

func TestParkCompletesAtOnceWhenDecisionPending(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{})
	op, out := e.Placed("approved,sync")
	if err := e.PollStage.Park(context.Background(), parkIn(op, "token-1", out)); err != nil {
		t.Fatal(err)
	}
	c := e.Completed()
	if len(c) != 1 || c[0].Token != "token-1" || c[0].Output != out {
		t.Fatalf("completions = %+v", c)
	}
}

func TestParkAfterWebhookCompletesTokenItself(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{})
	op, out := e.Placed("approved,async_complete")
	// The webhook recorded the completion before the park (the lost-wakeup race).
	mb := "mb_from_webhook"
	if _, err := e.Store.Transition(context.Background(), stagetest.Tenant, op.ID, workflow.StatusCompleted, record.AnyVersion,
		record.Patch{MediaBuyID: &mb, Actor: "seller:" + stagetest.SellerID, EventType: "webhook"}); err != nil {
		t.Fatal(err)
	}
	if err := e.PollStage.Park(context.Background(), parkIn(op, "token-1", out)); err != nil {
		t.Fatal(err)
	}
	c := e.Completed()
	if len(c) != 1 || c[0].Token != "token-1" || c[0].Output.Status != workflow.StatusCompleted || !c[0].Output.Terminal || c[0].Output.Next != out.Next {
		t.Fatalf("completions = %+v", c)
	}
	// The webhook computes the same output from the ledger.
	if w := sellertask.WakeOutput(e.Op(op.ID), out.Next, stagetest.RunConfig(), e.Clock.Now()); w != c[0].Output {
		t.Fatalf("WakeOutput = %+v, park sent %+v", w, c[0].Output)
	}
	if e.Op(op.ID).TaskToken != "" {
		t.Fatal("the completed token is still stored")
	}
	evs := stagetest.Events(t, e, op.ID)
	if last := evs[len(evs)-1]; last.Type != record.EventWake {
		t.Fatalf("last event %s, want the park's wake", last.Type)
	}
	for _, ev := range evs {
		if strings.Contains(string(ev.Detail), "token-1") {
			t.Fatalf("event %s carries the task token", ev.Type)
		}
	}
}

func TestWakeOutputWithoutWaitRebuildsFromOperation(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{})
	op, out := e.Placed("approved,async_complete")
	w := sellertask.WakeOutput(op, workflow.WaitState{}, stagetest.RunConfig(), e.Clock.Now())
	if w.Next.DeadlineUnix != out.Next.DeadlineUnix || w.Next.IntervalSeconds != stagetest.RunConfig().PollMaxSeconds || w.NeedsDecision() {
		t.Fatalf("WakeOutput = %+v, create said %+v", w, out)
	}
}

// TestPollSafetyNetInterval: after a poll the per-buy loop waits one long safety-net interval,
// the same for every seller (the sweep, not this loop, notices a finished task quickly).
func TestPollSafetyNetInterval(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{})
	op, out := e.Placed("approved,async_complete")
	got, err := e.PollStage.PollSeller(context.Background(), pollIn(op, out.Next, 0))
	if err != nil {
		t.Fatal(err)
	}
	if !stagetest.SafetyNet(got.Next.IntervalSeconds) || got.Next.Round != 1 {
		t.Fatalf("next %+v, want one safety-net interval", got.Next)
	}
}

// TestPollLongNetWhileSweepRuns: with the sweep's heartbeat fresh, the next wait runs until
// the deadline (one round for the whole wait); with it stale, or never stored, it is the short
// net of TestPollSafetyNetInterval.
func TestPollLongNetWhileSweepRuns(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		until time.Duration // the heartbeat's Until, from now (0: none stored)
		long  bool
	}{{"fresh", time.Minute, true}, {"stale", -time.Second, false}, {"never stored", 0, false}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := stagetest.NewEnv(t, stagetest.Options{})
			op, out := e.Placed("approved,async_complete")
			if tc.until != 0 {
				now := e.Clock.Now()
				if err := e.Store.PutSweepHeartbeat(context.Background(), record.SweepHeartbeat{At: now.Add(-time.Minute), Until: now.Add(tc.until)}); err != nil {
					t.Fatal(err)
				}
			}
			// The stage reads the clock somewhere between before and after (seconds apart on a
			// loaded machine): the long net is what was left to the deadline then.
			before := e.Clock.Now().Unix()
			got, err := e.PollStage.PollSeller(context.Background(), pollIn(op, out.Next, 0))
			if err != nil {
				t.Fatal(err)
			}
			left := out.Next.DeadlineUnix - before
			if long := int64(got.Next.IntervalSeconds) >= out.Next.DeadlineUnix-e.Clock.Now().Unix()-5 && int64(got.Next.IntervalSeconds) <= left; long != tc.long ||
				(!tc.long && !stagetest.SafetyNet(got.Next.IntervalSeconds)) {
				t.Fatalf("next interval %d s with %d s to the deadline; want the long net: %v", got.Next.IntervalSeconds, left, tc.long)
			}
		})
	}
}

func TestPollWorkingWaitsAgain(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{})
	op, out := e.Placed("approved,async_complete")
	task := e.Seller.Tasks()[0].ID
	if _, err := e.Seller.Advance(task); err != nil { // → working
		t.Fatal(err)
	}
	raw, err := stagetest.Handle(t, e.PollStage.Handle, pollIn(op, out.Next, 0))
	if err != nil {
		t.Fatal(err)
	}
	got := raw.(workflow.SellerOutput)
	if got.Status != workflow.StatusWorking || got.NeedsDecision() || got.Next.Round != 1 || !stagetest.SafetyNet(got.Next.IntervalSeconds) {
		t.Fatalf("output = %+v, want working with another safety-net interval", got)
	}
	if e.Op(op.ID).Status != workflow.StatusWorking {
		t.Fatalf("status = %s", e.Op(op.ID).Status)
	}
	// Each poll takes a fresh idempotency key.
	if _, err := e.PollStage.PollSeller(context.Background(), pollIn(op, got.Next, 0)); err != nil {
		t.Fatal(err)
	}
	polls := e.Seller.CallsTo("get_task_status")
	if len(polls) != 2 || stagetest.LastArgs(t, polls[:1])["idempotency_key"] == stagetest.LastArgs(t, polls)["idempotency_key"] {
		t.Fatal("polls reuse an idempotency key")
	}
}

func TestPollCompletedIsTerminal(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{})
	op, out := e.Placed("approved,async_complete")
	task := e.Seller.Tasks()[0].ID
	for range 2 {
		if _, err := e.Seller.Advance(task); err != nil {
			t.Fatal(err)
		}
	}
	got, err := e.PollStage.PollSeller(context.Background(), pollIn(op, out.Next, 0))
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != workflow.StatusCompleted || !got.Terminal {
		t.Fatalf("output = %+v", got)
	}
	if o := e.Op(op.ID); o.Status != workflow.StatusCompleted || o.MediaBuyID == "" {
		t.Fatalf("operation = %+v", o)
	}
}

func TestPollSellerFailedIsTerminal(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{})
	op, out := e.Placed("approved,async_fail")
	task := e.Seller.Tasks()[0].ID
	for range 2 {
		if _, err := e.Seller.Advance(task); err != nil {
			t.Fatal(err)
		}
	}
	got, err := e.PollStage.PollSeller(context.Background(), pollIn(op, out.Next, 0))
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != workflow.StatusFailed || !got.Terminal || got.Reason == "" {
		t.Fatalf("output = %+v", got)
	}
	// RecordFailure then reports failed to governance.
	res, err := e.GovStage.Fail(context.Background(), workflow.OutcomeInput{OperationID: op.ID, Tenant: stagetest.Tenant,
		Failure: &workflow.StepError{Error: workflow.FailureSellerDidNotComplete, Cause: "seller failed"}})
	if err != nil || res.Status != workflow.StatusFailed || !res.Reported {
		t.Fatalf("fail = %+v, %v", res, err)
	}
	args := stagetest.LastArgs(t, e.Gov.CallsTo("report_plan_outcome"))
	if rerr, _ := args["error"].(map[string]any); args["outcome"] != "failed" || rerr["code"] != "PRODUCT_UNAVAILABLE" {
		t.Fatalf("report = %v, want the seller's code", args)
	}
	if o := e.Op(op.ID); o.ErrorCode != "PRODUCT_UNAVAILABLE" || !strings.Contains(o.Reason, "PRODUCT_UNAVAILABLE") {
		t.Fatalf("operation reason %q code %q", o.Reason, o.ErrorCode)
	}
}

func TestPollLateStatusNeverOverwritesNewer(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{})
	op, out := e.Placed("approved,async_complete")
	task := e.Seller.Tasks()[0].ID
	if _, err := e.Seller.Advance(task); err != nil { // the seller says working
		t.Fatal(err)
	}
	// While the poll is in flight, a webhook records the completion.
	var once atomic.Bool
	e.AdCP.BeforePoll = func() {
		if once.CompareAndSwap(false, true) {
			mb := "mb_from_webhook"
			if _, err := e.Store.Transition(context.Background(), stagetest.Tenant, op.ID, workflow.StatusCompleted, record.AnyVersion,
				record.Patch{MediaBuyID: &mb, Actor: "seller:" + stagetest.SellerID, EventType: "webhook"}); err != nil {
				t.Error(err)
			}
		}
	}
	got, err := e.PollStage.PollSeller(context.Background(), pollIn(op, out.Next, 0))
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != workflow.StatusCompleted || !got.Terminal {
		t.Fatalf("output = %+v, want the ledger's completed", got)
	}
	if o := e.Op(op.ID); o.Status != workflow.StatusCompleted || o.MediaBuyID != "mb_from_webhook" {
		t.Fatalf("operation = %+v", o)
	}
}

func TestPollDeadlineExceeded(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{})
	op, out := e.Placed("approved,async_complete")
	wait := out.Next
	wait.DeadlineUnix = e.Clock.Now().Add(-time.Second).Unix()
	got, err := e.PollStage.PollSeller(context.Background(), pollIn(op, wait, 0))
	if err != nil {
		t.Fatal(err)
	}
	if !got.DeadlineExceeded || got.Terminal || !got.NeedsDecision() {
		t.Fatalf("output = %+v, want deadline_exceeded", got)
	}
	// Park hands the same decision on at once.
	if err := e.PollStage.Park(context.Background(), parkIn(op, "token-1", got)); err != nil {
		t.Fatal(err)
	}
	if c := e.Completed(); len(c) != 1 || !c[0].Output.DeadlineExceeded {
		t.Fatalf("completions = %+v", c)
	}
}

func TestPollLoopBudgetContinuesAsNew(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{})
	op, out := e.Placed("approved,async_complete")
	wait := out.Next
	wait.Round = stagetest.RunConfig().LoopBudget - 1
	got, err := e.PollStage.PollSeller(context.Background(), pollIn(op, wait, 2))
	if err != nil {
		t.Fatal(err)
	}
	if !got.ContinueAsNew || got.NextGeneration != 3 || got.NextExecutionName != workflow.ExecutionName(op.ID, 3) ||
		got.NextExecutionName != op.ID+"-g3" || got.Next.Round != 0 || got.Next.DeadlineUnix != wait.DeadlineUnix {
		t.Fatalf("output = %+v", got)
	}
}

func TestHandlersRefuseBadInput(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{})
	_, err := stagetest.Handle(t, e.PollStage.Handle, map[string]any{"action": "nope"})
	stagetest.WantBare(t, err, "InvalidInputError")
	_, err = stagetest.Handle(t, e.GovStage.Handle, workflow.StageInput{Action: workflow.ActionCheck, OperationID: "missing", Tenant: stagetest.Tenant, Config: stagetest.RunConfig()})
	stagetest.WantBare(t, err, "NotFoundError")
	_, err = stagetest.Handle(t, e.CreateStage.Handle, workflow.StageInput{Action: workflow.ActionCreate, OperationID: "x", Tenant: stagetest.Tenant})
	stagetest.WantBare(t, err, "InvalidInputError")
}

func TestPollAfterSellerInputApprovedDoesNotAskAgain(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{})
	op, out := e.Placed("approved,input_required")
	// notify moved the operation to awaiting_approval; the approver said yes.
	if _, err := e.Store.Transition(context.Background(), stagetest.Tenant, op.ID, workflow.StatusAwaitingApproval, record.AnyVersion,
		record.Patch{Actor: "system"}); err != nil {
		t.Fatal(err)
	}
	got, err := e.PollStage.PollSeller(context.Background(), pollIn(op, out.Next, 0))
	if err != nil {
		t.Fatal(err)
	}
	if got.NeedsDecision() || got.Status != workflow.StatusAwaitingApproval {
		t.Fatalf("output = %+v: a seller still saying input-required must not ask the approver again", got)
	}
	task := e.Seller.Tasks()[0].ID
	for range 2 { // working, completed
		if _, err := e.Seller.Advance(task); err != nil {
			t.Fatal(err)
		}
	}
	got, err = e.PollStage.PollSeller(context.Background(), pollIn(op, got.Next, 0))
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != workflow.StatusCompleted || !got.Terminal || e.Op(op.ID).MediaBuyID == "" {
		t.Fatalf("output = %+v, operation %+v", got, e.Op(op.ID))
	}
}

// TestPollLostTaskWaitsTheGraceThenLeavesAFinding (issue 30, symptom 3): a seller restarted
// during its IO review forgets the task and answers REFERENCE_NOT_FOUND. The buy must not fail
// on that answer: it keeps waiting, on its cadence, for the grace (counted from the first such
// answer, not from the buy's last change hours ago), and only then fails with a finding a
// person can act on, on the timeline and in a metric.
func TestPollLostTaskWaitsTheGraceThenLeavesAFinding(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{Seller: adcptest.SellerOptions{ForgetTasksOnRestart: true}})
	var emf bytes.Buffer
	e.Build(stage.Options{Now: e.Clock.Now, Rand: func() float64 { return 0.99 }, Metrics: metrics.New(&emf, metrics.Namespace, e.Clock.Now)})
	op, out := e.Placed("approved,async_complete")
	task := op.SellerTaskID
	if _, err := e.Seller.Advance(task); err != nil { // the IO review: working
		t.Fatal(err)
	}
	got, err := e.PollStage.PollSeller(context.Background(), pollIn(op, out.Next, 0))
	if err != nil || got.Status != workflow.StatusWorking {
		t.Fatalf("first poll %+v, %v", got, err)
	}
	e.Clock.Advance(2 * time.Hour) // the review takes hours; then the seller restarts
	e.Seller.Restart()

	next := got.Next
	for _, after := range []time.Duration{0, sellertask.LostTaskGrace - time.Minute} {
		e.Clock.Advance(after)
		got, err = e.PollStage.PollSeller(context.Background(), pollIn(op, next, 0))
		if err != nil {
			t.Fatalf("poll %s into the grace: %v; a lost task must not fail the buy at once", after, err)
		}
		if got.NeedsDecision() || got.Status != workflow.StatusWorking || got.Next.Round != next.Round+1 || !stagetest.SafetyNet(got.Next.IntervalSeconds) {
			t.Fatalf("poll %s into the grace: %+v, want working and another interval", after, got)
		}
		if o := e.Op(op.ID); o.Status != workflow.StatusWorking {
			t.Fatalf("operation %s within the grace", o.Status)
		}
		next = got.Next
	}

	e.Clock.Advance(2 * time.Minute) // past the grace
	got, err = e.PollStage.PollSeller(context.Background(), pollIn(op, next, 0))
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != workflow.StatusFailed || !got.Terminal {
		t.Fatalf("output %+v after the grace, want failed", got)
	}
	o := e.Op(op.ID)
	for _, want := range []string{stagetest.SellerID, o.PONumber, task, "may", "get_media_buys"} {
		if want == "" || !strings.Contains(o.Reason, want) {
			t.Errorf("reason %q lacks %q", o.Reason, want)
		}
	}
	if o.Status != workflow.StatusFailed || o.ErrorCode != "REFERENCE_NOT_FOUND" {
		t.Errorf("operation %s code %q", o.Status, o.ErrorCode)
	}
	evs := stagetest.Events(t, e, op.ID)
	i := slices.IndexFunc(evs, func(ev record.Event) bool { return ev.Type == record.EventLostTask })
	if i < 0 {
		t.Fatalf("no %s event in %+v", record.EventLostTask, evs)
	}
	var d map[string]any
	if err := json.Unmarshal(evs[i].Detail, &d); err != nil {
		t.Fatal(err)
	}
	since, _ := time.Parse(time.RFC3339, fmt.Sprint(d["lost_since"]))
	if d["seller"] != stagetest.SellerID || d["po_number"] != o.PONumber || d["task_id"] != task || d["may_exist"] == "" || d["check"] == "" ||
		since.Sub(e.Clock.Now().Add(-sellertask.LostTaskGrace-time.Minute)).Abs() > 5*time.Second || evs[i].To != workflow.StatusFailed {
		t.Errorf("finding %+v detail %v, want lost since the first REFERENCE_NOT_FOUND", evs[i], d)
	}
	// The function's wiring flushes the stage's recorder once per invocation; flush it here.
	if err := e.PollStage.Metrics.Flush(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(emf.String(), `"LostSellerTasks":1`) || !strings.Contains(emf.String(), `"Seller":"`+stagetest.SellerID+`"`) {
		t.Errorf("metrics %s, want LostSellerTasks by Seller", emf.String())
	}
}

// The lost-task grace is the run configuration's when it sets one (lost_task_grace_seconds):
// an operator (or a local stack that must see a grace end) shortens or lengthens it, and the
// finding names the grace that was waited.
func TestPollLostTaskGraceFromTheRunConfig(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{Seller: adcptest.SellerOptions{ForgetTasksOnRestart: true}})
	op, out := e.Placed("approved,async_complete")
	e.Seller.Restart()
	in := pollIn(op, out.Next, 0)
	in.Config.LostTaskGraceSeconds = 30
	got, err := e.PollStage.PollSeller(context.Background(), in)
	if err != nil || got.Terminal {
		t.Fatalf("the first REFERENCE_NOT_FOUND: %+v, %v; want the buy waiting", got, err)
	}
	e.Clock.Advance(29 * time.Second)
	in.Wait = got.Next
	if got, err = e.PollStage.PollSeller(context.Background(), in); err != nil || got.Terminal {
		t.Fatalf("29 s into a 30 s grace: %+v, %v; want the buy waiting", got, err)
	}
	e.Clock.Advance(2 * time.Second)
	in.Wait = got.Next
	if got, err = e.PollStage.PollSeller(context.Background(), in); err != nil || got.Status != workflow.StatusFailed {
		t.Fatalf("past a 30 s grace: %+v, %v; want failed", got, err)
	}
	if o := e.Op(op.ID); o.ErrorCode != "REFERENCE_NOT_FOUND" || !strings.Contains(o.Reason, "past the 30-second grace") {
		t.Errorf("operation %s %q: %q", o.Status, o.ErrorCode, o.Reason)
	}
}
