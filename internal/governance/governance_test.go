package governance_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/adcptest"
	"github.com/buyflow/buyflow/internal/governance"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/stagetest"
	"github.com/buyflow/buyflow/internal/workflow"
)

func TestCheckApprovedProceeds(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{})
	op := e.NewOp("approved", false)

	out := e.Check(op)
	if out.Decision != workflow.GovernanceProceed || out.CheckID == "" || out.ExpiresAt == "" {
		t.Fatalf("output = %+v, want proceed with check id and expiry", out)
	}
	got := e.Op(op.ID)
	if got.Status != workflow.StatusCreating || got.GovernanceCheckID != out.CheckID || got.GovernanceContext == "" ||
		got.GovernanceExpiresAt.IsZero() || got.WebhookTokenHash == "" {
		t.Fatalf("operation = %+v", got)
	}
	args := stagetest.LastArgs(t, e.Gov.CallsTo("check_governance"))
	payload, _ := args["payload"].(map[string]any)
	if args["plan_id"] != stagetest.PlanID || args["caller"] != stagetest.CallerURI || args["tool"] != "create_media_buy" || payload == nil {
		t.Fatalf("check_governance args = %v", args)
	}
	if c, _ := payload["context"].(map[string]any); c["operation_id"] != op.ID || payload["plan_id"] != stagetest.PlanID {
		t.Fatalf("payload lacks plan_id / context echo: %v", payload)
	}
	if _, ok := args["account"]; ok {
		t.Fatal("check_governance carries account")
	}
	if b, _ := json.Marshal(out); strings.Contains(string(b), got.GovernanceContext) {
		t.Fatal("governance_context leaked into the task output")
	}
	// A retry after the stage let the buy through answers the same without a new check.
	again := e.Check(op)
	if again.Decision != workflow.GovernanceProceed || len(e.Gov.CallsTo("check_governance")) != 1 {
		t.Fatalf("retry = %+v, calls %d", again, len(e.Gov.CallsTo("check_governance")))
	}
}

func TestCheckDeniedStopsBeforeSpend(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{})
	op := e.NewOp("denied", false)

	out := e.Check(op)
	if out.Decision != workflow.GovernanceDenied || !strings.Contains(out.Reason, "critical") {
		t.Fatalf("output = %+v, want denied with the findings", out)
	}
	got := e.Op(op.ID)
	if got.Status != workflow.StatusRejected || got.Reason != out.Reason || got.GovernanceCheckID != "" {
		t.Fatalf("operation = %+v", got)
	}
	if n := len(e.Seller.Calls()); n != 0 {
		t.Fatalf("seller saw %d calls", n)
	}
	// A create that runs anyway sends nothing: the gate stays closed.
	if out := e.Create(op); !out.Terminal || out.Status != workflow.StatusRejected {
		t.Fatalf("create after denial = %+v", out)
	}
	if n := len(e.Seller.Calls()); n != 0 {
		t.Fatalf("seller saw %d calls after the denial", n)
	}
}

func TestCreateBeforeCheckSendsNothing(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{})
	op := e.NewOp("approved", false)
	_, err := stagetest.Handle(t, e.CreateStage.Handle, stagetest.StageIn(op, workflow.ActionCreate))
	stagetest.WantBare(t, err, "TerminalError")
	if n := len(e.Seller.Calls()); n != 0 {
		t.Fatalf("seller saw %d calls", n)
	}
}

func TestCheckConditionsAppliedThenApproved(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{})
	op := e.NewOp("conditions", false)

	out := e.Check(op)
	if out.Decision != workflow.GovernanceProceed {
		t.Fatalf("output = %+v, want proceed after the conditions were applied", out)
	}
	calls := e.Gov.CallsTo("check_governance")
	if len(calls) != 2 {
		t.Fatalf("%d checks, want 2", len(calls))
	}
	var second struct {
		Payload struct {
			Packages []struct {
				Budget float64 `json:"budget"`
			} `json:"packages"`
		} `json:"payload"`
	}
	if err := json.Unmarshal(calls[1].Arguments, &second); err != nil || second.Payload.Packages[0].Budget != 4000 {
		t.Fatalf("second check payload = %s (%v)", calls[1].Arguments, err)
	}
	// The seller gets exactly the checked payload.
	e.Create(op)
	args := stagetest.LastArgs(t, e.Seller.CallsTo("create_media_buy"))
	pk := args["packages"].([]any)[0].(map[string]any)
	if pk["budget"] != 4000.0 {
		t.Fatalf("create budget = %v, want the conditioned 4000", pk["budget"])
	}
}

