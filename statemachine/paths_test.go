package statemachine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/buyflow/buyflow/internal/workflow"
)

// Path tests (test layer 2, docs/ARCHITECTURE.md): every path of mediabuy.asl.json executed in
// aws-local-stepfunctions 3.0.0 through harness/run.mjs, with each Lambda task answered by a
// scenario. They own Retry, Catch, error names, timeouts and the order of states.
//
// Scripted results reach corners the real stages rarely produce (an unexpected governance
// decision, a failed cancel, a failure the recorder cannot record). statemachine/stagepaths
// runs the same ASL with the real Go bootstraps behind every Task, one test per path.
//
// They need Node (>= 20) and the root node_modules; set BUYFLOW_NODE_TESTS=1 (make test does).

type entry map[string]any

func out(v any) entry               { return entry{"output": v} }
func fail(name, cause string) entry { return entry{"error": name, "cause": cause} }

var timeout = entry{"timeout": true}

func times(e entry, n int) []entry {
	s := make([]entry, n)
	for i := range s {
		s[i] = e
	}
	return s
}

const deadline = 4_102_444_800 // 2100-01-01, far away

func testInput() workflow.ExecutionInput {
	return workflow.ExecutionInput{
		OperationID: "op-1",
		Tenant:      "acct-1",
		Config: workflow.RunConfig{
			ApprovalTimeoutSeconds: 60, PollInitialSeconds: 1, PollMaxSeconds: 2,
			DeadlineSeconds: 60, LoopBudget: 5,
		},
		StateMachineARN: "arn:aws:states:us-east-1:123456789012:stateMachine:MediaBuy",
	}
}

func wait(round int) workflow.WaitState {
	return workflow.WaitState{IntervalSeconds: 1, Round: round, DeadlineUnix: deadline}
}

func seller(status workflow.Status, round int) workflow.SellerOutput {
	return workflow.SellerOutput{Status: status, Terminal: status.Terminal(), Next: wait(round)}
}

func gov(d workflow.GovernanceDecision) workflow.GovernanceOutput {
	g := workflow.GovernanceOutput{Decision: d, CheckID: "chk-1"}
	if d == workflow.GovernancePending {
		g.Wait = wait(1)
	}
	return g
}

var (
	proceed       = out(gov(workflow.GovernanceProceed))
	submitted     = out(seller(workflow.StatusSubmitted, 0))
	completed     = out(seller(workflow.StatusCompleted, 0))
	reportClean   = out(workflow.OutcomeOutput{})
	recorded      = out(map[string]any{})
	approved      = out(workflow.ApprovalOutput{Decision: "approved", ApprovalID: "apr-1", DecidedBy: "u-2"})
	rejected      = fail("ApprovalRejectedError", `{"approval_id":"apr-1","by":"u-2"}`)
	okStates      = []string{"SellerTaskStatus", "ReportOutcome", "UndoRequired", "MediaBuyCompleted"}
	prelude       = []string{"IsContinuation", "CheckGovernance", "GovernanceDecision", "CreateMediaBuy"}
	failureStates = []string{"RecordFailure", "FailureKind"}
)

func seq(parts ...[]string) []string { return slices.Concat(parts...) }

type scenario struct {
	name    string
	input   *workflow.ExecutionInput
	results map[string][]entry

	status  string   // SUCCEEDED or FAILED
	error   string   // the Fail state's Error
	states  []string // exact sequence, when set
	visits  []string // states that must appear
	avoids  []string // states that must not appear
	calls   map[string]int
	retries map[string]int
	check   func(t *testing.T, s summary)
}

type summary struct {
	Status    string         `json:"status"`
	Error     string         `json:"error"`
	Cause     string         `json:"cause"`
	States    []string       `json:"states"`
	Calls     map[string]int `json:"calls"`
	Retries   map[string]int `json:"retries"`
	Payloads  []call         `json:"payloads"`
	Leaks     []string       `json:"leaks"`
	Exhausted []string       `json:"exhausted"`
	Unused    map[string]int `json:"unused"`
	Output    map[string]any `json:"output"`
}

