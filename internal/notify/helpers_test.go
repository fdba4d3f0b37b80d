package notify_test

import (
	"bytes"
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

	"github.com/aws/aws-lambda-go/events"

	"github.com/buyflow/buyflow/internal/approval"
	"github.com/buyflow/buyflow/internal/approvalcore"
	"github.com/buyflow/buyflow/internal/approve"
	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/metrics/metricstest"
	"github.com/buyflow/buyflow/internal/notify"
	"github.com/buyflow/buyflow/internal/slack"
	"github.com/buyflow/buyflow/internal/workflow"
)

const (
	tenant    = "111122223333"
	opID      = "op-1"
	baseURL   = "https://api.example.com/prod"
	requester = "URITA"
	alice     = "UALICE"
	bob       = "UBOB"
	escalator = "UESC"
	timeout   = 3600
)

// clock is a settable clock shared by the service, the ledger and the signer.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// taskCall is one call the fake task completer received.
type taskCall struct {
	Kind   string // "success" or "failure"
	Token  string
	Output json.RawMessage
	Error  string
	Cause  string
}

// fakeTasks is a function-typed fake of approve.Tasks that records every call.
type fakeTasks struct {
	mu    sync.Mutex
	calls []taskCall
	// onCall, when set, runs before the call is answered and returns its error.
	onCall func(taskCall) error
}

func (f *fakeTasks) record(c taskCall) error {
	f.mu.Lock()
	f.calls = append(f.calls, c)
	on := f.onCall
	f.mu.Unlock()
	if on != nil {
		return on(c)
	}
	return nil
}

func (f *fakeTasks) Succeed(_ context.Context, token string, output any) error {
	b, err := json.Marshal(output)
	if err != nil {
		return err
	}
	return f.record(taskCall{Kind: "success", Token: token, Output: b})
}

func (f *fakeTasks) Fail(_ context.Context, token, errName, cause string) error {
	return f.record(taskCall{Kind: "failure", Token: token, Error: errName, Cause: cause})
}

func (f *fakeTasks) Calls() []taskCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]taskCall(nil), f.calls...)
}

// env is one test's world: a kumo ledger, a fake Slack, a fake Step Functions and the service.
type env struct {
	t      *testing.T
	ctx    context.Context
	clk    *clock
	store  *ledger.Store
	sink   *slack.Sink
	tasks  *fakeTasks
	signer *approvalcore.Signer
	// notifier and approver are the two Lambdas' use cases over the same ledger and Slack.
	notifier *notify.Notifier
	approver *approve.Approver
	policy   approval.Policy
	logger   *slog.Logger
	logs     *syncBuffer
	// metrics holds the use cases' metrics recorder and reads back what each step recorded.
	metrics *metricstest.Sink
}

// build makes the env's notify and approve use cases from cfg, with the env's task completer.
func (e *env) build(cfg approval.Config) {
	e.t.Helper()
	n, err := notify.New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	a, err := approve.New(cfg, e.tasks, "")
	if err != nil {
		e.t.Fatal(err)
	}
	e.notifier, e.approver = n, a
}

// syncBuffer collects log output from concurrent handlers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var testKeys = `{"current":"k2","keys":{"k1":"` + strings.Repeat("A", 43) + `","k2":"` + strings.Repeat("B", 42) + "A" + `"}}`

func newEnv(t *testing.T, policyJSON string) *env {
	t.Helper()
	if policyJSON == "" {
		policyJSON = `{"threshold":"10000.00","currency":"USD","approvers":["UALICE","UBOB","URITA"],"on_timeout":"reject"}`
	}
	policy, err := approval.ParsePolicy([]byte(policyJSON))
	if err != nil {
		t.Fatal(err)
	}
	client, table := dynamotest.Start(t)
	clk := &clock{t: time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC)}
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
	logs := &syncBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, nil))
	// No log line may carry a task token, a link or a signature.
	t.Cleanup(func() {
		out := logs.String()
		for _, bad := range []string{"AQB0", "sig=", "xoxb-", baseURL} {
			if strings.Contains(out, bad) {
				t.Errorf("logs carry %q:\n%s", bad, out)
			}
		}
		if testing.Verbose() {
			t.Log(out)
		}
	})
	rec := metricstest.NewSink(t, clk.Now)
	e := &env{t: t, ctx: context.Background(), clk: clk, store: store, sink: sink, tasks: tasks, signer: signer, policy: policy,
		logger: logger, logs: logs, metrics: rec}
	e.build(approval.Config{
		Ledger: store, Slack: sl, Delivery: slack.Direct, Signer: signer, Policy: policy,
		BaseURL: baseURL, Now: clk.Now, Metrics: rec.Recorder, Logger: logger,
	})
	e.createOperation(opID, workflow.StatusCheckingGovernance)
	return e
}