func TestCheckAdvisoryConditionsNeedApproval(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{})
	op := e.NewOp("conditions_advisory", false)

	out := e.Check(op)
	if out.Decision != workflow.GovernanceNeedsApproval || !strings.HasPrefix(out.Reason, "governance_conditions") {
		t.Fatalf("output = %+v, want needs_approval for governance_conditions", out)
	}
	if got := e.Op(op.ID); got.Status != workflow.StatusAwaitingApproval {
		t.Fatalf("status = %s", got.Status)
	}
	if n := len(e.Gov.CallsTo("check_governance")); n != 1 {
		t.Fatalf("%d checks; non-actionable conditions are not re-checked", n)
	}
	// The same check retried before notify ran answers needs_approval again, with no new call.
	if again := e.Check(op); again.Decision != workflow.GovernanceNeedsApproval || len(e.Gov.CallsTo("check_governance")) != 1 {
		t.Fatalf("retry = %+v", again)
	}
}

func TestCheckPolicyThresholdNeedsApprovalOnce(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{Policy: stagetest.PolicyFunc(func(budget, _ string) (bool, string) {
		return budget >= "1000.00", "the budget is at or above 1000.00 USD"
	})})
	op := e.NewOp("approved", false)

	out := e.Check(op)
	if out.Decision != workflow.GovernanceNeedsApproval || out.Reason == "" || out.CheckID == "" {
		t.Fatalf("output = %+v, want needs_approval by policy", out)
	}
	got := e.Op(op.ID)
	if got.Status != workflow.StatusAwaitingApproval || got.GovernanceCheckID != out.CheckID {
		t.Fatalf("operation = %+v", got)
	}
	// notify asks a person; after the approval the state machine re-checks (a lapsed token):
	// the re-check does not ask again.
	if err := e.Store.AppendEvent(context.Background(), stagetest.Tenant, op.ID, record.Event{Type: record.EventApprovalRequested, Actor: "system"}); err != nil {
		t.Fatal(err)
	}
	re := e.Check(op)
	if re.Decision != workflow.GovernanceProceed || re.CheckID == out.CheckID {
		t.Fatalf("re-check = %+v, want proceed with a fresh check", re)
	}
	if got := e.Op(op.ID); got.Status != workflow.StatusCreating || got.GovernanceCheckID != re.CheckID {
		t.Fatalf("operation after re-check = %+v", got)
	}
}

func TestCheckRequireApproval(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{})
	op := e.NewOp("approved", true)
	if out := e.Check(op); out.Decision != workflow.GovernanceNeedsApproval {
		t.Fatalf("output = %+v, want needs_approval", out)
	}
}

func TestCheckAsyncReviewPendsThenProceeds(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{Gov: adcptest.GovernanceOptions{PollsPerStep: -1}})
	op := e.NewOp("async_review", false)

	out := e.Check(op)
	if out.Decision != workflow.GovernancePending || out.Wait.IntervalSeconds != stagetest.RunConfig().PollInitialSeconds {
		t.Fatalf("output = %+v, want pending with the wait interval", out)
	}
	// Still under review: pending again, polled, not re-checked.
	if again := e.Check(op); again.Decision != workflow.GovernancePending {
		t.Fatalf("second round = %+v", again)
	}
	tasks := e.Gov.Tasks()
	if len(tasks) != 1 {
		t.Fatalf("%d governance tasks", len(tasks))
	}
	if _, err := e.Gov.Advance(tasks[0].ID); err != nil {
		t.Fatal(err)
	}
	done := e.Check(op)
	if done.Decision != workflow.GovernanceProceed || done.CheckID == "" {
		t.Fatalf("after review = %+v, want proceed", done)
	}
	if n := len(e.Gov.CallsTo("check_governance")); n != 1 {
		t.Fatalf("%d check_governance calls, want 1 (then polls)", n)
	}
	if e.Op(op.ID).Status != workflow.StatusCreating {
		t.Fatalf("status = %s", e.Op(op.ID).Status)
	}
}