type call struct {
	State    string          `json:"state"`
	Action   string          `json:"action"`
	Function string          `json:"function"`
	Payload  json.RawMessage `json:"payload"`
}

func (s summary) payloads(action string) []json.RawMessage {
	var out []json.RawMessage
	for _, c := range s.Payloads {
		if c.Action == action {
			out = append(out, c.Payload)
		}
	}
	return out
}

func scenarios() []scenario {
	continued := testInput()
	continued.Generation = 1
	w := wait(0)
	continued.Wait = &w
	continued.Seller = &workflow.Stage[workflow.SellerOutput]{Result: workflow.SellerOutput{Status: workflow.StatusWorking, Next: w}}

	return []scenario{
		{
			name: "happy path, synchronous create",
			results: map[string][]entry{
				"check": {proceed}, "create": {completed}, "park": {completed}, "report": {reportClean},
			},
			status: "SUCCEEDED",
			states: seq(prelude, []string{"SellerAvailable", "AwaitSeller"}, okStates),
			calls:  map[string]int{"check": 1, "create": 1, "park": 1, "report": 1},
			check: func(t *testing.T, s summary) {
				// park gets the create result, sees it is terminal, and completes its own token.
				var in workflow.CallbackInput
				mustDecode(t, s.payloads("park")[0], &in)
				if in.Seller == nil || !in.Seller.NeedsDecision() || in.Wait.IntervalSeconds != 1 {
					t.Fatalf("park input %+v: want the terminal seller result and its wait", in)
				}
			},
		},
		{
			name: "async create completed by webhook",
			results: map[string][]entry{
				"check": {proceed}, "create": {submitted}, "park": {completed}, "report": {reportClean},
			},
			status: "SUCCEEDED",
			states: seq(prelude, []string{"SellerAvailable", "AwaitSeller"}, okStates),
			calls:  map[string]int{"park": 1, "poll": 0},
		},
		{
			name: "completed by polling after AwaitSeller timeouts",
			results: map[string][]entry{
				"check":  {proceed},
				"create": {submitted},
				"park":   {timeout, timeout, completed},
				"poll":   {out(seller(workflow.StatusWorking, 1)), completed},
				"report": {reportClean},
			},
			status: "SUCCEEDED",
			states: seq(prelude, []string{"SellerAvailable", "AwaitSeller", "PollSeller", "AwaitSeller", "PollSeller", "AwaitSeller"}, okStates),
			calls:  map[string]int{"park": 3, "poll": 2},
			check: func(t *testing.T, s summary) {
				var p workflow.PollInput
				mustDecode(t, s.payloads("poll")[1], &p)
				if p.Wait.Round != 1 || p.Action != workflow.ActionPoll || p.Generation != 0 {
					t.Fatalf("second poll input %+v: want the wait state the first poll returned", p)
				}
			},
		},
		{
			name: "governance denied: nothing created",
			results: map[string][]entry{
				"check": {out(gov(workflow.GovernanceDenied))}, "fail": {recorded},
			},
			status: "FAILED", error: "GovernanceDenied",
			states: seq([]string{"IsContinuation", "CheckGovernance", "GovernanceDecision", "GovernanceDenied"}, failureStates, []string{"DeniedByGovernance"}),
			calls:  map[string]int{"create": 0, "fail": 1},
			check: func(t *testing.T, s summary) {
				var in workflow.OutcomeInput
				mustDecode(t, s.payloads("fail")[0], &in)
				if in.Failure == nil || in.Failure.Error != workflow.FailureGovernanceDenied || in.Action != workflow.ActionFail {
					t.Fatalf("fail input %+v", in)
				}
				if !strings.Contains(s.Cause, "denied") {
					t.Fatalf("cause %q is not readable", s.Cause)
				}
			},
		},
		{
			name: "governance async review: pending, pending, proceed",
			results: map[string][]entry{
				"check":  {out(gov(workflow.GovernancePending)), out(gov(workflow.GovernancePending)), proceed},
				"create": {completed}, "park": {completed}, "report": {reportClean},
			},
			status: "SUCCEEDED",
			states: seq([]string{"IsContinuation",
				"CheckGovernance", "GovernanceDecision", "WaitForGovernanceReview",
				"CheckGovernance", "GovernanceDecision", "WaitForGovernanceReview",
				"CheckGovernance", "GovernanceDecision", "CreateMediaBuy", "SellerAvailable", "AwaitSeller"}, okStates),
			calls: map[string]int{"check": 3},
		},
		{
			name: "unknown governance decision fails closed",
			results: map[string][]entry{
				"check": {out(map[string]any{"decision": "maybe"})}, "fail": {recorded},
			},
			status: "FAILED", error: "MediaBuyFailed",
			visits: []string{"UnexpectedGovernanceDecision", "MediaBuyFailed"},
			calls:  map[string]int{"create": 0},
		},
		{
			name: "async governance review passes the deadline",
			results: map[string][]entry{
				"check": {out(gov(workflow.GovernancePending)), fail("DeadlineExceededError", `{"operation_id":"op-1"}`)},
				"fail":  {recorded},
			},
			status: "FAILED", error: "DeadlineExceeded",
			states: seq([]string{"IsContinuation", "CheckGovernance", "GovernanceDecision", "WaitForGovernanceReview", "CheckGovernance"},
				failureStates, []string{"DeadlinePassed"}),
			calls: map[string]int{"create": 0},
		},
		{
			name: "approval approved",
			results: map[string][]entry{
				"check": {out(gov(workflow.GovernanceNeedsApproval))}, "request": {approved},
				"create": {completed}, "park": {completed}, "report": {reportClean},
			},
			status: "SUCCEEDED",
			states: seq([]string{"IsContinuation", "CheckGovernance", "GovernanceDecision", "ApprovalForGovernance",
				"RequestApproval", "RouteApproval", "CreateMediaBuy", "SellerAvailable", "AwaitSeller"}, okStates),
			check: func(t *testing.T, s summary) {
				var in workflow.CallbackInput
				mustDecode(t, s.payloads("request")[0], &in)
				if in.Reason != string(workflow.ApprovalForGovernance) || in.TaskToken == "" || in.Config.ApprovalTimeoutSeconds != 60 {
					t.Fatalf("request input %+v", in)
				}
				if _, ok := s.Output["approval"]; !ok {
					t.Fatal("approval result not kept in the state")
				}
			},
		},
		{
			name: "approval request retried after a TransientError (a new token each time)",
			results: map[string][]entry{
				"check": {out(gov(workflow.GovernanceNeedsApproval))}, "request": {fail("TransientError", "slack 503"), approved},
				"create": {completed}, "park": {completed}, "report": {reportClean},
			},
			status:  "SUCCEEDED",
			retries: map[string]int{"RequestApproval": 1},
			calls:   map[string]int{"request": 2},
		},
		{
			name: "approval rejected before any spend",
			results: map[string][]entry{
				"check": {out(gov(workflow.GovernanceNeedsApproval))}, "request": {rejected}, "fail": {recorded},
			},
			status: "FAILED", error: "ApprovalRejected",
			states: seq([]string{"IsContinuation", "CheckGovernance", "GovernanceDecision", "ApprovalForGovernance",
				"RequestApproval", "CancelIfPlaced"}, failureStates, []string{"RejectedByApprover"}),
			calls: map[string]int{"create": 0, "cancel": 0, "fail": 1},
		},
		{
			name: "approval timed out and expired",
			results: map[string][]entry{
				"check": {out(gov(workflow.GovernanceNeedsApproval))}, "request": {timeout},
				"expire": {out(workflow.ApprovalExpiry{})}, "fail": {recorded},
			},
			status: "FAILED", error: "ApprovalExpired",
			states: seq([]string{"IsContinuation", "CheckGovernance", "GovernanceDecision", "ApprovalForGovernance",
				"RequestApproval", "ExpireApproval", "EscalateOrGiveUp", "CancelIfPlaced"}, failureStates, []string{"ApprovalExpired"}),
			calls: map[string]int{"create": 0, "expire": 1},
			check: func(t *testing.T, s summary) {
				var in workflow.StageInput
				mustDecode(t, s.payloads("expire")[0], &in)
				if in.Reason != string(workflow.ApprovalForGovernance) {
					t.Fatalf("expire input %+v", in)
				}
			},
		},
		{
			name: "approval timed out, escalated, then approved",
			results: map[string][]entry{
				"check": {out(gov(workflow.GovernanceNeedsApproval))}, "request": {timeout, approved},
				"expire": {out(workflow.ApprovalExpiry{Escalated: true})},
				"create": {completed}, "park": {completed}, "report": {reportClean},
			},
			status: "SUCCEEDED",
			visits: []string{"ExpireApproval", "EscalateOrGiveUp", "RouteApproval", "MediaBuyCompleted"},
			calls:  map[string]int{"request": 2, "expire": 1},
		},
		{
			name: "governance expired during the approval: re-check before spend",
			results: map[string][]entry{
				"check":   {out(gov(workflow.GovernanceNeedsApproval)), proceed},
				"request": {out(workflow.ApprovalOutput{Decision: "approved", ApprovalID: "apr-1", RecheckGovernance: true})},
				"create":  {completed}, "park": {completed}, "report": {reportClean},
			},
			status: "SUCCEEDED",
			states: seq([]string{"IsContinuation", "CheckGovernance", "GovernanceDecision", "ApprovalForGovernance",
				"RequestApproval", "RouteApproval", "CheckGovernance", "GovernanceDecision", "CreateMediaBuy", "SellerAvailable", "AwaitSeller"}, okStates),
			calls: map[string]int{"check": 2, "create": 1},
		},
		{
			name: "seller input required: approval, then back to waiting",
			results: map[string][]entry{
				"check":   {proceed},
				"create":  {submitted},
				"park":    {timeout, out(seller(workflow.StatusInputRequired, 1)), completed},
				"poll":    {out(seller(workflow.StatusInputRequired, 1)), out(seller(workflow.StatusWorking, 2))},
				"request": {approved},
				"report":  {reportClean},
			},
			status: "SUCCEEDED",
			states: seq(prelude, []string{"SellerAvailable", "AwaitSeller", "PollSeller", "AwaitSeller", "SellerTaskStatus",
				"ApprovalForSellerInput", "RequestApproval", "RouteApproval", "PollSeller", "AwaitSeller"}, okStates),
			check: func(t *testing.T, s summary) {
				var in workflow.CallbackInput
				mustDecode(t, s.payloads("request")[0], &in)
				if in.Reason != string(workflow.ApprovalForSellerInput) {
					t.Fatalf("request reason %q", in.Reason)
				}
			},
		},
		{
			name: "seller input required, approver rejects: the placed buy is canceled",
			results: map[string][]entry{
				"check":   {proceed},
				"create":  {out(seller(workflow.StatusInputRequired, 0))},
				"park":    {out(seller(workflow.StatusInputRequired, 0))},
				"request": {rejected},
				"cancel":  {out(seller(workflow.StatusCanceled, 0))},
				"fail":    {recorded},
			},
			status: "FAILED", error: "ApprovalRejected",
			states: seq(prelude, []string{"SellerAvailable", "AwaitSeller", "SellerTaskStatus", "ApprovalForSellerInput", "RequestApproval",
				"CancelIfPlaced", "Compensate", "AfterCompensation"}, failureStates, []string{"RejectedByApprover"}),
			calls: map[string]int{"cancel": 1, "fail": 1},
		},
		{
			name: "seller failed",
			results: map[string][]entry{
				"check": {proceed}, "create": {submitted}, "park": {timeout, out(seller(workflow.StatusFailed, 1))},
				"poll": {out(seller(workflow.StatusFailed, 1))}, "fail": {recorded},
			},
			status: "FAILED", error: "SellerDidNotComplete",
			states: seq(prelude, []string{"SellerAvailable", "AwaitSeller", "PollSeller", "AwaitSeller", "SellerTaskStatus", "SellerDidNotComplete"},
				failureStates, []string{"SellerTaskFailed"}),
			calls: map[string]int{"report": 0, "cancel": 0},
		},
		{
			name: "TransientError retried, then success",
			results: map[string][]entry{
				"check":  {fail("TransientError", "governance agent 503"), fail("TransientError", "timeout"), proceed},
				"create": {fail("TransientError", "seller 429"), completed},
				"park":   {completed}, "report": {reportClean},
			},
			status:  "SUCCEEDED",
			states:  seq(prelude, []string{"SellerAvailable", "AwaitSeller"}, okStates),
			calls:   map[string]int{"check": 3, "create": 2},
			retries: map[string]int{"CheckGovernance": 2, "CreateMediaBuy": 1},
		},
		{
			name: "Lambda service errors retried",
			results: map[string][]entry{
				"check":  {fail("Lambda.TooManyRequestsException", "rate"), fail("Lambda.ServiceException", "x"), proceed},
				"create": {fail("Lambda.SdkClientException", "reset"), fail("Lambda.AWSLambdaException", "x"), completed},
				"park":   {completed}, "report": {reportClean},
			},
			status:  "SUCCEEDED",
			retries: map[string]int{"CheckGovernance": 2, "CreateMediaBuy": 2},
		},
		{
			name: "TransientError exhausted: failure recorded",
			results: map[string][]entry{
				"check": {proceed}, "create": times(fail("TransientError", "seller unavailable"), 6), "fail": {recorded},
			},
			status: "FAILED", error: "MediaBuyFailed",
			states: seq(prelude, failureStates, []string{"MediaBuyFailed"}),
			calls:  map[string]int{"create": 6, "fail": 1},
			check: func(t *testing.T, s summary) {
				var in workflow.OutcomeInput
				mustDecode(t, s.payloads("fail")[0], &in)
				if in.Failure == nil || in.Failure.Error != "TransientError" || in.Failure.Cause != "seller unavailable" {
					t.Fatalf("fail input %+v", in)
				}
			},
		},
		{
			name: "TerminalError is not retried",
			results: map[string][]entry{
				"check": {proceed}, "create": {fail("TerminalError", `{"code":"INVALID_REQUEST"}`)}, "fail": {recorded},
			},
			status: "FAILED", error: "MediaBuyFailed",
			calls: map[string]int{"create": 1},
		},
		{
			name: "a crashed create is retried: the retry finds the buy",
			results: map[string][]entry{
				"check": {proceed}, "create": {fail("Runtime.ExitError", `{"errorType":"Runtime.ExitError","errorMessage":"signal: killed"}`), completed},
				"park": {completed}, "report": {reportClean},
			},
			status:  "SUCCEEDED",
			retries: map[string]int{"CreateMediaBuy": 1},
			calls:   map[string]int{"create": 2, "report": 1},
			avoids:  []string{"RecordFailure"},
		},
		{
			name: "a step fails but the ledger records the buy completed: it ends completed",
			results: map[string][]entry{
				"check": {proceed}, "create": {fail("TerminalError", "the answer was lost")},
				"fail": {out(workflow.OutcomeOutput{Status: workflow.StatusCompleted})},
			},
			status: "SUCCEEDED",
			states: seq(prelude, failureStates, []string{"UndoRequired", "MediaBuyCompleted"}),
			calls:  map[string]int{"create": 1, "fail": 1},
			avoids: []string{"ReportOutcome"},
		},
		{
			name: "completed after all, and governance's findings require an undo",
			results: map[string][]entry{
				"check": {proceed}, "create": {fail("TerminalError", "the answer was lost")},
				"fail":   {out(workflow.OutcomeOutput{Status: workflow.StatusCompleted, CompensationRequired: true, Reason: "critical finding"})},
				"cancel": {out(seller(workflow.StatusCanceled, 0))},
			},
			status: "FAILED", error: "CanceledAfterGovernanceFindings",
			states: seq(prelude, failureStates, []string{"UndoRequired", "Compensate", "AfterCompensation", "CanceledAfterGovernanceFindings"}),
			calls:  map[string]int{"cancel": 1, "fail": 1},
		},
		{
			name: "recording the failure fails too",
			results: map[string][]entry{
				"check": {fail("TerminalError", "misconfigured")}, "fail": times(fail("TransientError", "ledger throttled"), 6),
			},
			status: "FAILED", error: "FailureNotRecorded",
			states: []string{"IsContinuation", "CheckGovernance", "RecordFailure", "FailureNotRecorded"},
			calls:  map[string]int{"fail": 6},
		},
		{
			name: "deadline exceeded while waiting",
			results: map[string][]entry{
				"check": {proceed}, "create": {submitted},
				"park":   {timeout, out(workflow.SellerOutput{Status: workflow.StatusWorking, DeadlineExceeded: true, Next: wait(1)})},
				"poll":   {out(workflow.SellerOutput{Status: workflow.StatusWorking, DeadlineExceeded: true, Next: wait(1)})},
				"cancel": {out(seller(workflow.StatusCanceled, 1))},
				"fail":   {recorded},
			},
			status: "FAILED", error: "DeadlineExceeded",
			states: seq(prelude, []string{"SellerAvailable", "AwaitSeller", "PollSeller", "AwaitSeller", "SellerTaskStatus", "SellerDeadlineExceeded",
				"CancelAfterDeadline"}, failureStates, []string{"DeadlinePassed"}),
			calls: map[string]int{"create": 1, "poll": 1, "park": 2, "cancel": 1, "fail": 1, "report": 0},
			check: func(t *testing.T, s summary) {
				// The cancel says why (the seller and the ledger get the deadline as the reason),
				// and the failure recorded after it is still the deadline.
				var c workflow.StageInput
				mustDecode(t, s.payloads("cancel")[0], &c)
				if c.Action != workflow.ActionCancel || !strings.Contains(c.Reason, "deadline") {
					t.Fatalf("cancel input %+v: want the deadline as the reason", c)
				}
				var in workflow.OutcomeInput
				mustDecode(t, s.payloads("fail")[0], &in)
				if in.Failure == nil || in.Failure.Error != "DeadlineExceededError" || strings.Contains(in.Failure.Cause, "cancel") {
					t.Fatalf("fail input %+v: want the deadline", in)
				}
				if !strings.Contains(s.Cause, "canceled") {
					t.Fatalf("cause %q does not say the buy was canceled", s.Cause)
				}
			},
		},
		{
			name: "deadline exceeded, the cancel fails: the deadline is still recorded",
			results: map[string][]entry{
				"check": {proceed}, "create": {submitted},
				"park":   {out(workflow.SellerOutput{Status: workflow.StatusWorking, DeadlineExceeded: true, Next: wait(0)})},
				"cancel": {fail("TransientError", "seller 503"), fail("TerminalError", `{"code":"NOT_CANCELLABLE"}`)},
				"fail":   {recorded},
			},
			status: "FAILED", error: "DeadlineExceeded",
			states: seq(prelude, []string{"SellerAvailable", "AwaitSeller", "SellerTaskStatus", "SellerDeadlineExceeded", "CancelAfterDeadline",
				"DeadlineCancelFailed"}, failureStates, []string{"DeadlinePassed"}),
			calls:   map[string]int{"cancel": 2, "fail": 1, "report": 0},
			retries: map[string]int{"CancelAfterDeadline": 1},
			check: func(t *testing.T, s summary) {
				var in workflow.OutcomeInput
				mustDecode(t, s.payloads("fail")[0], &in)
				if in.Failure == nil || in.Failure.Error != "DeadlineExceededError" || !strings.Contains(in.Failure.Cause, "canceling it at the seller failed") {
					t.Fatalf("fail input %+v: want the deadline, with the failed cancel in the cause", in)
				}
			},
		},
		{
			name: "loop budget spent: continue as new under the computed name",
			results: map[string][]entry{
				"check": {proceed}, "create": {submitted},
				"park": {timeout, out(workflow.SellerOutput{Status: workflow.StatusWorking, ContinueAsNew: true,
					NextExecutionName: "op-1-g1", NextGeneration: 1, Next: wait(0)})},
				"poll": {out(workflow.SellerOutput{Status: workflow.StatusWorking, ContinueAsNew: true,
					NextExecutionName: "op-1-g1", NextGeneration: 1, Next: wait(0)})},
			},
			status: "SUCCEEDED",
			states: seq(prelude, []string{"SellerAvailable", "AwaitSeller", "PollSeller", "AwaitSeller", "SellerTaskStatus",
				"ContinueAsNewExecution", "HandedOverToNextExecution"}),
			calls: map[string]int{"startExecution": 1, "report": 0},
			check: func(t *testing.T, s summary) {
				var p struct {
					StateMachineArn string                  `json:"StateMachineArn"`
					Name            string                  `json:"Name"`
					Input           workflow.ExecutionInput `json:"Input"`
				}
				mustDecode(t, s.payloads("startExecution")[0], &p)
				in := testInput()
				if p.Name != workflow.ExecutionName("op-1", 1) || p.StateMachineArn != in.StateMachineARN {
					t.Fatalf("startExecution name %q arn %q", p.Name, p.StateMachineArn)
				}
				if p.Input.Generation != 1 || p.Input.Wait == nil || p.Input.OperationID != "op-1" ||
					p.Input.Tenant != "acct-1" || p.Input.Config != in.Config || p.Input.StateMachineARN != in.StateMachineARN {
					t.Fatalf("continuation input %+v", p.Input)
				}
				if sel := p.Input.Seller; sel == nil || sel.Result.NeedsDecision() || sel.Result.Next != *p.Input.Wait || sel.Result.Status != workflow.StatusWorking {
					t.Fatalf("continuation seller %+v: want the wait state with the loop flags cleared", sel)
				}
			},
		},
		{
			name:  "a continuation resumes the wait loop without governance",
			input: &continued,
			results: map[string][]entry{
				"park": {completed}, "report": {reportClean},
			},
			status: "SUCCEEDED",
			states: seq([]string{"IsContinuation", "AwaitSeller"}, okStates),
			calls:  map[string]int{"check": 0, "create": 0},
			check: func(t *testing.T, s summary) {
				var in workflow.CallbackInput
				mustDecode(t, s.payloads("park")[0], &in)
				if in.Wait != wait(0) || in.Seller == nil || in.Seller.NeedsDecision() {
					t.Fatalf("park input %+v: want the inherited wait state", in)
				}
			},
		},
		{
			name: "governance findings require an undo: compensate",
			results: map[string][]entry{
				"check": {proceed}, "create": {completed}, "park": {completed},
				"report": {out(workflow.OutcomeOutput{CompensationRequired: true, Reason: "finding F-1"})},
				"cancel": {out(seller(workflow.StatusCanceled, 0))},
			},
			status: "FAILED", error: "CanceledAfterGovernanceFindings",
			states: seq(prelude, []string{"SellerAvailable", "AwaitSeller", "SellerTaskStatus", "ReportOutcome", "UndoRequired", "Compensate",
				"AfterCompensation", "CanceledAfterGovernanceFindings"}),
			calls: map[string]int{"cancel": 1, "fail": 0},
		},
		{
			name: "compensation fails: recorded",
			results: map[string][]entry{
				"check": {proceed}, "create": {completed}, "park": {completed},
				"report": {out(workflow.OutcomeOutput{CompensationRequired: true})},
				"cancel": {fail("TerminalError", "seller refuses cancel")}, "fail": {recorded},
			},
			status: "FAILED", error: "MediaBuyFailed",
			visits: []string{"Compensate", "RecordFailure", "MediaBuyFailed"},
		},
		{
			name: "park itself fails: recorded",
			results: map[string][]entry{
				"check": {proceed}, "create": {submitted}, "park": {fail("NotFoundError", "operation gone")}, "fail": {recorded},
			},
			status: "FAILED", error: "MediaBuyFailed",
			states: seq(prelude, []string{"SellerAvailable", "AwaitSeller"}, failureStates, []string{"MediaBuyFailed"}),
		},
	}
}

