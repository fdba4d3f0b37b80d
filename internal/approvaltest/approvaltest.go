// Package approvaltest builds the world the approval use cases' tests run in: one buy awaiting a
// person's approval in a kumo ledger, a recording Slack, a recording task completer, the link
// signer and both Lambdas' use cases (notify requests and expires, approve serves the links),
// plus the helpers those tests drive them with. Only the tests of notify and approve import it.
package approvaltest

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/approvalpolicy"
	"github.com/buyflow/buyflow/internal/record"

	"github.com/buyflow/buyflow/internal/logging/logtest"

	"github.com/aws/aws-lambda-go/events"

	"github.com/buyflow/buyflow/internal/approval"
	"github.com/buyflow/buyflow/internal/approvalcore"
	"github.com/buyflow/buyflow/internal/approve"
	"github.com/buyflow/buyflow/internal/clocktest"
	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/metrics/metricstest"
	"github.com/buyflow/buyflow/internal/notify"
	"github.com/buyflow/buyflow/internal/slack"
	"github.com/buyflow/buyflow/internal/workflow"
)

// The test buy's tenant, operation and requester, the approvers of the default policy (Escalator
// is in none), the API's base URL the links point at and the approval timeout the state machine
// passes.
const (
	Tenant         = "111122223333"
	OpID           = "op-1"
	BaseURL        = "https://api.example.com/prod"
	Requester      = "URITA"
	Alice          = "UALICE"
	Bob            = "UBOB"
	Escalator      = "UESC"
	TimeoutSeconds = 3600
)

// TaskCall is one call the fake task completer received.
type TaskCall struct {
	Kind   string // "success" or "failure"
	Token  string
	Output json.RawMessage
	Error  string
	Cause  string
}

// fakeTasks is a fake of approve.Tasks (Step Functions' SendTaskSuccess and SendTaskFailure)
// that records every call.
type fakeTasks struct {
	mu    sync.Mutex
	calls []TaskCall
	// OnCall, when set, runs before the call is answered and returns its error.
	OnCall func(TaskCall) error
}

func (f *fakeTasks) record(c TaskCall) error {
	f.mu.Lock()
	f.calls = append(f.calls, c)
	on := f.OnCall
	f.mu.Unlock()
	if on != nil {
		return on(c)
	}
	return nil
}

// Succeed records a success with output as JSON.
func (f *fakeTasks) Succeed(_ context.Context, token string, output any) error {
	b, err := json.Marshal(output)
	if err != nil {
		return err
	}
	return f.record(TaskCall{Kind: "success", Token: token, Output: b})
}

// Fail records a failure.
func (f *fakeTasks) Fail(_ context.Context, token, errName, cause string) error {
	return f.record(TaskCall{Kind: "failure", Token: token, Error: errName, Cause: cause})
}

// Calls returns the calls so far, oldest first.
func (f *fakeTasks) Calls() []TaskCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]TaskCall(nil), f.calls...)
}

// Env is one test's world: a kumo ledger, a recording Slack, a fake Step Functions and the two
// use cases over them, all on Clock, which stands still until the test moves it.
type Env struct {
	T      *testing.T
	Ctx    context.Context
	Clock  *clocktest.Clock
	Store  *ledger.Store
	Slack  *slack.Sink
	Tasks  *fakeTasks
	Signer *approvalcore.Signer
	// Notifier and Approver are the two Lambdas' use cases over the same ledger and Slack.
	Notifier *notify.Service
	Approver *approve.Service
	Policy   approvalpolicy.Policy
	// Logger is the use cases' logger; NewEnv fails the test if a line it wrote carries a task
	// token, a link or a signature.
	Logger *slog.Logger
	logs   *logtest.Buffer
	// Metrics holds the use cases' metrics recorder and reads back what each step recorded.
	Metrics *metricstest.Sink
}

