package stagepaths

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/apiclient"
	"github.com/buyflow/buyflow/internal/workflow"
)

// One test per path of mediabuy.asl.json. Each asserts the states entered,
// what the stage invocations answered, the AdCP calls the agents recorded and the ledger as
// the read API shows it.

var (
	prelude   = []string{"IsContinuation", "CheckGovernance", "GovernanceDecision"}
	completes = []string{"SellerTaskStatus", "ReportOutcome", "UndoRequired", "MediaBuyCompleted"}
)

func seq(parts ...[]string) []string { return slices.Concat(parts...) }

// path checks one execution's end and the exact states it entered.
func path(t *testing.T, ex execution, status, errName string, states ...string) {
	t.Helper()
	if ex.Status != status || ex.Error != errName {
		t.Errorf("execution ended %s %q (cause %q), want %s %q", ex.Status, ex.Error, ex.Cause, status, errName)
	}
	if !slices.Equal(ex.States, states) {
		t.Errorf("states:\n got  %s\n want %s", strings.Join(ex.States, " > "), strings.Join(states, " > "))
	}
}

// ends checks one execution's end and the last states it entered (paths whose start varies
// with timing, such as the number of poll rounds).
func ends(t *testing.T, ex execution, status, errName string, tail ...string) {
	t.Helper()
	if ex.Status != status || ex.Error != errName || len(ex.States) < len(tail) || !slices.Equal(ex.States[len(ex.States)-len(tail):], tail) {
		t.Errorf("execution ended %s %q after %v, want %s %q after ... %v", ex.Status, ex.Error, ex.States, status, errName, tail)
	}
}

// only returns the single execution of a buy that did not continue as new.
func only(t *testing.T, exs []execution) execution {
	t.Helper()
	if len(exs) != 1 {
		t.Fatalf("%d executions, want 1", len(exs))
	}
	return exs[0]
}

func wantStatus(t *testing.T, op api.MediaBuy, status string) {
	t.Helper()
	if op.Status != status {
		t.Errorf("operation %s is %s (reason %q), want %s", op.OperationID, op.Status, op.Reason, status)
	}
}

func wantCalls(t *testing.T, who string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s recorded %v, want %v", who, got, want)
	}
}

// wantReport checks that governance heard exactly one report_plan_outcome, with outcome.
func (r *buyRun) wantReport(outcome string) {
	r.t.Helper()
	if reports := r.governanceCalls("report_plan_outcome"); len(reports) != 1 || arg(r.t, reports[0].Arguments, "outcome") != outcome {
		r.t.Errorf("governance heard %v, want one report_plan_outcome %s", tools(reports), outcome)
	}
}

// arg decodes one argument of a recorded call.
func arg(t *testing.T, raw json.RawMessage, name string) any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m[name]
}

func TestApprovedSyncCreateSucceeds(t *testing.T) { approvedSyncCreate(begin(t, nil)) }

