package adcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/buyflow/buyflow/internal/clocktest"
)

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func argKey(t *testing.T, args json.RawMessage) string {
	t.Helper()
	var a struct {
		Key     string `json:"idempotency_key"`
		Version string `json:"adcp_version"`
	}
	if err := json.Unmarshal(args, &a); err != nil {
		t.Fatal(err)
	}
	if a.Version != "3.1" {
		t.Errorf("adcp_version = %q in %s", a.Version, args)
	}
	return a.Key
}

func mustIntent(t *testing.T, task string, req any, at time.Time) Intent {
	t.Helper()
	in, err := NewIntent(task, req, at)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

const successBody = `{"status":"completed","media_buy_id":"mb_1","media_buy_status":"pending_creatives","confirmed_at":"2030-01-01T00:00:00Z","revision":1,"packages":[{"package_id":"pkg_1","product_id":"prod_1"}]}`

// TestSendReusesKeyAndBytes: a transient failure is retried with the same key
// and byte-identical arguments; the first attempt's bytes equal Intent.Body.
func TestSendReusesKeyAndBytes(t *testing.T) {
	attempts := 0
	agent := newFakeAgent(t, map[string]toolFunc{
		ToolGetAdCPCapabilities: capsTool(capsWithReplay),
		ToolCreateMediaBuy: func(json.RawMessage) (*mcp.CallToolResult, error) {
			attempts++
			if attempts == 1 {
				return toolError(`{"code":"IDEMPOTENCY_IN_FLIGHT","message":"busy","retry_after":2}`)
			}
			return structured(successBody)
		},
	})
	clock := clocktest.At(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	c := newTestClient(t, clock, map[string]string{"s1": agent.URL()})
	in := mustIntent(t, ToolCreateMediaBuy, validCreate(), clock.Now())
	if !uuidV4.MatchString(in.Key) {
		t.Fatalf("key %q is not a UUID v4", in.Key)
	}

	_, err := c.CreateMediaBuy(context.Background(), "s1", in)
	if Decide(err) != DecisionRetry || RetryAfter(err) != 2*time.Second {
		t.Fatalf("first attempt: %v (decision %v, retry after %v)", err, Decide(err), RetryAfter(err))
	}
	clock.Advance(2 * time.Second)
	r, err := c.CreateMediaBuy(context.Background(), "s1", in.Retry())
	if err != nil {
		t.Fatal(err)
	}
	if r.Shape != ShapeSuccess || r.MediaBuyID != "mb_1" {
		t.Fatalf("result %+v", r)
	}
	calls := agent.Calls(ToolCreateMediaBuy)
	if len(calls) != 2 {
		t.Fatalf("%d create calls, want 2", len(calls))
	}
	if string(calls[0].Args) != string(calls[1].Args) {
		t.Fatalf("retry bytes differ:\n%s\n%s", calls[0].Args, calls[1].Args)
	}
	if string(calls[0].Args) != string(in.Body) {
		t.Fatalf("sent bytes differ from the intent:\n%s\n%s", calls[0].Args, in.Body)
	}
	if argKey(t, calls[1].Args) != in.Key {
		t.Fatalf("key changed on retry")
	}
}

// TestReadsUseFreshKeys: polls and reads take a new UUID v4 key each time;
// get_adcp_capabilities takes none.
func TestReadsUseFreshKeys(t *testing.T) {
	agent := newFakeAgent(t, map[string]toolFunc{
		ToolGetAdCPCapabilities: capsTool(capsWithReplay),
		ToolTasksGet: func(json.RawMessage) (*mcp.CallToolResult, error) {
			return structured(`{"task_id":"t1","task_type":"create_media_buy","protocol":"media-buy","status":"submitted","created_at":"2030-01-01T00:00:00Z","updated_at":"2030-01-01T00:00:00Z"}`)
		},
		ToolGetMediaBuys: capsTool(`{"media_buys":[{"media_buy_id":"mb_1","status":"active","revision":2}]}`),
	})
	c := newTestClient(t, nil, map[string]string{"s1": agent.URL()})
	ctx := context.Background()
	for range 2 {
		ts, err := c.GetTaskStatus(ctx, "s1", GetTaskStatusRequest{TaskID: "t1", IncludeResult: true})
		if err != nil || ts.Status != StatusSubmitted {
			t.Fatalf("poll: %+v %v", ts, err)
		}
		mb, err := c.GetMediaBuys(ctx, "s1", GetMediaBuysRequest{MediaBuyIDs: []string{"mb_1"}})
		if err != nil || len(mb.MediaBuys) != 1 || mb.MediaBuys[0].Revision != 2 {
			t.Fatalf("get_media_buys: %+v %v", mb, err)
		}
	}
	seen := map[string]bool{}
	for _, cl := range append(agent.Calls(ToolTasksGet), agent.Calls(ToolGetMediaBuys)...) {
		k := argKey(t, cl.Args)
		if !uuidV4.MatchString(k) || seen[k] {
			t.Fatalf("key %q reused or not UUID v4", k)
		}
		seen[k] = true
	}
	if len(seen) != 4 {
		t.Fatalf("%d keys, want 4", len(seen))
	}
	if _, err := c.Capabilities(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	caps := agent.Calls(ToolGetAdCPCapabilities)
	if len(caps) != 1 || argKey(t, caps[0].Args) != "" {
		t.Fatalf("capabilities calls %v: want one, without idempotency_key", caps)
	}
}

// TestReplayWindowRefusal: a resend at an agent with no declared replay
// window is refused locally, and a transient first-attempt failure there is
// reported as terminal.
func TestReplayWindowRefusal(t *testing.T) {
	tests := []struct {
		name      string
		caps      string
		attempt   int
		age       time.Duration
		failFirst bool
		wantCode  string
		wantCalls int
	}{
		{"resend without window", capsNoReplay, 1, 0, false, CodeNoReplayWindow, 0},
		{"resend with window unsupported", `{"adcp":{"major_versions":[3],"idempotency":{"supported":false}},"supported_protocols":["media_buy"]}`, 1, 0, false, CodeNoReplayWindow, 0},
		{"first attempt transient failure without window", capsNoReplay, 0, 0, true, CodeNoReplayWindow, 1},
		{"resend past the window", capsWithReplay, 1, 25 * time.Hour, false, CodeReplayWindowPassed, 0},
		{"first attempt without window succeeds", capsNoReplay, 0, 0, false, "", 1},
		{"resend inside the window", capsWithReplay, 1, time.Hour, false, "", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			agent := newFakeAgent(t, map[string]toolFunc{
				ToolGetAdCPCapabilities: capsTool(tt.caps),
				ToolCreateMediaBuy: func(json.RawMessage) (*mcp.CallToolResult, error) {
					if tt.failFirst {
						return toolError(`{"code":"SERVICE_UNAVAILABLE","message":"down"}`)
					}
					return structured(successBody)
				},
			})
			clock := clocktest.At(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
			c := newTestClient(t, clock, map[string]string{"s1": agent.URL()})
			in := mustIntent(t, ToolCreateMediaBuy, validCreate(), clock.Now())
			in.Attempt = tt.attempt
			clock.Advance(tt.age)
			_, err := c.CreateMediaBuy(context.Background(), "s1", in)
			if tt.wantCode == "" {
				if err != nil {
					t.Fatal(err)
				}
			} else {
				var ae *Error
				if !errors.As(err, &ae) || ae.Code != tt.wantCode || Decide(err) != DecisionStop {
					t.Fatalf("got %v, want terminal %s", err, tt.wantCode)
				}
			}
			if n := len(agent.Calls(ToolCreateMediaBuy)); n != tt.wantCalls {
				t.Fatalf("%d create calls, want %d", n, tt.wantCalls)
			}
		})
	}
}

// TestCapabilitiesCache: one get_adcp_capabilities per agent per TTL.
func TestCapabilitiesCache(t *testing.T) {
	agent := newFakeAgent(t, map[string]toolFunc{ToolGetAdCPCapabilities: capsTool(capsWithReplay)})
	clock := clocktest.At(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	c := newTestClient(t, clock, map[string]string{"s1": agent.URL()})
	ctx := context.Background()
	for range 3 {
		caps, err := c.Capabilities(ctx, "s1")
		if err != nil {
			t.Fatal(err)
		}
		if w, ok := caps.ReplayWindow(); !ok || w != 24*time.Hour || !caps.SupportsVersion("3.1") {
			t.Fatalf("caps %+v", caps)
		}
	}
	if n := len(agent.Calls(ToolGetAdCPCapabilities)); n != 1 {
		t.Fatalf("%d capability calls, want 1 (cached)", n)
	}
	clock.Advance(time.Hour)
	if _, err := c.Capabilities(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if n := len(agent.Calls(ToolGetAdCPCapabilities)); n != 2 {
		t.Fatalf("%d capability calls after TTL, want 2", n)
	}
}

// TestPollToolDiscovery: get_task_status when listed, else tasks/get; the
// tools/list answer is cached.
func TestPollToolDiscovery(t *testing.T) {
	status := func(json.RawMessage) (*mcp.CallToolResult, error) {
		return structured(`{"task_id":"t1","task_type":"create_media_buy","protocol":"media-buy","status":"completed","created_at":"2030-01-01T00:00:00Z","updated_at":"2030-01-01T00:01:00Z","result":` + successBody + `}`)
	}
	list := func(json.RawMessage) (*mcp.CallToolResult, error) {
		return structured(`{"query_summary":{"total_matching":1,"returned":1},"tasks":[{"task_id":"t1","task_type":"create_media_buy","status":"submitted","created_at":"2030-01-01T00:00:00Z","updated_at":"2030-01-01T00:00:00Z"}],"pagination":{"has_more":false}}`)
	}
	tests := []struct {
		name             string
		tools            map[string]toolFunc
		wantPoll, wantLs string
	}{
		{"3.1 aliases", map[string]toolFunc{ToolGetTaskStatus: status, ToolTasksGet: status, ToolListTasks: list, ToolTasksList: list}, ToolGetTaskStatus, ToolListTasks},
		{"legacy only", map[string]toolFunc{ToolTasksGet: status, ToolTasksList: list}, ToolTasksGet, ToolTasksList},
		{"@adcp/sdk underscore", map[string]toolFunc{ToolTasksGetUnderscore: status}, ToolTasksGetUnderscore, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			agent := newFakeAgent(t, tt.tools)
			c := newTestClient(t, nil, map[string]string{"s1": agent.URL()})
			ctx := context.Background()
			for range 2 {
				ts, err := c.GetTaskStatus(ctx, "s1", GetTaskStatusRequest{TaskID: "t1", IncludeResult: true})
				if err != nil {
					t.Fatal(err)
				}
				r, err := DecodeMediaBuy(ts.Result)
				if err != nil || r.MediaBuyID != "mb_1" {
					t.Fatalf("result %+v %v", r, err)
				}
			}
			if n := len(agent.Calls(tt.wantPoll)); n != 2 {
				t.Fatalf("%d calls to %s, want 2", n, tt.wantPoll)
			}
			ls, err := c.ListTasks(ctx, "s1", ListTasksRequest{Filters: &TaskFilters{Statuses: []string{"submitted", "working", "input-required"}}})
			if tt.wantLs == "" {
				var ae *Error
				if !errors.As(err, &ae) || ae.Code != CodeToolNotOffered {
					t.Fatalf("list: %v, want %s", err, CodeToolNotOffered)
				}
			} else if err != nil || len(ls.Tasks) != 1 || len(agent.Calls(tt.wantLs)) != 1 {
				t.Fatalf("list via %s: %+v %v", tt.wantLs, ls, err)
			}
			// tools/list once: every MCP request counted; a second discovery would add 3.
			before := agent.Requests()
			if _, err := c.PollTool(ctx, "s1"); err != nil {
				t.Fatal(err)
			}
			if agent.Requests() != before {
				t.Fatalf("tools/list not cached")
			}
		})
	}
}

// TestSchemaInvalidRequestsAreLocal: invalid requests fail with a
// *ValidationError naming the field, and the agent sees no task call (only the capabilities
// read that chooses the AdCP version).
func TestSchemaInvalidRequestsAreLocal(t *testing.T) {
	agent := newFakeAgent(t, map[string]toolFunc{
		ToolGetAdCPCapabilities: capsTool(capsWithReplay),
		ToolCreateMediaBuy:      capsTool(successBody),
	})
	c := newTestClient(t, nil, map[string]string{"s1": agent.URL()})
	mod := func(f func(*CreateMediaBuyRequest)) CreateMediaBuyRequest {
		r := validCreate()
		f(&r)
		return r
	}
	tests := []struct {
		name        string
		task        string
		req         any
		key         string
		wantPointer string
	}{
		{"missing brand domain", ToolCreateMediaBuy, mod(func(r *CreateMediaBuyRequest) { r.Brand.Domain = "" }), "", "/brand/domain"},
		{"end_time not a date-time", ToolCreateMediaBuy, mod(func(r *CreateMediaBuyRequest) { r.EndTime = "next tuesday" }), "", "/end_time"},
		{"start_time neither asap nor date-time", ToolCreateMediaBuy, mod(func(r *CreateMediaBuyRequest) { r.StartTime = "soon" }), "", "/start_time"},
		{"short idempotency key", ToolCreateMediaBuy, validCreate(), "short", "/idempotency_key"},
		{"package without budget", ToolCreateMediaBuy, map[string]any{"account": map[string]any{"account_id": "a"}, "brand": map[string]any{"domain": "acme.example"},
			"start_time": "asap", "end_time": "2030-01-31T23:59:59Z", "packages": []any{map[string]any{"product_id": "p", "pricing_option_id": "c"}}}, "", "/packages/0/budget"},
		{"proposal_id without total_budget", ToolCreateMediaBuy, mod(func(r *CreateMediaBuyRequest) { r.Packages = nil; r.ProposalID = "prop_1" }), "", "/total_budget"},
		{"update without media_buy_id", ToolUpdateMediaBuy, UpdateMediaBuyRequest{Account: AccountRef{AccountID: "a"}, Canceled: true}, "", "/media_buy_id"},
		{"report_plan_outcome bad outcome", ToolReportPlanOutcome, ReportPlanOutcomeRequest{PlanID: "p", Outcome: "done", GovernanceContext: "g"}, "", "/outcome"},
		{"sync_plans without plans", ToolSyncPlans, map[string]any{}, "", "/plans"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := tt.req
			if tt.key != "" {
				r := req.(CreateMediaBuyRequest)
				r.IdempotencyKey = tt.key
				req = r
			}
			in := mustIntent(t, tt.task, req, time.Now())
			_, err := c.Send(context.Background(), "s1", in)
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("got %v, want *ValidationError", err)
			}
			if ve.Pointer != tt.wantPointer || !strings.Contains(err.Error(), tt.wantPointer) {
				t.Fatalf("pointer %q (%v), want %q; issues %+v", ve.Pointer, err, tt.wantPointer, ve.Issues)
			}
			if Decide(err) != DecisionFix {
				t.Fatalf("Decide = %v", Decide(err))
			}
		})
	}
	t.Run("invalid poll", func(t *testing.T) {
		_, err := c.Call(context.Background(), "s1", ToolTasksGet, GetTaskStatusRequest{})
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Pointer != "/task_id" {
			t.Fatalf("got %v", err)
		}
	})
	// The invalid read is refused after the capabilities read that chooses its version, before
	// the read itself: no task reached the agent.
	if n := len(agent.Calls("")) - len(agent.Calls(ToolGetAdCPCapabilities)); n != 0 {
		t.Fatalf("agent saw %d task calls, want 0", n)
	}
}

// TestWireEnvelope: auth and accept headers, flat envelope fields, no
// credential in errors.
func TestWireEnvelope(t *testing.T) {
	agent := newFakeAgent(t, map[string]toolFunc{
		ToolGetAdCPCapabilities: capsTool(capsWithReplay),
		ToolCheckGovernance: func(json.RawMessage) (*mcp.CallToolResult, error) {
			return structured(`{"status":"completed","check_id":"c1","verdict":"conditions","plan_id":"p1","explanation":"cap","conditions":[{"field":"packages[0].budget","required_value":4000,"reason":"cap"}],"expires_at":"2030-01-01T00:15:00Z"}`)
		},
	})
	c := newTestClient(t, nil, map[string]string{"g1": agent.URL()})
	in := mustIntent(t, ToolCreateMediaBuy, validCreate(), time.Now())
	g, err := c.CheckGovernance(context.Background(), "g1", CheckGovernanceRequest{PlanID: "p1", Caller: "https://buyflow.example/agent",
		Tool: ToolCreateMediaBuy, Payload: in.Body, PurchaseType: "media_buy"})
	if err != nil || g.Verdict != VerdictConditions || len(g.Conditions) != 1 {
		t.Fatalf("check: %+v %v", g, err)
	}
	args := agent.Calls(ToolCheckGovernance)[0].Args
	var m map[string]json.RawMessage
	if err := json.Unmarshal(args, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"plan_id", "caller", "payload", "idempotency_key", "adcp_version"} {
		if _, ok := m[k]; !ok {
			t.Errorf("arguments lack %s: %s", k, args)
		}
	}
	if _, ok := m["account"]; ok {
		t.Errorf("check_governance must not carry account")
	}
	agent.mu.Lock()
	defer agent.mu.Unlock()
	for _, h := range agent.headers {
		if h.Get("Authorization") != "Bearer "+testToken {
			t.Errorf("Authorization = %q", h.Get("Authorization"))
		}
		if r := h.Get("Accept"); h.Get("Content-Type") == "application/json" && (!strings.Contains(r, "application/json") || !strings.Contains(r, "text/event-stream")) {
			t.Errorf("Accept = %q", r)
		}
	}
}

// TestErrorPaths covers every way a call fails and the decision each gets.
func TestErrorPaths(t *testing.T) {
	rpcErr := func(code int64, data string) toolFunc {
		return func(json.RawMessage) (*mcp.CallToolResult, error) {
			e := &jsonrpc.Error{Code: code, Message: "rpc failure"}
			if data != "" {
				e.Data = json.RawMessage(data)
			}
			return nil, e
		}
	}
	tests := []struct {
		name         string
		tool         toolFunc
		fault        func(string) (int, http.Header, string, bool)
		timeout      time.Duration
		wantKind     ErrorKind
		wantCode     string
		wantDecision Decision
		wantRetry    time.Duration
		wantHTTP     int
	}{
		{name: "isError adcp_error correctable", tool: func(json.RawMessage) (*mcp.CallToolResult, error) {
			return toolError(`{"code":"BUDGET_TOO_LOW","message":"low","field":"packages[0].budget"}`)
		}, wantKind: KindAdCP, wantCode: "BUDGET_TOO_LOW", wantDecision: DecisionFix},
		{name: "isError adcp_error terminal", tool: func(json.RawMessage) (*mcp.CallToolResult, error) {
			return toolError(`{"code":"ACCOUNT_SUSPENDED","message":"x"}`)
		}, wantKind: KindAdCP, wantCode: "ACCOUNT_SUSPENDED", wantDecision: DecisionStop},
		{name: "isError with vendor code and explicit recovery", tool: func(json.RawMessage) (*mcp.CallToolResult, error) {
			return toolError(`{"code":"X_VENDOR","message":"x","recovery":"transient","retry_after":7200}`)
		}, wantKind: KindAdCP, wantCode: "X_VENDOR", wantDecision: DecisionRetry, wantRetry: time.Hour},
		{name: "isError Error arm errors[] keeps code and recovery", tool: func(json.RawMessage) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{IsError: true, StructuredContent: map[string]any{"errors": []any{
				map[string]any{"code": "W", "message": "w", "severity": "warning"},
				map[string]any{"code": "BUDGET_TOO_LOW", "message": "low", "recovery": "correctable", "retry_after": 30}}},
				Content: []mcp.Content{&mcp.TextContent{Text: "BUDGET_TOO_LOW: low"}}}, nil
		}, wantKind: KindAdCP, wantCode: "BUDGET_TOO_LOW", wantDecision: DecisionFix},
		{name: "isError errors[] in JSON text", tool: func(json.RawMessage) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: `{"errors":[{"code":"PRODUCT_NOT_FOUND","message":"gone"}]}`}}}, nil
		}, wantKind: KindAdCP, wantCode: "PRODUCT_NOT_FOUND", wantDecision: DecisionFix},
		{name: "integer retry_after on a transient error", tool: func(json.RawMessage) (*mcp.CallToolResult, error) {
			return toolError(`{"code":"SERVICE_UNAVAILABLE","message":"x","retry_after":12}`)
		}, wantKind: KindAdCP, wantCode: "SERVICE_UNAVAILABLE", wantDecision: DecisionRetry, wantRetry: 12 * time.Second},
		{name: "retry_after ignored on a terminal error", tool: func(json.RawMessage) (*mcp.CallToolResult, error) {
			return toolError(`{"code":"ACCOUNT_SUSPENDED","message":"x","retry_after":12}`)
		}, wantKind: KindAdCP, wantCode: "ACCOUNT_SUSPENDED", wantDecision: DecisionStop},
		{name: "isError without adcp_error", tool: func(json.RawMessage) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "boom"}}}, nil
		}, wantKind: KindTool, wantDecision: DecisionStop},
		{name: "json-rpc error with data.adcp_error", tool: rpcErr(-32029, `{"adcp_error":{"code":"RATE_LIMITED","retry_after":10}}`),
			wantKind: KindAdCP, wantCode: "RATE_LIMITED", wantDecision: DecisionRetry, wantRetry: 10 * time.Second},
		{name: "json-rpc error without data", tool: rpcErr(-32602, ""), wantKind: KindJSONRPC, wantDecision: DecisionStop},
		{name: "json-rpc service unavailable without data", tool: rpcErr(-32027, ""), wantKind: KindJSONRPC, wantDecision: DecisionRetry},
		{name: "http 429 with Retry-After", fault: func(string) (int, http.Header, string, bool) {
			return 429, http.Header{"Retry-After": {"3"}}, "slow down", true
		}, wantKind: KindTransport, wantDecision: DecisionRetry, wantRetry: 3 * time.Second, wantHTTP: 429},
		{name: "http 503", fault: func(string) (int, http.Header, string, bool) { return 503, nil, "", true },
			wantKind: KindTransport, wantDecision: DecisionRetry, wantHTTP: 503},
		{name: "http 500", fault: func(string) (int, http.Header, string, bool) { return 500, nil, "oops", true },
			wantKind: KindTransport, wantDecision: DecisionRetry, wantHTTP: 500},
		{name: "http 401", fault: func(string) (int, http.Header, string, bool) { return 401, nil, "", true },
			wantKind: KindTransport, wantDecision: DecisionStop, wantHTTP: 401},
		{name: "timeout", tool: func(json.RawMessage) (*mcp.CallToolResult, error) {
			time.Sleep(400 * time.Millisecond)
			return structured(`{"task_id":"t"}`)
		}, timeout: 100 * time.Millisecond, wantKind: KindTransport, wantDecision: DecisionRetry},
		{name: "no AdCP payload", tool: func(json.RawMessage) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done!"}}}, nil
		}, wantKind: KindProtocol, wantDecision: DecisionStop},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tools := map[string]toolFunc{}
			if tt.tool != nil {
				tools[ToolGetMediaBuys] = tt.tool
			} else {
				tools[ToolGetMediaBuys] = capsTool(`{"media_buys":[]}`)
			}
			tools[ToolGetAdCPCapabilities] = capsTool(`{"adcp":{"supported_versions":["3.1"]}}`)
			agent := newFakeAgent(t, tools)
			if tt.fault != nil {
				// The fault is the read's; the capabilities read that chooses its version passes.
				agent.setFault(func(tool string) (int, http.Header, string, bool) {
					if tool == ToolGetAdCPCapabilities {
						return 0, nil, "", false
					}
					return tt.fault(tool)
				})
			}
			c := newTestClient(t, nil, map[string]string{"s1": agent.URL()})
			if tt.timeout > 0 {
				c.opts.CallTimeout = tt.timeout
			}
			_, err := c.GetMediaBuys(context.Background(), "s1", GetMediaBuysRequest{})
			var ae *Error
			if !errors.As(err, &ae) {
				t.Fatalf("got %v, want *Error", err)
			}
			if ae.Kind != tt.wantKind || ae.Code != tt.wantCode || Decide(err) != tt.wantDecision ||
				ae.RetryAfter != tt.wantRetry || ae.HTTPStatus != tt.wantHTTP {
				t.Fatalf("got kind %s code %q decision %v retry %v http %d (%v)", ae.Kind, ae.Code, Decide(err), ae.RetryAfter, ae.HTTPStatus, err)
			}
			if ae.Agent != "s1" || ae.Tool != ToolGetMediaBuys {
				t.Fatalf("error not tagged: %+v", ae)
			}
			if strings.Contains(err.Error(), testToken) {
				t.Fatalf("credential leaked into %v", err)
			}
		})
	}
}

