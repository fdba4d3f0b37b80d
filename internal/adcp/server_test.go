package adcp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/buyflow/buyflow/internal/clocktest"
)

// toolFunc is a fake tool: it gets the raw arguments and returns a result or
// a (JSON-RPC) error.
type toolFunc func(args json.RawMessage) (*mcp.CallToolResult, error)

// call is one tools/call the fake agent saw.
type call struct {
	Tool string
	Args json.RawMessage
}

// fakeAgent is a real go-sdk MCP server on httptest, stateless and answering
// every POST as SSE, like the sellers buyflow talks to.
type fakeAgent struct {
	t   *testing.T
	srv *httptest.Server

	mu       sync.Mutex
	tools    map[string]toolFunc
	calls    []call
	requests int           // every HTTP request
	headers  []http.Header // headers of every HTTP request
	// httpFault, when set, can answer a tools/call POST itself (status, headers).
	httpFault func(tool string) (status int, hdr http.Header, body string, ok bool)
}

func newFakeAgent(t *testing.T, tools map[string]toolFunc) *fakeAgent {
	t.Helper()
	f := &fakeAgent{t: t, tools: tools}
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server {
		s := mcp.NewServer(&mcp.Implementation{Name: "fake-agent", Version: "0"}, nil)
		f.mu.Lock()
		defer f.mu.Unlock()
		for name, fn := range f.tools {
			name, fn := name, fn
			s.AddTool(&mcp.Tool{Name: name, InputSchema: map[string]any{"type": "object"}},
				func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					args := append(json.RawMessage(nil), req.Params.Arguments...)
					f.mu.Lock()
					f.calls = append(f.calls, call{Tool: name, Args: args})
					f.mu.Unlock()
					return fn(args)
				})
		}
		return s
	}, &mcp.StreamableHTTPOptions{Stateless: true})
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		f.mu.Lock()
		f.requests++
		f.headers = append(f.headers, r.Header.Clone())
		fault := f.httpFault
		f.mu.Unlock()
		if fault != nil {
			var msg struct {
				Method string `json:"method"`
				Params struct {
					Name string `json:"name"`
				} `json:"params"`
			}
			if json.Unmarshal(body, &msg) == nil && msg.Method == "tools/call" {
				if status, hdr, b, ok := fault(msg.Params.Name); ok {
					for k, v := range hdr {
						w.Header()[k] = v
					}
					w.WriteHeader(status)
					_, _ = io.WriteString(w, b)
					return
				}
			}
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAgent) URL() string { return f.srv.URL + "/mcp" }

func (f *fakeAgent) setFault(fn func(tool string) (int, http.Header, string, bool)) {
	f.mu.Lock()
	f.httpFault = fn
	f.mu.Unlock()
}

func (f *fakeAgent) Calls(tool string) []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []call
	for _, c := range f.calls {
		if tool == "" || c.Tool == tool {
			out = append(out, c)
		}
	}
	return out
}

func (f *fakeAgent) Requests() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests
}

// structured returns a tool result whose structuredContent is body.
func structured(body string) (*mcp.CallToolResult, error) {
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		panic(err)
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "summary"}}, StructuredContent: m}, nil
}

// toolError returns an isError result carrying adcp_error.
func toolError(adcpError string) (*mcp.CallToolResult, error) {
	var m map[string]any
	if err := json.Unmarshal([]byte(`{"adcp_error":`+adcpError+`}`), &m); err != nil {
		panic(err)
	}
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "error"}}, StructuredContent: m}, nil
}

const capsWithReplay = `{"adcp":{"major_versions":[3],"supported_versions":["3.0","3.1"],"idempotency":{"supported":true,"replay_ttl_seconds":86400}},"supported_protocols":["media_buy"]}`
const capsNoReplay = `{"adcp":{"major_versions":[3],"supported_versions":["3.1"]},"supported_protocols":["media_buy"]}`

func capsTool(body string) toolFunc {
	return func(json.RawMessage) (*mcp.CallToolResult, error) { return structured(body) }
}

// testValidators is the request validator of the package's tests: internal/adcpvalidate over
// every embedded release, as the functions' validator is. It imports this package, so a test
// file here cannot import it; validator_ext_test.go (package adcp_test) sets it in its init.
var testValidators RequestValidator

func testValidator(t *testing.T) RequestValidator {
	t.Helper()
	if testValidators == nil {
		t.Fatal("no test validator: validator_ext_test.go sets it")
	}
	return testValidators
}

const testToken = "tok-secret-value-123"

// newTestClient returns a client configured with one seller per (id, url).
func newTestClient(t *testing.T, clock *clocktest.Clock, agents map[string]string) *Client {
	t.Helper()
	var cfg RegistryConfig
	for id, u := range agents {
		cfg.Agents = append(cfg.Agents, Agent{ID: id, Role: RoleSeller, MCPURL: u, CredentialRef: "secret/" + id,
			Webhook: &WebhookConfig{Mode: WebhookHMAC, HMACSecretRef: "hmac/" + id}})
	}
	reg, err := NewRegistry(cfg)
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{
		Registry:    reg,
		Credentials: CredentialsFunc(func(context.Context, string) (string, error) { return testToken, nil }),
		Validator:   testValidator(t),
		CallTimeout: 5 * time.Second,
	}
	if clock != nil {
		opts.Now = clock.Now
	}
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// validCreate is a schema-valid create_media_buy request.
func validCreate() CreateMediaBuyRequest {
	return CreateMediaBuyRequest{
		Account:   AccountRef{AccountID: "acc_1"},
		Brand:     BrandRef{Domain: "acme.example"},
		StartTime: "asap",
		EndTime:   "2030-01-31T23:59:59Z",
		Packages: []PackageRequest{{ProductID: "prod_1", PricingOptionID: "cpm_1", Budget: "5000",
			Context: json.RawMessage(`{"buyer_ref":"li-1 & <x>"}`)}},
		Context: json.RawMessage(`{"operation":"op-1"}`),
	}
}
