package sandbox

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/buyflow/buyflow/internal/webhookauth"
)

const token = "sandbox-test-token-0123456789abcdef"

// invoke sends one Function URL event, as Lambda builds it for an HTTP request, to h.
func invoke(t *testing.T, h func(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error),
	method, path, body string, header map[string]string) (int, map[string]string, []byte) {
	t.Helper()
	in := events.LambdaFunctionURLRequest{Version: "2.0", RawPath: path, Headers: header,
		Body: base64.StdEncoding.EncodeToString([]byte(body)), IsBase64Encoded: true}
	in.RequestContext.HTTP.Method = method
	in.RequestContext.DomainName = "abc.lambda-url.eu-west-1.on.aws"
	out, err := h(context.Background(), in)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	b := []byte(out.Body)
	if out.IsBase64Encoded {
		if b, err = base64.StdEncoding.DecodeString(out.Body); err != nil {
			t.Fatalf("%s %s: body: %v", method, path, err)
		}
	}
	return out.StatusCode, out.Headers, b
}

// call calls an MCP tool through the handler and returns its structuredContent.
func call(t *testing.T, h func(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error),
	tool string, args map[string]any) map[string]any {
	t.Helper()
	req, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": map[string]any{"name": tool, "arguments": args}})
	code, _, b := invoke(t, h, "POST", "/mcp", string(req), map[string]string{
		"content-type": "application/json", "accept": "application/json, text/event-stream", "authorization": "Bearer " + token})
	if code != http.StatusOK {
		t.Fatalf("%s: HTTP %d %s", tool, code, b)
	}
	var resp struct {
		Result struct {
			IsError           bool           `json:"isError"`
			StructuredContent map[string]any `json:"structuredContent"`
		} `json:"result"`
	}
	if err := json.Unmarshal(b, &resp); err != nil {
		t.Fatalf("%s: %v: %s", tool, err, b)
	}
	if resp.Result.IsError {
		t.Fatalf("%s: error %s", tool, b)
	}
	return resp.Result.StructuredContent
}

// The sandbox seller as Lambda runs it: a create answers with a task; the next poll, one step
// later, completes it, and the completed webhook is delivered before that poll answers (Lambda
// freezes the environment afterwards), signed with the key derived from the stack's secret and
// verifiable against the JWKS the function serves.
func TestSandboxSellerCompletesOnPollAndSignsItsWebhook(t *testing.T) {
	var mu sync.Mutex
	var got []*http.Request
	var bodies [][]byte
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got, bodies = append(got, r.Clone(context.Background())), append(bodies, b)
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer hook.Close()

	signer, jwks, err := WebhookKey([]byte(strings.Repeat("s", 64)))
	if err != nil {
		t.Fatal(err)
	}
	s, err := Seller(token, signer, jwks)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	h := Handler(s, SellerSettle(s))

	code, _, served := invoke(t, h, "GET", JWKSPath, "", nil)
	if code != http.StatusOK || string(served) != string(jwks) {
		t.Fatalf("GET %s: %d %s", JWKSPath, code, served)
	}
	// The same secret gives the same key in every environment of the function.
	if _, again, _ := WebhookKey([]byte(strings.Repeat("s", 64))); string(again) != string(jwks) {
		t.Error("the key derived from one secret differs between two derivations")
	}

	created := call(t, h, "create_media_buy", map[string]any{
		"idempotency_key": "smoke-key-0000000000000001",
		"account":         map[string]any{"account_id": "acct-1"}, "brand": map[string]any{"domain": "smoke.example"},
		"po_number": "SMOKE-1", "start_time": "2027-03-01T00:00:00Z", "end_time": "2027-03-31T23:59:59Z",
		"packages":                 []any{map[string]any{"product_id": "ctv-premium-us", "pricing_option_id": "cpm-fixed-usd", "budget": 100}},
		"push_notification_config": map[string]any{"url": hook.URL + "/v1/webhooks/adcp/op-1", "token": "tok-0123456789abcdef"},
	})
	task, _ := created["task_id"].(string)
	if created["status"] != "submitted" || task == "" {
		t.Fatalf("create answered %v, want a submitted task", created)
	}
	var last map[string]any
	for i := 0; i < 3 && (last == nil || last["status"] != "completed"); i++ {
		last = call(t, h, "get_task_status", map[string]any{"task_id": task})
		// The step's webhook was answered before the poll was: nothing is left to run
		// while Lambda freezes the environment.
		mu.Lock()
		n := len(bodies)
		mu.Unlock()
		if want := i + 1; n != want {
			t.Fatalf("after poll %d (status %v) %d webhooks were delivered, want %d", i+1, last["status"], n, want)
		}
	}
	if last["status"] != "completed" {
		t.Fatalf("the task is %v after three polls, want completed", last["status"])
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) == 0 {
		t.Fatal("no webhook was delivered before the poll that completed the task answered")
	}
	v, err := webhookauth.New(webhookauth.Config{Mode: webhookauth.ModeRFC9421, JWKS: served, AllowHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range got {
		r.URL.Scheme, r.URL.Host = "http", r.Host
		if _, err := v.VerifyHTTP(context.Background(), r, bodies[i]); err != nil {
			t.Errorf("webhook %d does not verify against the served JWKS: %v", i, err)
		}
	}
	if !strings.Contains(string(bodies[len(bodies)-1]), `"status":"completed"`) {
		t.Errorf("the last webhook is not the completion: %s", bodies[len(bodies)-1])
	}
}

func TestWebhookKeyRefusesAShortSecret(t *testing.T) {
	if _, _, err := WebhookKey([]byte("short")); err == nil {
		t.Error("a 5-byte secret made a signing key")
	}
}

func TestAFunctionURLEventWithoutAMethodIsRefused(t *testing.T) {
	h := Handler(http.NotFoundHandler(), nil)
	out, err := h(context.Background(), events.LambdaFunctionURLRequest{RawPath: "/mcp"})
	if err != nil || out.StatusCode != http.StatusBadRequest {
		t.Errorf("answer %d %v, want 400", out.StatusCode, err)
	}
	out, _ = h(context.Background(), events.LambdaFunctionURLRequest{RawPath: "/mcp", Body: "%%%", IsBase64Encoded: true,
		RequestContext: events.LambdaFunctionURLRequestContext{HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: "POST"}}})
	if out.StatusCode != http.StatusBadRequest {
		t.Errorf("a body that is not base64: %d, want 400", out.StatusCode)
	}
}