func TestPaths(t *testing.T) {
	if os.Getenv("BUYFLOW_NODE_TESTS") != "1" {
		t.Skip("path tests run the ASL in Node (aws-local-stepfunctions); set BUYFLOW_NODE_TESTS=1 (make test does)")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("BUYFLOW_NODE_TESTS=1 but node is not on PATH: %v", err)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "node_modules", "aws-local-stepfunctions")); err != nil {
		t.Fatalf("aws-local-stepfunctions is not installed (npm ci at the repository root): %v", err)
	}
	table := scenarios()
	got := runAll(t, node, root, table)
	for i, sc := range table {
		t.Run(sc.name, func(t *testing.T) { assertPath(t, sc, got[i]) })
	}
}

// runAll runs every scenario in one Node process (starting the emulator costs seconds) and
// returns the summaries in order.
func runAll(t *testing.T, node, root string, table []scenario) []summary {
	t.Helper()
	dir := t.TempDir()
	if d := os.Getenv("BUYFLOW_SCENARIO_DIR"); d != "" {
		dir = d
	}
	args := []string{"-r", "./statemachine/harness/polyfill.cjs", "statemachine/harness/run.mjs"}
	for i, sc := range table {
		in := testInput()
		if sc.input != nil {
			in = *sc.input
		}
		b, err := json.Marshal(map[string]any{"input": in, "results": sc.results})
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(dir, fmt.Sprintf("scenario-%02d.json", i))
		if err := os.WriteFile(file, b, 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, file)
	}
	cmd := exec.Command(node, args...)
	cmd.Dir = root
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("harness: %v\n%s", err, stderr.String())
	}
	var out []summary
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil || len(out) != len(table) {
		t.Fatalf("harness output (%d summaries for %d scenarios): %v\n%s", len(out), len(table), err, stdout.String())
	}
	return out
}