func (e *env) createOperation(id string, st workflow.Status) *ledger.Operation {
	e.t.Helper()
	op, err := e.store.CreateOperation(e.ctx, ledger.Operation{
		ID: id, Tenant: tenant, Status: st, SellerID: "sports-network", PONumber: "PO-42",
		BudgetTotal: "12500.00", Currency: "USD", Requester: requester,
		Request: []byte(`{"seller_id":"sports-network","currency":"USD","media_buy":` + submittedBuy + `}`), GovernanceCheckID: checkID,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	// What the governance stage stores when a check answers with conditions: the payload it
	// checked (one condition applied) and the check's event.
	if _, _, err := e.store.PutIntent(e.ctx, ledger.Intent{Tenant: tenant, OperationID: id, Task: ledger.CheckedIntentPrefix + checkID,
		IdempotencyKey: checkID, Request: []byte(checkedBuy), CreatedAt: e.clk.Now()}); err != nil {
		e.t.Fatal(err)
	}
	if err := e.store.AppendEvent(e.ctx, tenant, id, ledger.Event{Type: ledger.EventGovernanceCheck, Actor: "governance:gov",
		Detail: []byte(governanceDetail)}); err != nil {
		e.t.Fatal(err)
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

// token returns a task token of the size Step Functions really sends (over 1,024 characters).
func token(n int) string {
	return fmt.Sprintf("AQB%04d", n) + strings.Repeat("x9Z-_", 260)
}

func (e *env) request(tok string) string {
	e.t.Helper()
	payload, _ := json.Marshal(map[string]any{
		"action": "request", "operation_id": opID, "tenant": tenant,
		"config": map[string]any{"approval_timeout_seconds": timeout}, "task_token": tok,
		"reason": string(workflow.ApprovalForGovernance),
	})
	if _, err := e.notifier.Notify(e.ctx, payload); err != nil {
		e.t.Fatalf("request: %v", err)
	}
	return approval.ApprovalID(tok)
}

func (e *env) expire() workflow.ApprovalExpiry {
	e.t.Helper()
	payload, _ := json.Marshal(map[string]any{
		"action": "expire", "operation_id": opID, "tenant": tenant,
		"config": map[string]any{"approval_timeout_seconds": timeout}, "reason": string(workflow.ApprovalForGovernance),
	})
	out, err := e.notifier.Notify(e.ctx, payload)
	if err != nil {
		e.t.Fatalf("expire: %v", err)
	}
	exp, ok := out.(workflow.ApprovalExpiry)
	if !ok {
		e.t.Fatalf("expire returned %T", out)
	}
	return exp
}

func (e *env) approval(id string) *ledger.Approval {
	e.t.Helper()
	a, err := e.store.GetApproval(e.ctx, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return a
}

// events returns the test buy's timeline.
func (e *env) events() []ledger.Event {
	e.t.Helper()
	return e.timeline(opID)
}

// timeline returns the timeline of operation or campaign id.
func (e *env) timeline(id string) []ledger.Event {
	e.t.Helper()
	p, err := e.store.ListEvents(e.ctx, tenant, id, ledger.MaxListLimit, "")
	if err != nil {
		e.t.Fatal(err)
	}
	return p.Items
}

func (e *env) eventsOf(typ string) []ledger.Event {
	var out []ledger.Event
	for _, ev := range e.events() {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

// link returns the signed link posted to approver in Slack for approval id.
func (e *env) link(id, approver string) *url.URL {
	e.t.Helper()
	for _, m := range e.sink.Messages() {
		if m.Kind != "chat.postMessage" || m.Channel != approver {
			continue
		}
		var msg slack.Message
		if err := json.Unmarshal(m.Body, &msg); err != nil {
			e.t.Fatal(err)
		}
		for _, b := range msg.Blocks {
			if b.Accessory != nil && strings.Contains(b.Accessory.URL, "/v1/approvals/"+id+"?") {
				u, err := url.Parse(b.Accessory.URL)
				if err != nil {
					e.t.Fatal(err)
				}
				return u
			}
		}
	}
	e.t.Fatalf("no link for %s to %s in slack", id, approver)
	return nil
}

// link2 finds approver's link for approval id in a raw Slack message body.
func (e *env) link2(body []byte, id, approver string) *url.URL {
	e.t.Helper()
	var msg slack.Message
	if err := json.Unmarshal(body, &msg); err != nil {
		e.t.Fatal(err)
	}
	for _, b := range msg.Blocks {
		if b.Accessory != nil && strings.Contains(b.Accessory.URL, "/v1/approvals/"+id+"?") && strings.Contains(b.Accessory.URL, "approver="+approver+"&") {
			u, err := url.Parse(b.Accessory.URL)
			if err != nil {
				e.t.Fatal(err)
			}
			return u
		}
	}
	e.t.Fatalf("no link for %s in the message", approver)
	return nil
}

// signedLink signs a link directly (for people who were never sent one).
func (e *env) signedLink(id, approver string, exp time.Time) *url.URL {
	e.t.Helper()
	s, err := e.signer.Sign(baseURL, id, approver, exp)
	if err != nil {
		e.t.Fatal(err)
	}
	u, _ := url.Parse(s)
	return u
}

// The user agents of Slack's link unfurler and of an approver's browser.
const (
	slackbotUA = "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)"
	browserUA  = "Mozilla/5.0 test"
)

func (e *env) get(u *url.URL, ua string) events.APIGatewayV2HTTPResponse {
	e.t.Helper()
	id := u.Path[strings.LastIndexByte(u.Path, '/')+1:]
	req := events.APIGatewayV2HTTPRequest{
		RawPath: "/v1/approvals/" + id, RawQueryString: u.RawQuery,
		PathParameters: map[string]string{"approval_id": id},
		Headers:        map[string]string{"user-agent": ua},
	}
	req.RequestContext.HTTP.Method = "GET"
	req.RequestContext.HTTP.SourceIP = "198.51.100.7"
	req.RequestContext.HTTP.UserAgent = ua
	resp, err := e.approver.HandleHTTP(e.ctx, req)
	if err != nil {
		e.t.Fatalf("HandleHTTP returned an error: %v", err)
	}
	checkPage(e.t, resp)
	return resp
}

// post submits the confirm form for link u: the signed fields, a decision and a comment.
func (e *env) post(u *url.URL, decision, comment string) events.APIGatewayV2HTTPResponse {
	e.t.Helper()
	form := url.Values{}
	for _, k := range approvalcore.SignedParams {
		form[k] = u.Query()[k]
	}
	form.Set("decision", decision)
	if comment != "" {
		form.Set("comment", comment)
	}
	id := u.Path[strings.LastIndexByte(u.Path, '/')+1:]
	req := events.APIGatewayV2HTTPRequest{
		RawPath: "/v1/approvals/" + id, RawQueryString: u.RawQuery,
		PathParameters: map[string]string{"approval_id": id},
		Headers:        map[string]string{"content-type": "application/x-www-form-urlencoded", "user-agent": browserUA},
		Body:           form.Encode(),
	}
	req.RequestContext.HTTP.Method = "POST"
	req.RequestContext.HTTP.SourceIP = "203.0.113.9"
	req.RequestContext.HTTP.UserAgent = browserUA
	resp, err := e.approver.HandleHTTP(e.ctx, req)
	if err != nil {
		e.t.Fatalf("HandleHTTP returned an error: %v", err)
	}
	checkPage(e.t, resp)
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

// snapshot is what a request may not change: the approval and the timeline.
type snapshot struct {
	approval string
	events   int
	tasks    int
	slack    int
}

func (e *env) snapshot(id string) snapshot {
	e.t.Helper()
	a, _ := json.Marshal(e.approval(id))
	return snapshot{approval: string(a), events: len(e.events()), tasks: len(e.tasks.Calls()), slack: len(e.sink.Messages())}
}