func TestCheckAsyncReviewDeadline(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{Gov: adcptest.GovernanceOptions{PollsPerStep: -1}})
	op := e.NewOp("async_review", false)
	if out := e.Check(op); out.Decision != workflow.GovernancePending {
		t.Fatalf("output = %+v", out)
	}
	e.Clock.Advance(time.Duration(stagetest.RunConfig().DeadlineSeconds+1) * time.Second)
	_, err := stagetest.Handle(t, e.GovStage.Handle, stagetest.StageIn(op, workflow.ActionCheck))
	stagetest.WantBare(t, err, "DeadlineExceededError")
	if got := e.Op(op.ID); got.Status != workflow.StatusExpired {
		t.Fatalf("status = %s", got.Status)
	}
}

func TestCheckUnreachableGovernanceIsTransient(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{})
	op := e.NewOp("approved", false)
	e.Gov.FailNextHTTP(10, 503)

	_, err := stagetest.Handle(t, e.GovStage.Handle, stagetest.StageIn(op, workflow.ActionCheck))
	stagetest.WantBare(t, err, "TransientError")
	if got := e.Op(op.ID); got.Status != workflow.StatusCheckingGovernance || got.GovernanceCheckID != "" {
		t.Fatalf("operation = %+v; the gate must stay closed", got)
	}
}

func TestReportCompletedReleasesLock(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{})
	op, _ := e.Placed("approved,sync")

	raw, err := stagetest.Handle(t, e.GovStage.Handle, workflow.OutcomeInput{Action: workflow.ActionReport, OperationID: op.ID, Tenant: stagetest.Tenant})
	if err != nil {
		t.Fatal(err)
	}
	if out := raw.(workflow.OutcomeOutput); out.CompensationRequired {
		t.Fatalf("output = %+v", out)
	}
	args := stagetest.LastArgs(t, e.Gov.CallsTo("report_plan_outcome"))
	sr, _ := args["seller_response"].(map[string]any)
	if args["outcome"] != "completed" || args["check_id"] != op.GovernanceCheckID || sr["seller_reference"] != op.MediaBuyID || sr["committed_budget"] != 5000.0 {
		t.Fatalf("report args = %v", args)
	}
	if _, err := e.GovStage.Report(context.Background(), workflow.OutcomeInput{OperationID: op.ID, Tenant: stagetest.Tenant}); err != nil {
		t.Fatal(err)
	}
	calls := e.Gov.CallsTo("report_plan_outcome")
	if len(calls) != 2 || string(calls[0].Arguments) != string(calls[1].Arguments) || !calls[1].Replayed {
		t.Fatalf("a repeated report must resend the same intent (replayed): %d calls", len(calls))
	}
	// The business key is free for the next buy.
	if _, err := e.Store.AcquireLock(context.Background(), record.BusinessKeyLock(stagetest.Tenant, stagetest.SellerID, op.PONumber), "other-op", time.Minute); err != nil {
		t.Fatalf("lock still held: %v", err)
	}
}

