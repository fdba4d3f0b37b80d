package statemachine

import (
	"encoding/json"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/buyflow/buyflow/internal/workflow"
)

// The contract tests read mediabuy.asl.json as data and check it against the rules in
// docs/ARCHITECTURE.md ("The workflow"), what kumo and aws-local-stepfunctions can run, and the
// Go payload types in internal/workflow, so that the ASL and the Lambdas cannot drift apart.

const (
	lambdaInvoke    = "arn:aws:states:::lambda:invoke"
	waitForToken    = ".waitForTaskToken"
	startExecution  = "arn:aws:states:::states:startExecution"
	statesAll       = "States.ALL"
	transientError  = "TransientError"
	jitterFull      = "FULL"
	maxRetryAttempt = 10
)

// lambdaServiceErrors are the Lambda service errors every Lambda task must retry, and the
// error of a sandbox whose runtime died mid-invocation (Runtime.ExitError): every stage is
// safe to run again, and a crash after a seller committed a buy must reach the stage's
// reconciliation (a retried create finds the buy) rather than fail the execution.
var lambdaServiceErrors = []string{
	"Lambda.ServiceException",
	"Lambda.AWSLambdaException",
	"Lambda.SdkClientException",
	"Lambda.TooManyRequestsException",
	"Runtime.ExitError",
}

type machine struct {
	Comment string           `json:"Comment"`
	StartAt string           `json:"StartAt"`
	States  map[string]state `json:"States"`
	raw     map[string]map[string]any
}

type state struct {
	Type               string          `json:"Type"`
	Resource           string          `json:"Resource"`
	Parameters         map[string]any  `json:"Parameters"`
	ResultSelector     map[string]any  `json:"ResultSelector"`
	ResultPath         json.RawMessage `json:"ResultPath"`
	InputPath          json.RawMessage `json:"InputPath"`
	OutputPath         json.RawMessage `json:"OutputPath"`
	Result             any             `json:"Result"`
	Next               string          `json:"Next"`
	End                bool            `json:"End"`
	Default            string          `json:"Default"`
	Choices            []choice        `json:"Choices"`
	Retry              []retrier       `json:"Retry"`
	Catch              []catcher       `json:"Catch"`
	TimeoutSeconds     *int            `json:"TimeoutSeconds"`
	TimeoutSecondsPath string          `json:"TimeoutSecondsPath"`
	SecondsPath        string          `json:"SecondsPath"`
	Seconds            *int            `json:"Seconds"`
	Error              string          `json:"Error"`
	Cause              string          `json:"Cause"`
}

type choice struct {
	Next string `json:"Next"`
}

type retrier struct {
	ErrorEquals     []string `json:"ErrorEquals"`
	IntervalSeconds *int     `json:"IntervalSeconds"`
	MaxAttempts     *int     `json:"MaxAttempts"`
	BackoffRate     *float64 `json:"BackoffRate"`
	MaxDelaySeconds *int     `json:"MaxDelaySeconds"`
	JitterStrategy  string   `json:"JitterStrategy"`
}

type catcher struct {
	ErrorEquals []string        `json:"ErrorEquals"`
	Next        string          `json:"Next"`
	ResultPath  json.RawMessage `json:"ResultPath"`
}

func load(t testing.TB) machine {
	t.Helper()
	var m machine
	if err := json.Unmarshal([]byte(Definition), &m); err != nil {
		t.Fatalf("ASL does not parse: %v", err)
	}
	var raw struct {
		States map[string]map[string]any `json:"States"`
	}
	if err := json.Unmarshal([]byte(Definition), &raw); err != nil {
		t.Fatalf("ASL does not parse: %v", err)
	}
	m.raw = raw.States
	if m.StartAt == "" || len(m.States) == 0 {
		t.Fatal("ASL has no StartAt or no States")
	}
	return m
}