func assertPath(t *testing.T, sc scenario, s summary) {
	t.Helper()
	if s.Status != sc.status || s.Error != sc.error {
		t.Fatalf("status %s error %q (cause %q), want %s %q\nstates %v", s.Status, s.Error, s.Cause, sc.status, sc.error, s.States)
	}
	if sc.states != nil && !slices.Equal(s.States, sc.states) {
		t.Errorf("states\n got %v\nwant %v", s.States, sc.states)
	}
	for _, v := range sc.visits {
		if !slices.Contains(s.States, v) {
			t.Errorf("state %s not visited: %v", v, s.States)
		}
	}
	for _, v := range sc.avoids {
		if slices.Contains(s.States, v) {
			t.Errorf("state %s visited: %v", v, s.States)
		}
	}
	for action, n := range sc.calls {
		if s.Calls[action] != n {
			t.Errorf("%s called %d times, want %d", action, s.Calls[action], n)
		}
	}
	for st, n := range sc.retries {
		if s.Retries[st] != n {
			t.Errorf("%s retried %d times, want %d", st, s.Retries[st], n)
		}
	}
	if len(s.Leaks) > 0 {
		t.Errorf("task token leaks: %v", s.Leaks)
	}
	if len(s.Exhausted) > 0 {
		t.Errorf("scenario ran out of results at %v (states %v)", s.Exhausted, s.States)
	}
	if len(s.Unused) > 0 {
		t.Errorf("scenario results never used: %v (states %v)", s.Unused, s.States)
	}
	for _, p := range s.Payloads {
		if p.Action == "startExecution" {
			continue
		}
		var head struct {
			Action      workflow.Action `json:"action"`
			OperationID string          `json:"operation_id"`
			Tenant      string          `json:"tenant"`
		}
		mustDecode(t, p.Payload, &head)
		if !slices.Contains(workflow.Actions, head.Action) || head.OperationID == "" || head.Tenant == "" {
			t.Errorf("%s payload lacks action/operation/tenant: %s", p.State, p.Payload)
		}
	}
	if sc.check != nil {
		sc.check(t, s)
	}
}

func mustDecode(t *testing.T, raw json.RawMessage, v any) {
	t.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
}