// approvedSyncCreate is the path at r's agents (versions_test.go runs it at 3.1 too).
func approvedSyncCreate(r *buyRun) {
	t := r.t
	r.submit(apiclient.Buy{Sim: "sync"})
	ex := only(t, r.finish(60*time.Second))
	path(t, ex, "SUCCEEDED", "", seq(prelude, []string{"CreateMediaBuy", "SellerAvailable", "AwaitSeller"}, completes)...)
	// AwaitSeller's park saw the terminal create result and completed its own token at once.
	wantCalls(t, "invocations", actions([]execution{ex}), "CheckGovernance:ok", "CreateMediaBuy:ok", "AwaitSeller:ok", "ReportOutcome:ok")

	wantCalls(t, "seller", tools(r.sellerCalls("")), "create_media_buy")
	wantCalls(t, "governance", tools(r.governanceCalls("")), "check_governance", "report_plan_outcome")
	check := r.governanceCalls("check_governance")[0]
	create := r.sellerCalls("create_media_buy")[0]
	report := r.governanceCalls("report_plan_outcome")[0]
	var verdict struct {
		CheckID string `json:"check_id"`
		Context string `json:"governance_context"`
	}
	_ = json.Unmarshal(check.Result, &verdict)
	if arg(t, create.Arguments, "governance_context") != verdict.Context || verdict.Context == "" {
		t.Errorf("create_media_buy did not carry the governance context of the check")
	}
	if arg(t, report.Arguments, "outcome") != "completed" || arg(t, report.Arguments, "check_id") != verdict.CheckID ||
		arg(t, report.Arguments, "governance_context") != verdict.Context {
		t.Errorf("report_plan_outcome %s: want outcome completed for check %s with its governance_context", report.Arguments, verdict.CheckID)
	}
	// 3.2's intent check names the seller it is for and carries no governance_context yet;
	// 3.1's names the plan and no target agent.
	if r.version() == adcp.Version32 {
		if arg(t, check.Arguments, "target_agent") == nil || arg(t, check.Arguments, "governance_context") != nil {
			t.Errorf("the 3.2 intent check %s: want target_agent and no governance_context", check.Arguments)
		}
	} else if arg(t, check.Arguments, "plan_id") == nil || arg(t, check.Arguments, "target_agent") != nil {
		t.Errorf("the 3.1 intent check %s: want plan_id and no target_agent", check.Arguments)
	}

	op := r.operation()
	wantStatus(t, op, "completed")
	if op.MediaBuyID == "" {
		t.Error("completed without the seller's media_buy_id")
	}
	tl := r.timeline()
	for _, want := range []string{"created", "governance_check", "seller_call", "outcome_report", "lock_released"} {
		if !slices.Contains(tl, want) {
			t.Errorf("timeline %v lacks %s", tl, want)
		}
	}
}

func TestGovernanceDeniedCreatesNothing(t *testing.T) { governanceDenied(begin(t, nil)) }

// governanceDenied is the path at r's agents (versions_test.go runs it at 3.1 too).
func governanceDenied(r *buyRun) {
	t := r.t
	r.submit(apiclient.Buy{Sim: "denied"})
	ex := only(t, r.finish(60*time.Second))
	path(t, ex, "FAILED", "GovernanceDenied", seq(prelude, []string{"GovernanceDenied", "RecordFailure", "FailureKind", "DeniedByGovernance"})...)
	wantCalls(t, "seller", tools(r.sellerCalls("")))
	wantCalls(t, "governance", tools(r.governanceCalls("")), "check_governance")
	op := r.operation()
	wantStatus(t, op, "rejected")
	if !strings.Contains(op.Reason, "governance denied") || !strings.Contains(op.Reason, "budget_compliance") {
		t.Errorf("reason %q does not say governance denied it and why", op.Reason)
	}
	if slices.Contains(r.timeline(), "seller_call") {
		t.Error("a seller call was recorded")
	}
}

// Machine-actionable conditions are applied and checked again (inside one CheckGovernance
// invocation); the create carries the reduced budget.
func TestGovernanceConditionsRecheck(t *testing.T) { conditionsRecheck(begin(t, nil)) }

// conditionsRecheck is the path at r's agents (versions_test.go runs it at 3.1 too: 3.1
// conditions carry a governance_context, 3.2's a consultation_context).
func conditionsRecheck(r *buyRun) {
	t := r.t
	r.submit(apiclient.Buy{Sim: "conditions,sync"})
	ex := only(t, r.finish(60*time.Second))
	path(t, ex, "SUCCEEDED", "", seq(prelude, []string{"CreateMediaBuy", "SellerAvailable", "AwaitSeller"}, completes)...)
	checks := r.governanceCalls("check_governance")
	if len(checks) != 2 {
		t.Fatalf("%d check_governance calls, want 2 (conditions, then the re-check)", len(checks))
	}
	if v := arg(t, checks[0].Result, "verdict"); v != "conditions" {
		t.Errorf("first verdict %v, want conditions", v)
	}
	if v := arg(t, checks[1].Result, "verdict"); v != "approved" {
		t.Errorf("re-check verdict %v, want approved", v)
	}
	var create struct {
		Packages []struct {
			Budget float64 `json:"budget"`
		} `json:"packages"`
	}
	_ = json.Unmarshal(r.sellerCalls("create_media_buy")[0].Arguments, &create)
	if len(create.Packages) == 0 || create.Packages[0].Budget != 2400 {
		t.Errorf("create_media_buy packages %+v: want the first budget reduced to 2400 (80 %% of 3000)", create.Packages)
	}
	wantStatus(t, r.operation(), "completed")
}