func TestLocalFailures(t *testing.T) {
	ctx := context.Background()
	t.Run("unknown agent", func(t *testing.T) {
		c := newTestClient(t, nil, map[string]string{"s1": "http://127.0.0.1:1/mcp"})
		in := mustIntent(t, ToolCreateMediaBuy, validCreate(), time.Now())
		_, err := c.Send(ctx, "nope", in)
		if !errors.Is(err, ErrUnknownAgent) || Decide(err) != DecisionStop {
			t.Fatalf("got %v", err)
		}
		if _, err := c.Call(ctx, "nope", ToolGetMediaBuys, GetMediaBuysRequest{}); !errors.Is(err, ErrUnknownAgent) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("connection refused is transient", func(t *testing.T) {
		agent := newFakeAgent(t, nil)
		url := agent.URL()
		agent.srv.Close()
		c := newTestClient(t, nil, map[string]string{"s1": url})
		_, err := c.GetMediaBuys(ctx, "s1", GetMediaBuysRequest{})
		var ae *Error
		if !errors.As(err, &ae) || ae.Kind != KindTransport || Decide(err) != DecisionRetry {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("credential failure", func(t *testing.T) {
		c := newTestClient(t, nil, map[string]string{"s1": "http://127.0.0.1:1/mcp"})
		c.opts.Credentials = CredentialsFunc(func(context.Context, string) (string, error) { return "", errors.New("secrets manager throttled") })
		_, err := c.GetMediaBuys(ctx, "s1", GetMediaBuysRequest{})
		if Decide(err) != DecisionRetry || !strings.Contains(err.Error(), "secret/s1") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("intent mismatches", func(t *testing.T) {
		c := newTestClient(t, nil, map[string]string{"s1": "http://127.0.0.1:1/mcp"})
		in := mustIntent(t, ToolCreateMediaBuy, validCreate(), time.Now())
		in.Key = "00000000-0000-4000-8000-000000000000"
		if _, err := c.Send(ctx, "s1", in); err == nil || !strings.Contains(err.Error(), "differs") {
			t.Fatalf("got %v", err)
		}
		if _, err := NewIntent(ToolGetMediaBuys, GetMediaBuysRequest{}, time.Now()); err == nil {
			t.Fatal("read tool accepted as intent")
		}
		if _, err := c.Call(ctx, "s1", ToolCreateMediaBuy, validCreate()); err == nil {
			t.Fatal("mutating tool accepted by Call")
		}
		upd := mustIntent(t, ToolUpdateMediaBuy, UpdateMediaBuyRequest{Account: AccountRef{AccountID: "a"}, MediaBuyID: "mb"}, time.Now())
		if _, err := c.CreateMediaBuy(ctx, "s1", upd); err == nil {
			t.Fatal("update intent accepted by CreateMediaBuy")
		}
	})
	t.Run("new client needs dependencies", func(t *testing.T) {
		_, err := New(Options{})
		if err == nil || !strings.Contains(err.Error(), "registry") || !strings.Contains(err.Error(), "validator") {
			t.Fatalf("got %v", err)
		}
	})
}

// TestCancelAndOutcomeOverTheWire drives update_media_buy (cancel),
// report_plan_outcome and sync_plans through intents.
func TestCancelAndOutcomeOverTheWire(t *testing.T) {
	agent := newFakeAgent(t, map[string]toolFunc{
		ToolGetAdCPCapabilities: capsTool(capsWithReplay),
		ToolUpdateMediaBuy:      capsTool(`{"status":"completed","media_buy_id":"mb_1","revision":3,"media_buy_status":"canceled"}`),
		ToolReportPlanOutcome:   capsTool(`{"outcome_id":"o1","status":"accepted","committed_budget":5000}`),
		ToolSyncPlans:           capsTool(`{"plans":[{"plan_id":"p1","status":"active","version":1}]}`),
	})
	c := newTestClient(t, nil, map[string]string{"s1": agent.URL()})
	ctx := context.Background()
	rev := 2
	upd := mustIntent(t, ToolUpdateMediaBuy, UpdateMediaBuyRequest{Account: AccountRef{AccountID: "acc_1"}, MediaBuyID: "mb_1",
		Revision: &rev, Canceled: true, CancellationReason: "governance findings"}, time.Now())
	r, err := c.UpdateMediaBuy(ctx, "s1", upd)
	if err != nil || r.MediaBuyStatus != "canceled" || r.Revision != 3 {
		t.Fatalf("cancel: %+v %v", r, err)
	}
	if !strings.Contains(string(agent.Calls(ToolUpdateMediaBuy)[0].Args), `"canceled":true`) {
		t.Fatalf("cancel args %s", agent.Calls(ToolUpdateMediaBuy)[0].Args)
	}
	budget := json.Number("5000.00")
	out := mustIntent(t, ToolReportPlanOutcome, ReportPlanOutcomeRequest{PlanID: "p1", CheckID: "c1", Outcome: "completed",
		SellerResponse: &SellerResponse{SellerReference: "mb_1", CommittedBudget: budget}, GovernanceContext: "eyJ.a.b"}, time.Now())
	o, err := c.ReportPlanOutcome(ctx, "s1", out)
	if err != nil || o.OutcomeState != "accepted" {
		t.Fatalf("outcome: %+v %v", o, err)
	}
	sp := mustIntent(t, ToolSyncPlans, SyncPlansRequest{Plans: []json.RawMessage{json.RawMessage(
		`{"plan_id":"p1","brand":{"domain":"acme.example"},"objectives":"reach","budget":{"total":10000,"currency":"USD","reallocation_unlimited":true},"flight":{"start":"2030-01-01T00:00:00Z","end":"2030-02-01T00:00:00Z"}}`)}}, time.Now())
	s, err := c.SyncPlans(ctx, "s1", sp)
	if err != nil || len(s.Plans) != 1 || s.Plans[0].Status != "active" {
		t.Fatalf("sync_plans: %+v %v", s, err)
	}
}

// TestWireErrorSkipsRejectionMarker pins why wireError walks the tree itself:
// the SDK wraps the peer's error behind its rejection marker, where errors.As
// would stop.
func TestWireErrorSkipsRejectionMarker(t *testing.T) {
	marker := &jsonrpc.Error{Code: codeRejected, Message: "rejected by transport"}
	peer := &jsonrpc.Error{Code: -32029, Message: "rate limited"}
	for name, err := range map[string]error{
		"chain":  fmt.Errorf("tools/call: %w: %w", marker, peer),
		"joined": errors.Join(marker, fmt.Errorf("wrapped: %w", peer)),
	} {
		if got := wireError(err); got != peer {
			t.Errorf("%s: wireError = %v, want the peer's error", name, got)
		}
	}
	if got := wireError(fmt.Errorf("%w: write to closed stream", marker)); got != nil {
		t.Errorf("marker alone: wireError = %v, want nil", got)
	}
}