// A change may pause or cancel a buy the moment it reads completed, while the buy's own run
// still reports it: the buy was placed, and governance hears completed.
func TestReportAfterAChangeMovedThePlacedBuy(t *testing.T) {
	t.Parallel()
	for _, to := range []workflow.Status{workflow.StatusPaused, workflow.StatusCanceled} {
		e := stagetest.NewEnv(t, stagetest.Options{})
		op, _ := e.Placed("approved,sync")
		if _, err := e.Store.FollowChange(context.Background(), stagetest.Tenant, op.ID, workflow.StatusCompleted, to, op.BudgetTotal, record.Patch{Actor: "seller:x"}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.GovStage.Report(context.Background(), workflow.OutcomeInput{OperationID: op.ID, Tenant: stagetest.Tenant}); err != nil {
			t.Fatalf("report of a buy %s by a change: %v", to, err)
		}
		if args := stagetest.LastArgs(t, e.Gov.CallsTo("report_plan_outcome")); args["outcome"] != "completed" {
			t.Errorf("a buy %s by a change was reported %v", to, args["outcome"])
		}
	}
}

func TestReportFindingsRequireCompensation(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{})
	op, _ := e.Placed("approved,sync,outcome_findings")
	out, err := e.GovStage.Report(context.Background(), workflow.OutcomeInput{OperationID: op.ID, Tenant: stagetest.Tenant})
	if err != nil {
		t.Fatal(err)
	}
	if !out.CompensationRequired || !strings.Contains(out.Reason, "budget_compliance") {
		t.Fatalf("output = %+v, want compensation", out)
	}
}

func TestFailRecordsReasonReportsAndReleasesLock(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{})
	op := e.NewOp("approved", false)
	e.Check(op)

	in := workflow.OutcomeInput{Action: workflow.ActionFail, OperationID: op.ID, Tenant: stagetest.Tenant,
		Failure: &workflow.StepError{Error: "TerminalError", Cause: `{"errorMessage":"terminal: TERMS_REJECTED: no"}`}}
	raw, err := stagetest.Handle(t, e.GovStage.Handle, in)
	if err != nil {
		t.Fatal(err)
	}
	if out := raw.(governance.FailOutput); out.Status != workflow.StatusFailed || !out.Reported {
		t.Fatalf("output = %+v", out)
	}
	got := e.Op(op.ID)
	if got.Status != workflow.StatusFailed || !strings.Contains(got.Reason, "TERMS_REJECTED") {
		t.Fatalf("operation = %+v", got)
	}
	args := stagetest.LastArgs(t, e.Gov.CallsTo("report_plan_outcome"))
	if args["outcome"] != "failed" || args["check_id"] != got.GovernanceCheckID {
		t.Fatalf("report args = %v", args)
	}
	// The report names the seller's code, not the Lambda's error type.
	if rerr, _ := args["error"].(map[string]any); rerr["code"] != "TERMS_REJECTED" {
		t.Fatalf("report error = %v", args["error"])
	}
	if _, err := e.Store.AcquireLock(context.Background(), record.BusinessKeyLock(stagetest.Tenant, stagetest.SellerID, op.PONumber), "other-op", time.Minute); err != nil {
		t.Fatalf("lock still held: %v", err)
	}
	// Recording again tolerates the terminal status.
	if _, err := e.GovStage.Fail(context.Background(), in); err != nil {
		t.Fatalf("second fail: %v", err)
	}
}

func TestFailMapsFailureKinds(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{})
	for name, want := range map[string]workflow.Status{
		"GovernanceDenied": workflow.StatusRejected, "ApprovalRejectedError": workflow.StatusRejected,
		"States.Timeout": workflow.StatusExpired, "DeadlineExceededError": workflow.StatusExpired,
		"States.TaskFailed": workflow.StatusFailed,
	} {
		op := e.NewOp("approved", false)
		out, err := e.GovStage.Fail(context.Background(), workflow.OutcomeInput{OperationID: op.ID, Tenant: stagetest.Tenant,
			Failure: &workflow.StepError{Error: name, Cause: "because"}})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if out.Status != want || out.Reported {
			t.Fatalf("%s: output = %+v, want %s and nothing reported (no check)", name, out, want)
		}
	}
}

