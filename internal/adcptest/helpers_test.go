package adcptest

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/buyflow/buyflow/internal/clocktest"
)

// newClock is the agents' clock in these tests, standing still until a test moves it.
func newClock() *clocktest.Clock {
	return clocktest.At(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
}

type headerRT struct {
	token string
	base  http.RoundTripper
}

func (h headerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if h.token != "" {
		r.Header.Set("Authorization", "Bearer "+h.token)
	}
	return h.base.RoundTrip(r)
}

// connect opens an MCP client session to url with bearer token ("" sends
// none) and an HTTP timeout (0 = none).
func connect(t *testing.T, url, token string, timeout time.Duration) *mcp.ClientSession {
	t.Helper()
	hc := &http.Client{Transport: headerRT{token: token, base: http.DefaultTransport}, Timeout: timeout}
	c := mcp.NewClient(&mcp.Implementation{Name: "adcptest-client", Version: "0"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, DisableStandaloneSSE: true, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// result is a decoded tool result.
type result struct {
	IsError bool
	Body    map[string]any
	Raw     json.RawMessage
}

func (r result) str(path string) string {
	v := r.get(path)
	s, _ := v.(string)
	return s
}

func (r result) get(path string) any {
	var cur any = r.Body
	for _, p := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[p]
	}
	return cur
}

func (r result) code() string { return r.str("adcp_error.code") }

func callT(t *testing.T, cs *mcp.ClientSession, tool string, args any) result {
	t.Helper()
	res, err := callErr(cs, tool, args)
	if err != nil {
		t.Fatalf("call %s: %v", tool, err)
	}
	return res
}

func callErr(cs *mcp.ClientSession, tool string, args any) (result, error) {
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return result{}, err
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	// The text content carries the same JSON.
	if len(res.Content) > 0 {
		if tc, ok := res.Content[0].(*mcp.TextContent); ok && body == nil {
			_ = json.Unmarshal([]byte(tc.Text), &body)
			raw = json.RawMessage(tc.Text)
		}
	}
	return result{IsError: res.IsError, Body: body, Raw: raw}, nil
}

func key() string { return "k-" + uuid.NewString() }

// createArgs returns a valid 3.1 create_media_buy request with sim tokens
// in context (empty = none).
func createArgs(sim string) map[string]any {
	ctx := map[string]any{"buyer_ref": "order-42"}
	if sim != "" {
		ctx["sim"] = sim
	}
	return map[string]any{
		"idempotency_key": key(),
		"adcp_version":    "3.1",
		"account":         map[string]any{"brand": map[string]any{"domain": "acmeoutdoor.example"}, "operator": "pinnacle-agency.example", "sandbox": true},
		"brand":           map[string]any{"domain": "acmeoutdoor.example"},
		"start_time":      "asap",
		"end_time":        "2099-09-30T23:59:59Z",
		"po_number":       "PO-1001",
		"plan_id":         "plan_q3",
		"packages": []any{map[string]any{
			"product_id": "video_q3", "pricing_option_id": "cpm_usd", "budget": 30000.0,
			"context": map[string]any{"buyer_ref": "li-1"},
		}},
		"context": ctx,
	}
}

func withPush(args map[string]any, url string, auth map[string]any) map[string]any {
	pc := map[string]any{"url": url, "operation_id": "op-" + uuid.NewString(), "token": "tok-0123456789abcdef"}
	if auth != nil {
		pc["authentication"] = auth
	}
	args["push_notification_config"] = pc
	return args
}

func mustValidate(t *testing.T, rel string, raw []byte) {
	t.Helper()
	v, err := NewValidator("")
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Validate(rel, raw); err != nil {
		t.Errorf("%s does not validate: %v\n%s", rel, err, raw)
	}
}

// startSeller starts a seller with opts and connects a client.
func startSeller(t *testing.T, opts SellerOptions) (*Seller, *mcp.ClientSession) {
	t.Helper()
	s := NewSeller(opts)
	url := s.Start()
	t.Cleanup(s.Close)
	return s, connect(t, url, s.opts.Token, 0)
}

func startGov(t *testing.T, opts GovernanceOptions) (*Governance, *mcp.ClientSession) {
	t.Helper()
	g := NewGovernance(opts)
	url := g.Start()
	t.Cleanup(g.Close)
	return g, connect(t, url, g.opts.Token, 0)
}

func poll(t *testing.T, cs *mcp.ClientSession, tool, taskID string) result {
	t.Helper()
	return callT(t, cs, tool, map[string]any{"task_id": taskID, "include_result": true, "idempotency_key": key(), "adcp_version": "3.1"})
}