// The governance agent answers submitted: the workflow waits and checks the review task again.
func TestAsyncGovernanceReview(t *testing.T) {
	r := begin(t, nil)
	r.submit(apiclient.Buy{Sim: "async_review,sync"})
	ex := only(t, r.finish(60*time.Second))
	path(t, ex, "SUCCEEDED", "", seq(prelude, []string{"WaitForGovernanceReview", "CheckGovernance", "GovernanceDecision", "CreateMediaBuy", "SellerAvailable", "AwaitSeller"}, completes)...)
	gov := tools(r.governanceCalls(""))
	if len(gov) < 3 || gov[0] != "check_governance" || gov[len(gov)-1] != "report_plan_outcome" ||
		count(gov, "get_task_status")+count(gov, "tasks/get") == 0 {
		t.Errorf("governance recorded %v: want check_governance, polls of its review task, report_plan_outcome", gov)
	}
	wantCalls(t, "seller", tools(r.sellerCalls("")), "create_media_buy")
	wantStatus(t, r.operation(), "completed")
}

// The seller answers submitted and later completes by webhook: the webhook wakes AwaitSeller
// before its first poll is due.
func TestSubmittedThenWebhookWakes(t *testing.T) { webhookWakes(begin(t, webhookFirst)) }

// webhookFirst puts the first poll well after the seller's webhook.
var webhookFirst = map[string]any{"poll_initial_seconds": 10, "poll_max_seconds": 10}

// webhookWakes is the path at r's agents, r begun with webhookFirst (versions_test.go runs it
// at 3.1 too).
func webhookWakes(r *buyRun) {
	t := r.t
	r.submit(apiclient.Buy{Sim: "async_complete"})
	ex := only(t, r.finish(60*time.Second))
	path(t, ex, "SUCCEEDED", "", seq(prelude, []string{"CreateMediaBuy", "SellerAvailable", "AwaitSeller"}, completes)...)
	wantCalls(t, "invocations", actions([]execution{ex}), "CheckGovernance:ok", "CreateMediaBuy:ok", "AwaitSeller:ok", "ReportOutcome:ok")
	wantCalls(t, "seller", tools(r.sellerCalls("")), "create_media_buy") // no poll
	op := r.operation()
	wantStatus(t, op, "completed")
	tl := r.timeline()
	if !slices.Contains(tl, "webhook") || slices.Contains(tl, "poll") {
		t.Errorf("timeline %v: want the seller's webhook and no poll", tl)
	}
	if op.SellerTaskID == "" && op.MediaBuyID == "" {
		t.Error("the ledger lost the seller's task and media buy ids")
	}
}

// No webhook arrives (the seller drops them all) and no sweep runs: the per-buy safety net
// still finishes the buy. AwaitSeller times out every poll_max_seconds (jittered down by at
// most a quarter) and PollSeller polls until the seller is done.
func TestSubmittedNoWebhookNoSweepCompletesThroughTheSafetyNet(t *testing.T) {
	r := begin(t, map[string]any{"poll_initial_seconds": 1, "poll_max_seconds": 4})
	r.submit(apiclient.Buy{Sim: "async_complete,hold,wh_drop_all"})
	task := r.sellerTask()
	polls := func() []time.Time {
		var at []time.Time
		for _, c := range r.sellerCalls("") {
			if c.Tool == "get_task_status" || c.Tool == "tasks/get" {
				at = append(at, c.Time)
			}
		}
		return at
	}
	eventually(t, 40*time.Second, "four seller polls", func() bool { return len(polls()) >= 4 })
	if err := sys.agents.Seller.Finish(task, "completed"); err != nil {
		t.Fatal(err)
	}
	ex := only(t, r.finish(60*time.Second))
	if ex.Status != "SUCCEEDED" || ex.States[len(ex.States)-1] != "MediaBuyCompleted" {
		t.Fatalf("execution %s %s", ex.Status, ex.Error)
	}
	if n := count(ex.States, "PollSeller"); n < 4 {
		t.Errorf("PollSeller entered %d times, want >= 4", n)
	}
	if n := count(actions([]execution{ex}), "AwaitSeller:States.Timeout"); n < 4 {
		t.Errorf("%d AwaitSeller timeouts, want >= 4", n)
	}
	// Every gap, the first one included, is one safety-net interval: 3 to 4 s.
	at := append([]time.Time{r.sellerCalls("create_media_buy")[0].Time}, polls()...)
	for i := 1; i < len(at); i++ {
		if gap := at[i].Sub(at[i-1]); gap < 2500*time.Millisecond || gap > 6*time.Second {
			t.Errorf("gap before poll %d: %v, want one safety-net interval (3-4 s)", i, gap)
		}
	}
	wantStatus(t, r.operation(), "completed")
	if tl := r.timeline(); slices.Contains(tl, "webhook") || !slices.Contains(tl, "poll") {
		t.Errorf("timeline %v: want polls and no webhook", tl)
	}
}