// An approval nobody decided, and any other failure the engine names, leaves a reason a person
// reads: never "States.Timeout: States.Timeout".
func TestFailReasonIsASentence(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{})
	for _, c := range []struct {
		failure workflow.StepError
		want    string
	}{
		{workflow.StepError{Error: "States.Timeout", Cause: "States.Timeout"}, "the approval expired with no decision, so the buy went no further"},
		{workflow.StepError{Error: "States.Timeout"}, "the approval expired with no decision, so the buy went no further"},
		{workflow.StepError{Error: "Lambda.ServiceException", Cause: "Lambda.ServiceException: boom"}, "AWS Lambda failed while running a step, and every retry failed too"},
	} {
		op := e.NewOp("approved", false)
		if _, err := e.GovStage.Fail(context.Background(), workflow.OutcomeInput{OperationID: op.ID, Tenant: stagetest.Tenant, Failure: &c.failure}); err != nil {
			t.Fatalf("%s: %v", c.failure.Error, err)
		}
		if got := e.Op(op.ID).Reason; got != c.want {
			t.Errorf("%s: reason %q, want %q", c.failure.Error, got, c.want)
		}
	}
}

// A step failed (its answer lost in a crash), but the seller completed the buy and the ledger
// recorded it: RecordFailure reports "completed" (not "failed"), appends nothing after the
// terminal status but the outcome report and the lock release, and tells the state machine
// the buy completed. A later ReportOutcome resends the same intent: governance counts one
// outcome.
func TestFailOnACompletedBuyReportsItCompleted(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{})
	op, _ := e.Placed("approved,sync")
	if op.Status != workflow.StatusCompleted {
		t.Fatalf("placed status %s, want completed", op.Status)
	}
	before := len(stagetest.Events(t, e, op.ID))
	in := workflow.OutcomeInput{Action: workflow.ActionFail, OperationID: op.ID, Tenant: stagetest.Tenant,
		Failure: &workflow.StepError{Error: "Runtime.ExitError", Cause: `{"errorType":"Runtime.ExitError","errorMessage":"signal: killed"}`}}
	raw, err := stagetest.Handle(t, e.GovStage.Handle, in)
	if err != nil {
		t.Fatal(err)
	}
	if out := raw.(governance.FailOutput); out.Status != workflow.StatusCompleted || !out.Reported || out.CompensationRequired {
		t.Fatalf("output = %+v, want completed, reported, no compensation", out)
	}
	got := e.Op(op.ID)
	if got.Status != workflow.StatusCompleted || got.Reason != "" {
		t.Fatalf("operation = %+v, want it completed with no failure reason", got)
	}
	var added []string
	for _, ev := range stagetest.Events(t, e, op.ID)[before:] {
		added = append(added, ev.Type)
	}
	if !slices.Equal(added, []string{record.EventOutcomeReport, record.EventLockReleased}) {
		t.Fatalf("events after completed: %v, want only the outcome report and the lock release", added)
	}
	calls := e.Gov.CallsTo("report_plan_outcome")
	if len(calls) != 1 || stagetest.LastArgs(t, calls)["outcome"] != "completed" {
		t.Fatalf("report_plan_outcome calls %d (%v), want one 'completed'", len(calls), stagetest.LastArgs(t, calls))
	}
	if _, err := e.GovStage.Report(context.Background(), workflow.OutcomeInput{OperationID: op.ID, Tenant: stagetest.Tenant}); err != nil {
		t.Fatal(err)
	}
	calls = e.Gov.CallsTo("report_plan_outcome")
	if len(calls) != 2 || string(calls[0].Arguments) != string(calls[1].Arguments) || !calls[1].Replayed {
		t.Fatalf("ReportOutcome after RecordFailure must resend the same intent (a replay): %d calls", len(calls))
	}
}

// A failure recorded for an operation that already failed appends no second failure event.
func TestFailAfterTheEndAppendsNoFailureEvent(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{})
	op := e.NewOp("approved", false)
	in := workflow.OutcomeInput{OperationID: op.ID, Tenant: stagetest.Tenant, Failure: &workflow.StepError{Error: "TerminalError", Cause: "no"}}
	if _, err := e.GovStage.Fail(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	if _, err := e.GovStage.Fail(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ev := range stagetest.Events(t, e, op.ID) {
		if ev.Type == record.EventFailure {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d failure events, want 1", n)
	}
}