func (m machine) names() []string {
	names := make([]string, 0, len(m.States))
	for n := range m.States {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// successors returns every state a state may move to, with Catch targets.
func (s state) successors() []string {
	var out []string
	if s.Next != "" {
		out = append(out, s.Next)
	}
	if s.Default != "" {
		out = append(out, s.Default)
	}
	for _, c := range s.Choices {
		out = append(out, c.Next)
	}
	for _, c := range s.Catch {
		out = append(out, c.Next)
	}
	return out
}

func (s state) isLambda() bool   { return strings.HasPrefix(s.Resource, lambdaInvoke) }
func (s state) isCallback() bool { return strings.HasSuffix(s.Resource, waitForToken) }
func (s state) terminal() bool   { return s.Type == "Succeed" || s.Type == "Fail" || s.End }

func TestDefinitionParsesAndStatesAreKnownTypes(t *testing.T) {
	m := load(t)
	if _, ok := m.States[m.StartAt]; !ok {
		t.Fatalf("StartAt %q is not a state", m.StartAt)
	}
	allowed := []string{"Task", "Choice", "Pass", "Wait", "Succeed", "Fail"}
	nameRE := regexp.MustCompile(`^[A-Z][A-Za-z]+$`)
	for _, n := range m.names() {
		s := m.States[n]
		if !slices.Contains(allowed, s.Type) {
			t.Errorf("%s: type %q (Map/Parallel are not used; kumo and the harness cover the others)", n, s.Type)
		}
		if !nameRE.MatchString(n) {
			t.Errorf("state name %q does not read as a console name (UpperCamelCase letters only)", n)
		}
		if s.Type == "Fail" && (s.Error == "" || len(s.Cause) < 20) {
			t.Errorf("%s: a Fail state needs an Error and a readable Cause", n)
		}
	}
}

func TestEveryTaskHasAComment(t *testing.T) {
	m := load(t)
	for _, n := range m.names() {
		if m.States[n].Type != "Task" {
			continue
		}
		if c, _ := m.raw[n]["Comment"].(string); len(c) < 20 {
			t.Errorf("%s: Comment missing or too short", n)
		}
	}
}

func TestTransitionsResolve(t *testing.T) {
	m := load(t)
	for _, n := range m.names() {
		s := m.States[n]
		for _, next := range s.successors() {
			if _, ok := m.States[next]; !ok {
				t.Errorf("%s -> %q: no such state", n, next)
			}
		}
		switch {
		case s.Type == "Choice":
			if len(s.Choices) == 0 || s.Default == "" {
				t.Errorf("%s: a Choice needs rules and a Default (a missing match must not fail as States.NoChoiceMatched)", n)
			}
		case s.terminal():
			if s.Next != "" {
				t.Errorf("%s: terminal state with Next", n)
			}
		default:
			if s.Next == "" {
				t.Errorf("%s: non-terminal %s state without Next", n, s.Type)
			}
		}
	}
}

func TestEveryStateIsReachable(t *testing.T) {
	m := load(t)
	seen := map[string]bool{}
	queue := []string{m.StartAt}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		if seen[n] {
			continue
		}
		seen[n] = true
		queue = append(queue, m.States[n].successors()...)
	}
	for _, n := range m.names() {
		if !seen[n] {
			t.Errorf("%s is unreachable from %s", n, m.StartAt)
		}
	}
}

// Every state must be able to reach a Succeed or Fail state; together with the resolved
// transitions this means every path ends in one (or loops through a wait that has a deadline).
func TestEveryStateCanEnd(t *testing.T) {
	m := load(t)
	ends := map[string]bool{}
	for changed := true; changed; {
		changed = false
		for _, n := range m.names() {
			if ends[n] {
				continue
			}
			s := m.States[n]
			if s.terminal() {
				ends[n] = true
				changed = true
				continue
			}
			for _, next := range s.successors() {
				if ends[next] {
					ends[n] = true
					changed = true
					break
				}
			}
		}
	}
	for _, n := range m.names() {
		if !ends[n] {
			t.Errorf("%s can never reach a Succeed or Fail state", n)
		}
		if m.States[n].End {
			t.Errorf("%s uses End: true; end in a named Succeed or Fail state instead", n)
		}
	}
}

func TestPlaceholders(t *testing.T) {
	if got := Used(Definition); !slices.Equal(got, Placeholders) {
		t.Fatalf("placeholders used %v, declared %v", got, Placeholders)
	}
	if !slices.IsSorted(Placeholders) {
		t.Fatal("Placeholders not sorted")
	}
	subs := map[string]string{}
	for _, p := range Placeholders {
		subs[p] = "arn:aws:lambda:us-east-1:123456789012:function:" + p
	}
	out, err := Render(subs)
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	if strings.Contains(out, "${") {
		t.Fatal("rendered definition still has a ${")
	}
	if !json.Valid([]byte(out)) {
		t.Fatal("rendered definition is not JSON")
	}

	bad := []struct {
		name string
		subs func(map[string]string)
		want string
	}{
		{"missing", func(m map[string]string) { delete(m, NotifyFunctionARN) }, "missing NotifyFunctionArn"},
		{"extra", func(m map[string]string) { m["StateMachineArn"] = "x" }, "unknown StateMachineArn"},
		{"empty", func(m map[string]string) { m[PollFunctionARN] = "" }, "empty PollFunctionArn"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			s := map[string]string{}
			for k, v := range subs {
				s[k] = v
			}
			tt.subs(s)
			if _, err := Render(s); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Render error = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestLambdaTasksRetryServiceAndTransientErrors(t *testing.T) {
	m := load(t)
	lambdas := 0
	for _, n := range m.names() {
		s := m.States[n]
		if s.Type != "Task" {
			continue
		}
		if !s.isLambda() && !strings.HasPrefix(s.Resource, startExecution) {
			t.Errorf("%s: unexpected resource %q", n, s.Resource)
			continue
		}
		if len(s.Retry) == 0 {
			t.Errorf("%s: no Retry", n)
		}
		for i, r := range s.Retry {
			if r.JitterStrategy != jitterFull {
				t.Errorf("%s Retry[%d]: JitterStrategy %q, want FULL", n, i, r.JitterStrategy)
			}
			if r.MaxDelaySeconds == nil || *r.MaxDelaySeconds <= 0 {
				t.Errorf("%s Retry[%d]: no MaxDelaySeconds", n, i)
			}
			if r.BackoffRate == nil || *r.BackoffRate < 1.5 {
				t.Errorf("%s Retry[%d]: BackoffRate missing or below 1.5", n, i)
			}
			if r.MaxAttempts == nil || *r.MaxAttempts < 1 || *r.MaxAttempts > maxRetryAttempt {
				t.Errorf("%s Retry[%d]: MaxAttempts must be set and bounded (1..%d)", n, i, maxRetryAttempt)
			}
		}
		if len(s.Catch) == 0 || !slices.Equal(s.Catch[len(s.Catch)-1].ErrorEquals, []string{statesAll}) {
			t.Errorf("%s: the last Catch must be States.ALL so every failure is recorded", n)
		}
		if !s.isLambda() {
			continue
		}
		lambdas++
		for _, want := range append(slices.Clone(lambdaServiceErrors), transientError) {
			if !retries(s, want) {
				t.Errorf("%s: does not retry %s", n, want)
			}
		}
	}
	if lambdas < 8 {
		t.Fatalf("found %d Lambda tasks, expected at least 8", lambdas)
	}
}

func retries(s state, name string) bool {
	for _, r := range s.Retry {
		if slices.Contains(r.ErrorEquals, name) {
			return true
		}
	}
	return false
}

func TestErrorNamesAreKnown(t *testing.T) {
	m := load(t)
	check := func(where string, names []string, last bool) {
		if len(names) == 0 {
			t.Errorf("%s: empty ErrorEquals", where)
		}
		for _, e := range names {
			switch {
			case slices.Contains(workflow.ErrorNames, e):
			case strings.HasPrefix(e, "States.") || strings.HasPrefix(e, "Lambda.") || e == "Runtime.ExitError":
			default:
				t.Errorf("%s: ErrorEquals %q is neither a workflow.ErrorNames type nor a States.*/Lambda.*/Runtime.ExitError name", where, e)
			}
			if e == statesAll && (!last || len(names) != 1) {
				t.Errorf("%s: States.ALL must be alone and in the last Retry/Catch entry", where)
			}
		}
	}
	for _, n := range m.names() {
		s := m.States[n]
		for i, r := range s.Retry {
			check(n+" Retry", r.ErrorEquals, i == len(s.Retry)-1)
		}
		for i, c := range s.Catch {
			check(n+" Catch", c.ErrorEquals, i == len(s.Catch)-1)
		}
	}
}

func TestCallbackTasksHaveATimeoutAndTheToken(t *testing.T) {
	m := load(t)
	callbacks := 0
	for _, n := range m.names() {
		s := m.States[n]
		if !s.isCallback() {
			continue
		}
		callbacks++
		if s.TimeoutSeconds == nil && s.TimeoutSecondsPath == "" {
			t.Errorf("%s: waitForTaskToken without TimeoutSeconds or TimeoutSecondsPath", n)
		}
		payload, _ := s.Parameters["Payload"].(map[string]any)
		if payload["task_token.$"] != "$$.Task.Token" {
			t.Errorf("%s: Payload must pass task_token.$ = $$.Task.Token", n)
		}
		timeoutCaught := false
		for _, c := range s.Catch {
			timeoutCaught = timeoutCaught || slices.Contains(c.ErrorEquals, "States.Timeout")
		}
		if !timeoutCaught {
			t.Errorf("%s: States.Timeout is not caught on its own", n)
		}
	}
	if callbacks != 4 {
		t.Fatalf("found %d waitForTaskToken states, want 4 (RequestApproval, AwaitSeller, RequestChangeApproval, AwaitChangeSeller)", callbacks)
	}
}

// The states kumo must run may not use what kumo lacks: intrinsic functions,
// $$.Execution (or any context field but $$.Task.Token), JSONata and Assign.
func TestNothingKumoCannotRun(t *testing.T) {
	if strings.Contains(Definition, "$$.Execution") {
		t.Error("definition uses $$.Execution")
	}
	if strings.Contains(Definition, "{%") {
		t.Error("definition contains a JSONata expression")
	}
	intrinsic := regexp.MustCompile(`States\.[A-Za-z]+\(`)
	if m := intrinsic.FindString(Definition); m != "" {
		t.Errorf("definition uses the intrinsic function %s", m)
	}
	ctx := regexp.MustCompile(`\$\$\.[A-Za-z.]+`)
	for _, m := range ctx.FindAllString(Definition, -1) {
		if m != "$$.Task.Token" {
			t.Errorf("definition uses context field %s; kumo only has $$.Task.Token", m)
		}
	}
	var top map[string]any
	if err := json.Unmarshal([]byte(Definition), &top); err != nil {
		t.Fatal(err)
	}
	if _, ok := top["QueryLanguage"]; ok {
		t.Error("top-level QueryLanguage set: JSONPath is the default and the only one allowed")
	}
	m := load(t)
	for _, n := range m.names() {
		// kumo 0.33.1 merges a Pass state's ResultPath into its Parameters output instead of
		// into the state input, dropping the rest of the state: Pass states use Result only.
		if _, ok := m.raw[n]["Parameters"]; ok && m.States[n].Type == "Pass" {
			t.Errorf("%s: a Pass state with Parameters loses the state in kumo; use Result", n)
		}
		for _, k := range []string{"Assign", "QueryLanguage", "Arguments", "Output", "Items", "ErrorPath", "CausePath"} {
			if _, ok := m.raw[n][k]; ok {
				t.Errorf("%s: uses %s, which kumo does not run", n, k)
			}
		}
	}
}

// No task token may reach state input or output: only the Payload of the callback task itself
// carries it (execution history is readable by finance).
func TestTaskTokenStaysInCallbackPayloads(t *testing.T) {
	m := load(t)
	for _, n := range m.names() {
		s := m.States[n]
		for k, v := range m.raw[n] {
			if k == "Resource" || k == "Comment" {
				continue // names the integration pattern / describes it
			}
			if k == "Parameters" && s.isCallback() {
				params := map[string]any{}
				for pk, pv := range s.Parameters {
					if pk != "Payload" {
						params[pk] = pv
					}
				}
				if mentionsToken(params) {
					t.Errorf("%s: token outside the callback Payload", n)
				}
				continue
			}
			if mentionsToken(v) {
				t.Errorf("%s.%s mentions a task token", n, k)
			}
		}
	}
}

func mentionsToken(v any) bool {
	b, _ := json.Marshal(v) // values decoded from JSON always encode
	s := strings.ToLower(string(b))
	return strings.Contains(s, "task_token") || strings.Contains(s, "task.token") || strings.Contains(s, "tasktoken")
}

// actionPayload maps (function placeholder, action) to the Go type its Lambda decodes.
var actionPayload = map[string]map[workflow.Action]reflect.Type{
	GovernanceFunctionARN: {
		workflow.ActionCheck:  reflect.TypeFor[workflow.StageInput](),
		workflow.ActionReport: reflect.TypeFor[workflow.OutcomeInput](),
		workflow.ActionFail:   reflect.TypeFor[workflow.OutcomeInput](),
	},
	NotifyFunctionARN: {
		workflow.ActionRequest: reflect.TypeFor[workflow.CallbackInput](),
		workflow.ActionExpire:  reflect.TypeFor[workflow.StageInput](),
	},
	CreateFunctionARN: {
		workflow.ActionCreate: reflect.TypeFor[workflow.StageInput](),
		workflow.ActionCancel: reflect.TypeFor[workflow.StageInput](),
	},
	PollFunctionARN: {
		workflow.ActionPark: reflect.TypeFor[workflow.CallbackInput](),
		workflow.ActionPoll: reflect.TypeFor[workflow.PollInput](),
	},
	ModifyFunctionARN: {
		workflow.ActionCheckChange: reflect.TypeFor[workflow.StageInput](),
		workflow.ActionUpdate:      reflect.TypeFor[workflow.StageInput](),
		workflow.ActionApply:       reflect.TypeFor[workflow.StageInput](),
		workflow.ActionFailChange:  reflect.TypeFor[workflow.OutcomeInput](),
	},
}

// document is the state the ASL carries from state to state: the execution input plus what each
// stage adds at its ResultPath. Every JSONPath the ASL reads must resolve in it.
type document struct {
	workflow.ExecutionInput
	Change             workflow.ChangeRef                        `json:"change"`
	CampaignLeg        workflow.LegStart                         `json:"campaign_leg"`
	Governance         workflow.Stage[workflow.GovernanceOutput] `json:"governance"`
	ApprovalRequest    workflow.ApprovalRequest                  `json:"approval_request"`
	Approval           workflow.Stage[workflow.ApprovalOutput]   `json:"approval"`
	Expiry             workflow.Stage[workflow.ApprovalExpiry]   `json:"expiry"`
	Seller             workflow.Stage[workflow.SellerOutput]     `json:"seller"`
	Outcome            workflow.Stage[workflow.OutcomeOutput]    `json:"outcome"`
	Compensation       workflow.Stage[workflow.SellerOutput]     `json:"compensation"`
	ChangeOutcome      workflow.Stage[workflow.ChangeOutcome]    `json:"change_outcome"`
	Failure            workflow.StepError                        `json:"failure"`
	CancelError        workflow.StepError                        `json:"cancel_error"`
	WaitTimeout        workflow.StepError                        `json:"wait_timeout"`
	RecordFailureError workflow.StepError                        `json:"record_failure_error"`
}

func TestPayloadsMatchTheGoTypes(t *testing.T) {
	m := load(t)
	seen := map[workflow.Action]bool{}
	for _, n := range m.names() {
		s := m.States[n]
		if !s.isLambda() {
			continue
		}
		fn, _ := s.Parameters["FunctionName"].(string)
		fn = strings.TrimSuffix(strings.TrimPrefix(fn, "${"), "}")
		actions, ok := actionPayload[fn]
		if !ok {
			t.Errorf("%s: FunctionName %q is not a known placeholder", n, fn)
			continue
		}
		payload, ok := s.Parameters["Payload"].(map[string]any)
		if !ok {
			t.Errorf("%s: no Payload object", n)
			continue
		}
		action, _ := payload["action"].(string)
		typ, ok := actions[workflow.Action(action)]
		if !ok {
			t.Errorf("%s: action %q is not one of %s's actions", n, action, fn)
			continue
		}
		seen[workflow.Action(action)] = true
		if s.isCallback() != (typ == reflect.TypeFor[workflow.CallbackInput]()) {
			t.Errorf("%s: callback task and CallbackInput must go together", n)
		}
		tags := jsonFields(typ)
		for k := range payload {
			name := strings.TrimSuffix(k, ".$")
			if _, ok := tags[name]; !ok {
				t.Errorf("%s: Payload field %q is not a json field of %s", n, name, typ)
			}
		}
		for _, req := range []string{"action", "operation_id.$", "tenant.$"} {
			if _, ok := payload[req]; !ok {
				t.Errorf("%s: Payload lacks %s", n, req)
			}
		}
		if string(s.ResultPath) == "null" {
			continue // the result is discarded (RecordFailure)
		}
		if rs := s.ResultSelector; len(rs) != 1 || (rs["result.$"] != "$.Payload" && rs["result.$"] != "$") {
			t.Errorf("%s: ResultSelector must be {\"result.$\": \"$.Payload\"} (callbacks: \"$\"), got %v", n, rs)
		}
		if s.isCallback() != (s.ResultSelector["result.$"] == "$") {
			t.Errorf("%s: a callback's output is the SendTaskSuccess output itself (\"$\"); an invoke's is \"$.Payload\"", n)
		}
	}
	for _, a := range workflow.Actions {
		if !seen[a] {
			t.Errorf("action %s is never sent", a)
		}
	}

	// The continuation's input is an ExecutionInput.
	for _, n := range m.names() {
		s := m.States[n]
		if !strings.HasPrefix(s.Resource, startExecution) {
			continue
		}
		if s.Resource != startExecution {
			t.Errorf("%s: continue-as-new must start the next execution and end, not wait for it (%s)", n, s.Resource)
		}
		if s.Parameters["StateMachineArn.$"] != "$.state_machine_arn" || s.Parameters["Name.$"] != "$.seller.result.next_execution_name" {
			t.Errorf("%s: StateMachineArn/Name must come from the input and the poll result: %v", n, s.Parameters)
		}
		in, _ := s.Parameters["Input"].(map[string]any)
		tags := jsonFields(reflect.TypeFor[workflow.ExecutionInput]())
		for k := range in {
			if _, ok := tags[strings.TrimSuffix(k, ".$")]; !ok {
				t.Errorf("%s: Input field %q is not a json field of ExecutionInput", n, k)
			}
		}
		for tag := range tags {
			_, path := in[tag+".$"]
			_, literal := in[tag]
			if !path && !literal {
				t.Errorf("%s: Input lacks ExecutionInput field %q", n, tag)
			}
		}
		sel, _ := in["seller"].(map[string]any)
		res, _ := sel["result"].(map[string]any)
		sellerTags := jsonFields(reflect.TypeFor[workflow.SellerOutput]())
		for k, v := range res {
			if _, ok := sellerTags[strings.TrimSuffix(k, ".$")]; !ok {
				t.Errorf("%s: Input.seller.result field %q is not a json field of SellerOutput", n, k)
			}
			if (k == "terminal" || k == "deadline_exceeded" || k == "continue_as_new") && v != false {
				t.Errorf("%s: the continuation must start with %s false, or it would loop at once", n, k)
			}
		}
		if len(res) == 0 {
			t.Errorf("%s: Input.seller.result missing: the continuation resumes at AwaitSeller from it", n)
		}
	}
}

// Every JSONPath the ASL reads from or writes to the state resolves in [document]; the paths a
// ResultSelector reads resolve in the Lambda response (Payload) or the callback output.
func TestPathsResolveInTheStateDocument(t *testing.T) {
	m := load(t)
	doc := reflect.TypeFor[document]()
	checked := 0
	for _, n := range m.names() {
		for _, p := range statePaths(m.raw[n]) {
			checked++
			if err := resolve(doc, p); err != "" {
				t.Errorf("%s: path %s: %s", n, p, err)
			}
		}
	}
	if checked < 30 {
		t.Fatalf("checked only %d paths", checked)
	}
	// Pass states that produce a failure write a StepError with a known Error name.
	for _, n := range m.names() {
		s := m.States[n]
		if s.Type != "Pass" || string(s.ResultPath) != `"$.failure"` {
			continue
		}
		r, _ := s.Result.(map[string]any)
		e, _ := r["Error"].(string)
		if c, _ := r["Cause"].(string); len(r) != 2 || c == "" {
			t.Errorf("%s: a failure is exactly {Error, Cause}", n)
		}
		if !slices.Contains(workflow.FailureNames, e) && !slices.Contains(workflow.ErrorNames, e) {
			t.Errorf("%s: failure name %q is in neither workflow.FailureNames nor workflow.ErrorNames", n, e)
		}
	}
	// The Choice on failure names only names that can occur.
	for _, n := range m.names() {
		for _, c := range asSlice(m.raw[n]["Choices"]) {
			rule, _ := c.(map[string]any)
			if rule["Variable"] != "$.failure.Error" {
				continue
			}
			v, _ := rule["StringEquals"].(string)
			if !slices.Contains(workflow.FailureNames, v) && !slices.Contains(workflow.ErrorNames, v) && !strings.HasPrefix(v, "States.") {
				t.Errorf("%s: Choice on unknown failure name %q", n, v)
			}
		}
	}
}

// statePaths returns the JSONPaths of a state that address the state document: InputPath,
// OutputPath, ResultPath, Catch ResultPaths, Choice Variables and *Path fields, Wait
// SecondsPath, TimeoutSecondsPath and every "key.$" value in Parameters (not ResultSelector,
// which reads the task result).
func statePaths(s map[string]any) []string {
	var out []string
	add := func(v any) {
		if p, ok := v.(string); ok && strings.HasPrefix(p, "$.") {
			out = append(out, p)
		}
	}
	for _, k := range []string{"InputPath", "OutputPath", "ResultPath", "SecondsPath", "TimeoutSecondsPath"} {
		add(s[k])
	}
	for _, c := range asSlice(s["Catch"]) {
		add(c.(map[string]any)["ResultPath"])
	}
	var rules func(v any)
	rules = func(v any) {
		r, ok := v.(map[string]any)
		if !ok {
			return
		}
		for k, x := range r {
			if k == "Variable" || strings.HasSuffix(k, "Path") {
				add(x)
			}
		}
		for _, k := range []string{"And", "Or"} {
			for _, x := range asSlice(r[k]) {
				rules(x)
			}
		}
		rules(r["Not"])
	}
	for _, c := range asSlice(s["Choices"]) {
		rules(c)
	}
	var params func(v any)
	params = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, y := range x {
				if strings.HasSuffix(k, ".$") {
					add(y)
				} else {
					params(y)
				}
			}
		case []any:
			for _, y := range x {
				params(y)
			}
		}
	}
	params(s["Parameters"])
	return out
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

// resolve walks path ($.a.b.c) through t by json field names; it returns "" when every step
// names a field.
func resolve(t reflect.Type, path string) string {
	for _, part := range strings.Split(strings.TrimPrefix(path, "$."), ".") {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return "steps into non-object " + t.String()
		}
		f, ok := jsonFields(t)[part]
		if !ok {
			return "no field " + part + " in " + t.String()
		}
		t = f
	}
	return ""
}

// jsonFields returns the json field names of struct type t (embedded structs flattened) with
// their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			for k, v := range jsonFields(f.Type) {
				out[k] = v
			}
			continue
		}
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// The Lambdas and the infra both import this package: it must stay on the standard library.
func TestPackageImportsStdlibOnly(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range file.Imports {
			p := strings.Trim(imp.Path.Value, `"`)
			if first, _, _ := strings.Cut(p, "/"); strings.Contains(first, ".") {
				t.Errorf("%s imports %s: statemachine is stdlib only", f, p)
			}
		}
	}
}