func TestApprovalApproved(t *testing.T) {
	r := begin(t, nil)
	r.submit(apiclient.Buy{Budgets: []float64{12000, 3000}, Sim: "sync"})
	r.decide("approve")
	ex := only(t, r.finish(60*time.Second))
	path(t, ex, "SUCCEEDED", "", seq(prelude, []string{"ApprovalForGovernance", "RequestApproval", "RouteApproval", "CreateMediaBuy", "SellerAvailable", "AwaitSeller"}, completes)...)
	wantCalls(t, "seller", tools(r.sellerCalls("")), "create_media_buy")
	wantStatus(t, r.operation(), "completed")
	tl := r.timeline()
	ai, di, si := slices.Index(tl, "approval_requested"), slices.Index(tl, "decision"), slices.Index(tl, "seller_call")
	if ai < 0 || di < ai || si < di {
		t.Errorf("timeline %v: want approval_requested, then decision, then seller_call", tl)
	}
}

func TestApprovalRejected(t *testing.T) {
	r := begin(t, nil)
	r.submit(apiclient.Buy{RequireApproval: true, Sim: "sync"})
	r.decide("reject")
	ex := only(t, r.finish(60*time.Second))
	path(t, ex, "FAILED", "ApprovalRejected", seq(prelude, []string{"ApprovalForGovernance", "RequestApproval", "CancelIfPlaced", "RecordFailure", "FailureKind", "RejectedByApprover"})...)
	wantCalls(t, "seller", tools(r.sellerCalls("")))
	wantStatus(t, r.operation(), "rejected")
}

func TestApprovalTimedOut(t *testing.T) {
	// 8 s, not 2: the test needs the Slack link, and notify posts none for an approval already
	// past its deadline, which a loaded machine can reach between the approval and its post.
	r := begin(t, map[string]any{"approval_timeout_seconds": 8})
	r.submit(apiclient.Buy{RequireApproval: true, Sim: "sync"})
	link := r.approvalLink()
	ex := only(t, r.finish(60*time.Second))
	path(t, ex, "FAILED", "ApprovalExpired", seq(prelude, []string{"ApprovalForGovernance", "RequestApproval", "ExpireApproval", "EscalateOrGiveUp", "CancelIfPlaced", "RecordFailure", "FailureKind", "ApprovalExpired"})...)
	wantCalls(t, "invocations", actions([]execution{ex}), "CheckGovernance:ok", "RequestApproval:States.Timeout", "ExpireApproval:ok", "RecordFailure:ok")
	wantCalls(t, "seller", tools(r.sellerCalls("")))
	wantStatus(t, r.operation(), "expired")
	// The link now opens a page that says so (apiclient.Decide reports the page's status as an
	// error) and decides nothing.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if code, heading, err := apiclient.Decide(ctx, nil, link, "approve", ""); err == nil {
		t.Errorf("the expired link still decides: HTTP %d %q", code, heading)
	} else {
		t.Logf("approving from the expired link: %v", err)
	}
	if tl := r.timeline(); slices.Contains(tl, "decision") {
		t.Errorf("timeline %v records a decision after the expiry", tl)
	}
}