// Build makes the env's notify and approve use cases from cfg, with the env's task completer.
func (e *Env) Build(cfg approval.Config) {
	e.T.Helper()
	n, err := notify.New(cfg)
	if err != nil {
		e.T.Fatal(err)
	}
	a, err := approve.New(cfg, e.Tasks, "")
	if err != nil {
		e.T.Fatal(err)
	}
	e.Notifier, e.Approver = n, a
}

var testKeys = `{"current":"k2","keys":{"k1":"` + strings.Repeat("A", 43) + `","k2":"` + strings.Repeat("B", 42) + "A" + `"}}`

// NewEnv starts a world with the buy OpID awaiting governance (see CreateOperation), under the
// approval policy policyJSON (empty: over USD 10,000.00, Alice, Bob and the requester approve,
// a timeout rejects).
func NewEnv(t *testing.T, policyJSON string) *Env {
	t.Helper()
	if policyJSON == "" {
		policyJSON = `{"threshold":"10000.00","currency":"USD","approvers":["UALICE","UBOB","URITA"],"on_timeout":"reject"}`
	}
	policy, err := approvalpolicy.Parse([]byte(policyJSON))
	if err != nil {
		t.Fatal(err)
	}
	client, table := dynamotest.Start(t)
	clk := clocktest.At(time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC))
	store := ledger.New(client, table)
	store.Now = clk.Now
	sink := slack.NewSink(clk.Now)
	srv := httptest.NewServer(sink)
	t.Cleanup(srv.Close)
	sl, err := slack.NewBotClient("xoxb-test", slack.WithBaseURL(srv.URL+"/api/"), slack.WithHTTPClient(srv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	keys, err := approvalcore.ParseKeys([]byte(testKeys))
	if err != nil {
		t.Fatal(err)
	}
	signer, err := approvalcore.NewSigner(keys, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	tasks := &fakeTasks{}
	logs := &logtest.Buffer{}
	logger := slog.New(slog.NewJSONHandler(logs, nil))
	// No log line may carry a task token, a link or a signature.
	t.Cleanup(func() {
		out := logs.String()
		for _, bad := range []string{"AQB0", "sig=", "xoxb-", BaseURL} {
			if strings.Contains(out, bad) {
				t.Errorf("logs carry %q:\n%s", bad, out)
			}
		}
		if testing.Verbose() {
			t.Log(out)
		}
	})
	rec := metricstest.NewSink(t, clk.Now)
	e := &Env{T: t, Ctx: context.Background(), Clock: clk, Store: store, Slack: sink, Tasks: tasks, Signer: signer, Policy: policy,
		Logger: logger, logs: logs, Metrics: rec}
	e.Build(approval.Config{
		Ledger: store, Slack: sl, Delivery: slack.Direct, Signer: signer, Policy: policy,
		BaseURL: BaseURL, Now: clk.Now, Metrics: rec.Recorder, Logger: logger,
	})
	e.CreateOperation(OpID, workflow.StatusCheckingGovernance)
	return e
}

// CreateOperation stores the test buy under id in status st, as the governance stage leaves it
// when a check answers with conditions.
func (e *Env) CreateOperation(id string, st workflow.Status) *record.Operation {
	e.T.Helper()
	op, err := e.Store.CreateOperation(e.Ctx, record.Operation{
		ID: id, Tenant: Tenant, Status: st, SellerID: "sports-network", PONumber: "PO-42",
		BudgetTotal: "12500.00", Currency: "USD", Requester: Requester,
		Request: []byte(`{"seller_id":"sports-network","currency":"USD","media_buy":` + submittedBuy + `}`), GovernanceCheckID: checkID,
	})
	if err != nil {
		e.T.Fatal(err)
	}
	// What the governance stage stores when a check answers with conditions: the payload it
	// checked (one condition applied) and the check's event.
	if _, _, err := e.Store.PutIntent(e.Ctx, record.Intent{Tenant: Tenant, OperationID: id, Task: record.CheckedIntentPrefix + checkID,
		IdempotencyKey: checkID, Request: []byte(checkedBuy), CreatedAt: e.Clock.Now()}); err != nil {
		e.T.Fatal(err)
	}
	if err := e.Store.AppendEvent(e.Ctx, Tenant, id, record.Event{Type: record.EventGovernanceCheck, Actor: "governance:gov",
		Detail: []byte(governanceDetail)}); err != nil {
		e.T.Fatal(err)
	}
	return op
}

// The buy of every test: three packages adding up to USD 12,500.00, checked by governance with
// two conditions, one applied by the governance stage (the display package ends in February),
// one for a person to judge.
const (
	checkID      = "chk-7"
	submittedBuy = `{"po_number":"PO-42","start_time":"2026-01-05T00:00:00Z","end_time":"2026-03-29T23:59:59Z","packages":[` +
		`{"product_id":"ctv_premium_sports","pricing_option_id":"cpm","budget":6000},` +
		`{"product_id":"olv_highlights","pricing_option_id":"cpm","budget":4250.00},` +
		`{"product_id":"display_run_of_site","pricing_option_id":"cpm","budget":2250}]}`
	checkedBuy = `{"po_number":"PO-42","plan_id":"plan-q1","start_time":"2026-01-05T00:00:00Z","end_time":"2026-03-29T23:59:59Z","packages":[` +
		`{"product_id":"ctv_premium_sports","pricing_option_id":"cpm","budget":6000},` +
		`{"product_id":"olv_highlights","pricing_option_id":"cpm","budget":4250.00},` +
		`{"product_id":"display_run_of_site","pricing_option_id":"cpm","budget":2250,"end_time":"2026-02-28T23:59:59Z"}],` +
		`"context":{"operation_id":"op-1"}}`
	governanceDetail = `{"verdict":"conditions","check_id":"chk-7","decision":"needs_approval","conditions":[` +
		`{"field":"packages[2].end_time","required_value":"2026-02-28T23:59:59Z","reason":"Display must end with the February flight"},` +
		`{"field":"packages[1].targeting_overlay","reason":"Highlights may only run in the US and Canada: confirm the seller's geo targeting"}]}`
)

// Token returns task token n, of the size Step Functions really sends (over 1,024 characters).
func Token(n int) string {
	return fmt.Sprintf("AQB%04d", n) + strings.Repeat("x9Z-_", 260)
}

// Request asks for the test buy's approval, as the state machine does with task token tok, and
// returns the approval's id.
func (e *Env) Request(tok string) string {
	e.T.Helper()
	payload, _ := json.Marshal(map[string]any{
		"action": "request", "operation_id": OpID, "tenant": Tenant,
		"config": map[string]any{"approval_timeout_seconds": TimeoutSeconds}, "task_token": tok,
		"reason": string(workflow.ApprovalForGovernance),
	})
	if _, err := e.Notifier.Handle(e.Ctx, payload); err != nil {
		e.T.Fatalf("request: %v", err)
	}
	return approval.ApprovalID(tok)
}

// CampaignID is the test campaign's id.
const CampaignID = "cp-1"

// CreateCampaign stores the test campaign (best_effort, plan plan-q1) whose legs are test buys
// of USD 12,500.00 at sports-network, leg i with id "leg-<a+i>" in status statuses[i], and
// returns the legs' ids.
func (e *Env) CreateCampaign(statuses ...workflow.Status) []string {
	e.T.Helper()
	var ids []string
	var legs []record.CampaignLeg
	for i, st := range statuses {
		id := "leg-" + string(rune('a'+i))
		e.CreateOperation(id, st)
		ids = append(ids, id)
		legs = append(legs, record.CampaignLeg{OperationID: id, SellerID: "sports-network", PONumber: "PO-42", Amount: "12500.00"})
	}
	if _, err := e.Store.CreateCampaign(e.Ctx, record.Campaign{
		ID: CampaignID, Tenant: Tenant, Name: "Spring", GovernanceAgentID: "gov", PlanID: "plan-q1", Policy: "best_effort",
		BudgetTotal: "40000.00", Currency: "USD", Requester: Requester, Legs: legs,
	}); err != nil {
		e.T.Fatal(err)
	}
	return ids
}

// RequestCampaign asks for the test campaign's one approval, as the state machine does with
// task token tok and the legs its release gate covers, and returns the approval's id.
func (e *Env) RequestCampaign(tok string, legs ...string) string {
	e.T.Helper()
	payload, _ := json.Marshal(map[string]any{
		"action": "request", "campaign_id": CampaignID, "tenant": Tenant, "legs": legs,
		"config": map[string]any{"approval_timeout_seconds": TimeoutSeconds}, "task_token": tok,
	})
	if _, err := e.Notifier.Handle(e.Ctx, payload); err != nil {
		e.T.Fatalf("request campaign: %v", err)
	}
	return approval.ApprovalID(tok)
}

// Expire runs the state machine's expiry of the test buy's approval and returns its output.
func (e *Env) Expire() workflow.ApprovalExpiry {
	e.T.Helper()
	payload, _ := json.Marshal(map[string]any{
		"action": "expire", "operation_id": OpID, "tenant": Tenant,
		"config": map[string]any{"approval_timeout_seconds": TimeoutSeconds}, "reason": string(workflow.ApprovalForGovernance),
	})
	out, err := e.Notifier.Handle(e.Ctx, payload)
	if err != nil {
		e.T.Fatalf("expire: %v", err)
	}
	exp, ok := out.(workflow.ApprovalExpiry)
	if !ok {
		e.T.Fatalf("expire returned %T", out)
	}
	return exp
}

// Approval reads approval id from the ledger.
func (e *Env) Approval(id string) *record.Approval {
	e.T.Helper()
	a, err := e.Store.GetApproval(e.Ctx, id)
	if err != nil {
		e.T.Fatal(err)
	}
	return a
}

// Events returns the test buy's timeline.
func (e *Env) Events() []record.Event {
	e.T.Helper()
	return e.Timeline(OpID)
}

// Timeline returns the timeline of operation or campaign id.
func (e *Env) Timeline(id string) []record.Event {
	e.T.Helper()
	p, err := e.Store.ListEvents(e.Ctx, Tenant, id, record.MaxListLimit, "")
	if err != nil {
		e.T.Fatal(err)
	}
	return p.Items
}

// EventsOf returns the events of type typ on the test buy's timeline.
func (e *Env) EventsOf(typ string) []record.Event {
	var out []record.Event
	for _, ev := range e.Events() {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

// Link returns the signed link posted to approver in Slack for approval id.
func (e *Env) Link(id, approver string) *url.URL {
	e.T.Helper()
	for _, m := range e.Slack.Messages() {
		if m.Kind != "chat.postMessage" || m.Channel != approver {
			continue
		}
		var msg slack.Message
		if err := json.Unmarshal(m.Body, &msg); err != nil {
			e.T.Fatal(err)
		}
		for _, b := range msg.Blocks {
			if b.Accessory != nil && strings.Contains(b.Accessory.URL, "/v1/approvals/"+id+"?") {
				u, err := url.Parse(b.Accessory.URL)
				if err != nil {
					e.T.Fatal(err)
				}
				return u
			}
		}
	}
	e.T.Fatalf("no link for %s to %s in slack", id, approver)
	return nil
}

// LinkIn finds approver's link for approval id in a raw Slack message body.
func (e *Env) LinkIn(body []byte, id, approver string) *url.URL {
	e.T.Helper()
	var msg slack.Message
	if err := json.Unmarshal(body, &msg); err != nil {
		e.T.Fatal(err)
	}
	for _, b := range msg.Blocks {
		if b.Accessory != nil && strings.Contains(b.Accessory.URL, "/v1/approvals/"+id+"?") && strings.Contains(b.Accessory.URL, "approver="+approver+"&") {
			u, err := url.Parse(b.Accessory.URL)
			if err != nil {
				e.T.Fatal(err)
			}
			return u
		}
	}
	e.T.Fatalf("no link for %s in the message", approver)
	return nil
}

// SignedLink signs a link directly (for people who were never sent one).
func (e *Env) SignedLink(id, approver string, exp time.Time) *url.URL {
	e.T.Helper()
	s, err := e.Signer.Sign(BaseURL, id, approver, exp)
	if err != nil {
		e.T.Fatal(err)
	}
	u, _ := url.Parse(s)
	return u
}

// The user agents of Slack's link unfurler and of an approver's browser.
const (
	SlackbotUA = "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)"
	BrowserUA  = "Mozilla/5.0 test"
)

// Get opens link u with user agent ua, as a browser or Slack's unfurler does, and checks the
// page (see Post).
func (e *Env) Get(u *url.URL, ua string) events.APIGatewayV2HTTPResponse {
	e.T.Helper()
	return e.serve(u, "GET", "198.51.100.7", ua, nil, "")
}

// Post submits the confirm form for link u, as an approver's browser does: the signed fields,
// a decision and a comment. Every page it gets back must be HTML with the security headers.
func (e *Env) Post(u *url.URL, decision, comment string) events.APIGatewayV2HTTPResponse {
	e.T.Helper()
	form := url.Values{}
	for _, k := range approvalcore.SignedParams {
		form[k] = u.Query()[k]
	}
	form.Set("decision", decision)
	if comment != "" {
		form.Set("comment", comment)
	}
	return e.serve(u, "POST", "203.0.113.9", BrowserUA,
		map[string]string{"content-type": "application/x-www-form-urlencoded"}, form.Encode())
}

// serve hands the approve use case the request API Gateway makes of a client at ip opening
// link u, and checks the page it answers.
func (e *Env) serve(u *url.URL, method, ip, ua string, headers map[string]string, body string) events.APIGatewayV2HTTPResponse {
	e.T.Helper()
	id := u.Path[strings.LastIndexByte(u.Path, '/')+1:]
	req := events.APIGatewayV2HTTPRequest{
		RawPath: "/v1/approvals/" + id, RawQueryString: u.RawQuery,
		PathParameters: map[string]string{"approval_id": id},
		Headers:        map[string]string{"user-agent": ua},
		Body:           body,
	}
	for k, v := range headers {
		req.Headers[k] = v
	}
	req.RequestContext.HTTP.Method = method
	req.RequestContext.HTTP.SourceIP = ip
	req.RequestContext.HTTP.UserAgent = ua
	resp, err := e.Approver.HandleHTTP(e.Ctx, req)
	if err != nil {
		e.T.Fatalf("HandleHTTP returned an error: %v", err)
	}
	checkPage(e.T, resp)
	return resp
}

// checkPage asserts what every approval page carries: HTML and the security headers.
func checkPage(t *testing.T, resp events.APIGatewayV2HTTPResponse) {
	t.Helper()
	for k, v := range approvalcore.SecurityHeaders() {
		if resp.Headers[k] != v {
			t.Errorf("header %s = %q, want %q", k, resp.Headers[k], v)
		}
	}
	if !strings.HasPrefix(resp.Headers["Content-Type"], "text/html") {
		t.Errorf("content type %q", resp.Headers["Content-Type"])
	}
	if !strings.Contains(resp.Body, "<!DOCTYPE html>") && resp.Body != "" {
		t.Errorf("body is not an HTML page: %.200s", resp.Body)
	}
}

// Snapshot is what a refused request may not change: the approval, the timeline's length, the
// task calls and the Slack messages.
type Snapshot struct {
	Approval string
	Events   int
	Tasks    int
	Slack    int
}

// Snapshot takes approval id's snapshot.
func (e *Env) Snapshot(id string) Snapshot {
	e.T.Helper()
	a, _ := json.Marshal(e.Approval(id))
	return Snapshot{Approval: string(a), Events: len(e.Events()), Tasks: len(e.Tasks.Calls()), Slack: len(e.Slack.Messages())}
}