// The governance approval lapses while the person decides: CheckGovernance runs again before
// anything is spent.
func TestSlowApprovalRechecksGovernance(t *testing.T) {
	r := begin(t, nil)
	r.submit(apiclient.Buy{Budgets: []float64{12000, 3000}, Sim: "short_ttl,sync"})
	link := r.approvalLink()
	time.Sleep(2500 * time.Millisecond) // the check's expires_at is at most 1 s after it
	if code, heading := decideLink(t, link, "approve"); code != 200 {
		t.Fatalf("approve: HTTP %d %q", code, heading)
	}
	ex := only(t, r.finish(60*time.Second))
	if i := slices.Index(ex.States, "RouteApproval"); i < 0 || i+1 >= len(ex.States) || ex.States[i+1] != "CheckGovernance" {
		t.Errorf("states %v: want RouteApproval > CheckGovernance", ex.States)
	}
	checks := r.governanceCalls("check_governance")
	creates := r.sellerCalls("create_media_buy")
	if len(checks) < 2 {
		t.Fatalf("%d check_governance calls, want a re-check", len(checks))
	}
	for _, c := range creates {
		if c.Time.Before(checks[1].Time) {
			t.Error("create_media_buy was called before the re-check")
		}
	}
	t.Logf("path %s; governance %v; seller %v", strings.Join(ex.States, " > "), tools(r.governanceCalls("")), tools(creates))
}

// The seller asks for the buyer's input: a person is asked, approves, and the workflow follows
// the seller task to its end.
func TestSellerInputRequired(t *testing.T) {
	r := begin(t, nil)
	r.submit(apiclient.Buy{Sim: "input_required"})
	r.decide("approve")
	ex := only(t, r.finish(60*time.Second))
	path(t, ex, "SUCCEEDED", "", seq(prelude, []string{"CreateMediaBuy", "SellerAvailable", "AwaitSeller", "SellerTaskStatus", "ApprovalForSellerInput",
		"RequestApproval", "RouteApproval", "PollSeller", "AwaitSeller"}, completes)...)
	wantStatus(t, r.operation(), "completed")
	msgs := r.slackMessages()
	if len(msgs) == 0 || !strings.Contains(string(msgs[0].Body)+msgs[0].Text, "confirm the budget") {
		t.Errorf("the approval request does not carry the seller's message: %v", msgs)
	}
}

// The seller asks for input and the approver says no: the placed buy is canceled at the seller
// (CancelIfPlaced → Compensate) and the buy ends rejected.
func TestSellerInputRequiredRejected(t *testing.T) {
	r := begin(t, nil)
	r.submit(apiclient.Buy{Sim: "input_required,hold"})
	r.decide("reject")
	ex := only(t, r.finish(60*time.Second))
	path(t, ex, "FAILED", "ApprovalRejected", seq(prelude, []string{"CreateMediaBuy", "SellerAvailable", "AwaitSeller", "SellerTaskStatus", "ApprovalForSellerInput",
		"RequestApproval", "CancelIfPlaced", "Compensate", "AfterCompensation", "RecordFailure", "FailureKind", "RejectedByApprover"})...)
	op := r.operation()
	wantStatus(t, op, "rejected")
	if tl := r.timeline(); !slices.Contains(tl, "cancel") {
		t.Errorf("timeline %v has no cancel", tl)
	}
	// The seller's task never produced a media buy, so there is nothing to update: the cancel
	// asked for the task's status to learn an id, and recorded that there was none.
	if got := tools(r.sellerCalls("")); got[0] != "create_media_buy" || slices.Contains(got, "update_media_buy") {
		t.Errorf("seller recorded %v: want the create and no update", got)
	}
}

func TestSellerFailed(t *testing.T) { sellerFailed(begin(t, nil)) }

// sellerFailed is the path at r's agents (versions_test.go runs it at 3.1 too: 3.2's failed
// report must carry check_id and governance_context).
func sellerFailed(r *buyRun) {
	t := r.t
	r.submit(apiclient.Buy{Sim: "async_fail"})
	ex := only(t, r.finish(60*time.Second))
	ends(t, ex, "FAILED", "SellerDidNotComplete", "SellerDidNotComplete", "RecordFailure", "FailureKind", "SellerTaskFailed")
	op := r.operation()
	wantStatus(t, op, "failed")
	if !strings.Contains(op.Reason, "sold out") {
		t.Errorf("reason %q does not carry the seller's explanation", op.Reason)
	}
	r.wantReport("failed")
}

// Transient faults: the seller answers 503 twice (the create stage returns TransientError, the
// ASL retries with the same intent) and the Lambda service refuses two park invocations
// (Lambda.ServiceException, retried by the ASL).
func TestTransientErrorsRetriedThenSuccess(t *testing.T) {
	r := begin(t, nil)
	sys.agents.Seller.Script(r.po, "http_503*2")
	t.Cleanup(func() { sys.agents.Seller.Script(r.po, "") })
	sys.lambda.inject("poll", r.tenant, 2)
	r.submit(apiclient.Buy{Sim: "sync"})
	ex := only(t, r.finish(60*time.Second))
	path(t, ex, "SUCCEEDED", "", seq(prelude, []string{"CreateMediaBuy", "SellerAvailable", "AwaitSeller"}, completes)...)
	if ex.Retries["CreateMediaBuy"] != 2 || ex.Retries["AwaitSeller"] != 2 {
		t.Errorf("retries %v, want CreateMediaBuy 2 and AwaitSeller 2", ex.Retries)
	}
	wantCalls(t, "invocations", actions([]execution{ex}), "CheckGovernance:ok",
		"CreateMediaBuy:TransientError", "CreateMediaBuy:TransientError", "CreateMediaBuy:ok",
		"AwaitSeller:Lambda.ServiceException", "AwaitSeller:Lambda.ServiceException", "AwaitSeller:ok", "ReportOutcome:ok")
	creates := r.sellerCalls("create_media_buy")
	wantCalls(t, "seller", tools(creates), "create_media_buy(http_503)", "create_media_buy(http_503)", "create_media_buy")
	for _, c := range creates[1:] {
		if string(c.Arguments) != string(creates[0].Arguments) {
			t.Errorf("a retried create_media_buy sent other bytes:\n%s\n%s", creates[0].Arguments, c.Arguments)
		}
	}
	wantStatus(t, r.operation(), "completed")
}

// A permanent seller error is caught, not retried: the buy fails with the seller's reason.
func TestPermanentErrorCaught(t *testing.T) {
	r := begin(t, nil)
	r.submit(apiclient.Buy{Sim: "rejected"})
	ex := only(t, r.finish(60*time.Second))
	path(t, ex, "FAILED", "MediaBuyFailed", seq(prelude, []string{"CreateMediaBuy", "RecordFailure", "FailureKind", "MediaBuyFailed"})...)
	wantCalls(t, "invocations", actions([]execution{ex}), "CheckGovernance:ok", "CreateMediaBuy:TerminalError", "RecordFailure:ok")
	wantCalls(t, "seller", tools(r.sellerCalls("")), "create_media_buy")
	op := r.operation()
	wantStatus(t, op, "failed")
	if !strings.Contains(op.Reason, "POLICY_VIOLATION") {
		t.Errorf("reason %q does not name the seller's error", op.Reason)
	}
	r.wantReport("failed")
}

// The seller never finishes within the deadline: the workflow cancels and reports.
func TestDeadlineExceededCancelsAndReports(t *testing.T) {
	r := begin(t, map[string]any{"deadline_seconds": 3})
	r.submit(apiclient.Buy{Sim: "async_complete,hold,wh_drop_all"})
	ex := only(t, r.finish(60*time.Second))
	ends(t, ex, "FAILED", "DeadlineExceeded", "SellerTaskStatus", "SellerDeadlineExceeded", "CancelAfterDeadline", "RecordFailure", "FailureKind", "DeadlinePassed")
	op := r.operation()
	tl := r.timeline()
	t.Logf("operation %s (%q); timeline %v; seller %v; governance %v", op.Status, op.Reason, tl, tools(r.sellerCalls("")), tools(r.governanceCalls("")))
	wantStatus(t, op, "expired")
	if !strings.Contains(op.Reason, "deadline") {
		t.Errorf("reason %q does not name the deadline", op.Reason)
	}
	if !slices.Contains(tl, "cancel") {
		t.Errorf("timeline %v has no cancel", tl)
	}
	r.wantReport("failed")
}

// The governance agent's outcome findings require an undo: the buy is canceled at the seller
// and the ledger says so.
func TestOutcomeFindingsCompensate(t *testing.T) {
	r := begin(t, nil)
	r.submit(apiclient.Buy{Sim: "sync,outcome_findings"})
	ex := only(t, r.finish(60*time.Second))
	path(t, ex, "FAILED", "CanceledAfterGovernanceFindings", seq(prelude, []string{"CreateMediaBuy", "SellerAvailable", "AwaitSeller", "SellerTaskStatus",
		"ReportOutcome", "UndoRequired", "Compensate", "AfterCompensation", "CanceledAfterGovernanceFindings"})...)
	wantCalls(t, "seller", tools(r.sellerCalls("")), "create_media_buy", "update_media_buy")
	op := r.operation()
	upd := r.sellerCalls("update_media_buy")[0]
	if arg(t, upd.Arguments, "canceled") != true || arg(t, upd.Arguments, "media_buy_id") != op.MediaBuyID || op.MediaBuyID == "" {
		t.Errorf("update_media_buy %s: want canceled: true for media buy %q", upd.Arguments, op.MediaBuyID)
	}
	wantStatus(t, op, "canceled")
	if op.Reason == "" {
		t.Error("canceled without a reason")
	}
}

// The loop budget is spent: the execution continues as a new one under a deterministic name,
// which follows the same seller task to its end without a second create.
func TestHistoryBudgetContinuesAsNew(t *testing.T) {
	r := begin(t, map[string]any{"loop_budget": 2, "poll_initial_seconds": 1, "poll_max_seconds": 1})
	r.submit(apiclient.Buy{Sim: "async_complete,hold,wh_drop_all"})
	task := r.sellerTask()
	eventually(t, 40*time.Second, "five seller polls", func() bool {
		n := 0
		for _, c := range r.sellerCalls("") {
			if c.Tool == "get_task_status" || c.Tool == "tasks/get" {
				n++
			}
		}
		return n >= 5
	})
	if err := sys.agents.Seller.Finish(task, "completed"); err != nil {
		t.Fatal(err)
	}
	exs := r.finish(90 * time.Second)
	if len(exs) < 2 {
		t.Fatalf("%d executions, want the first to continue as new", len(exs))
	}
	first, last := exs[0], exs[len(exs)-1]
	if first.Status != "SUCCEEDED" || first.States[len(first.States)-1] != "HandedOverToNextExecution" ||
		!slices.Contains(first.States, "ContinueAsNewExecution") {
		t.Errorf("first execution %s: %v", first.Status, first.States)
	}
	for i, ex := range exs[1:] {
		var in struct {
			Generation int `json:"generation"`
		}
		_ = json.Unmarshal(ex.Input, &in)
		if in.Generation != i+1 || ex.States[0] != "IsContinuation" || ex.States[1] != "AwaitSeller" {
			t.Errorf("execution %s: generation %d, states %v: want generation %d resuming at AwaitSeller", ex.Name, in.Generation, ex.States[:2], i+1)
		}
		if want := workflow.ExecutionName(r.op, i+1); ex.Name != want {
			t.Errorf("continuation %s, want the deterministic name %s", ex.Name, want)
		}
	}
	if last.Status != "SUCCEEDED" || last.States[len(last.States)-1] != "MediaBuyCompleted" {
		t.Errorf("last execution %s: %v", last.Status, last.States)
	}
	wantCalls(t, "governance", tools(r.governanceCalls("")), "check_governance", "report_plan_outcome")
	if n := len(r.sellerCalls("create_media_buy")); n != 1 {
		t.Errorf("%d create_media_buy calls across the executions, want 1", n)
	}
	op := r.operation()
	wantStatus(t, op, "completed")
	t.Logf("operation execution_name %q", op.ExecutionName)
}
