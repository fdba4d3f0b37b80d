package adcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/buyflow/buyflow/internal/clocktest"
)

const (
	oauthClientID     = "buyflow-client"
	oauthClientSecret = "cs-very-secret-0123456789"
)

// authServer is an OAuth authorization server on httptest: RFC 8414 metadata and a client
// credentials token endpoint whose answer the test picks (mode).
type authServer struct {
	srv     *httptest.Server
	release chan struct{} // closed at cleanup: frees a hanging token request

	mu       sync.Mutex
	mode     string // "", "hang", "500", "html", "other_audience", "invalid_client"
	grants   []url.Values
	issued   []string
	valid    map[string]bool // tokens the protected agent accepts
	lifetime int
}

func newAuthServer(t *testing.T) *authServer {
	t.Helper()
	a := &authServer{release: make(chan struct{}), valid: map[string]bool{}, lifetime: 60}
	a.srv = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.srv.Close)
	t.Cleanup(func() { close(a.release) }) // runs first: a hanging handler ends before Close waits for it
	return a
}

func (a *authServer) serve(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/.well-known/oauth-authorization-server":
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": a.srv.URL, "token_endpoint": a.srv.URL + "/token",
			"grant_types_supported": []string{"client_credentials"}, "response_types_supported": []string{"token"}})
		return
	case "/token":
	default:
		http.NotFound(w, r)
		return
	}
	_ = r.ParseForm()
	form := r.PostForm
	if id, secret, ok := r.BasicAuth(); ok {
		form.Set("basic_client_id", id)
		form.Set("basic_client_secret", secret)
	}
	a.mu.Lock()
	a.grants = append(a.grants, form)
	mode, n := a.mode, len(a.grants)
	a.mu.Unlock()
	switch mode {
	case "hang":
		select {
		case <-r.Context().Done():
		case <-a.release:
		}
		return
	case "500":
		http.Error(w, "upstream down", http.StatusInternalServerError)
		return
	case "html":
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, "<html><body>Sign in to continue</body></html>")
		return
	case "invalid_client":
		// A hostile server that echoes the secret: it must not reach an error text.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = fmt.Fprintf(w, `{"error":"invalid_client","error_description":"unknown secret %s"}`, form.Get("basic_client_secret"))
		return
	}
	tok := fmt.Sprintf("at-%d-%s", n, strings.Repeat("x", 8))
	a.mu.Lock()
	a.issued = append(a.issued, tok)
	// A token is good at the agent only when it was asked for that agent (RFC 8707) by the
	// right client; "other_audience" mints one for another resource whatever was asked.
	a.valid[tok] = mode != "other_audience" && form.Get("resource") != "" &&
		form.Get("basic_client_id") == oauthClientID && form.Get("basic_client_secret") == oauthClientSecret
	lifetime := a.lifetime
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": lifetime})
}

func (a *authServer) setMode(m string) { a.mu.Lock(); a.mode = m; a.mu.Unlock() }

func (a *authServer) Grants() []url.Values {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]url.Values(nil), a.grants...)
}

// revoke makes every token issued so far invalid at the agent (a token that expired early).
func (a *authServer) revoke() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for k := range a.valid {
		a.valid[k] = false
	}
}

// protectedAgent puts an OAuth resource server in front of a fake agent: RFC 9728 metadata
// and a bearer check whose 401 names the metadata, as the MCP authorization spec has it.
type protectedAgent struct {
	*fakeAgent
	front *httptest.Server
	as    *authServer

	mu       sync.Mutex
	metaHits int
	refused  int
	creates  [][]byte // raw bodies of every create_media_buy POST that reached the front
	// expireAtCreate revokes every token when the first create_media_buy arrives.
	expireAtCreate bool
}

func newProtectedAgent(t *testing.T, as *authServer, tools map[string]toolFunc) *protectedAgent {
	t.Helper()
	p := &protectedAgent{fakeAgent: newFakeAgent(t, tools), as: as}
	target, _ := url.Parse(p.srv.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	p.front = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/.well-known/oauth-protected-resource/mcp" {
			p.mu.Lock()
			p.metaHits++
			p.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"resource": p.URL(), "authorization_servers": []string{as.srv.URL},
				"scopes_supported": []string{"adcp:buy", "adcp:read"}})
			return
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"name":"create_media_buy"`)) {
			p.mu.Lock()
			p.creates = append(p.creates, body)
			expire := p.expireAtCreate
			p.expireAtCreate = false
			p.mu.Unlock()
			if expire {
				as.revoke()
			}
		}
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		as.mu.Lock()
		ok := as.valid[tok]
		as.mu.Unlock()
		if !ok {
			p.mu.Lock()
			p.refused++
			p.mu.Unlock()
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm="mcp", error="invalid_token", error_description="token missing or expired", resource_metadata="%s/.well-known/oauth-protected-resource/mcp", scope="adcp:buy"`, p.front.URL))
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(p.front.Close)
	return p
}

func (p *protectedAgent) URL() string { return p.front.URL + "/mcp" }

// counts returns how many requests the front refused and how often it served its metadata.
func (p *protectedAgent) counts() (refused, metaHits int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refused, p.metaHits
}

func (p *protectedAgent) Creates() [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([][]byte(nil), p.creates...)
}

// newOAuthClient returns a client for one OAuth seller "s1" at mcpURL.
func newOAuthClient(t *testing.T, clock *clocktest.Clock, mcpURL string, cfg AuthConfig) *Client {
	t.Helper()
	cfg.Mode, cfg.ClientID = AuthOAuth2ClientCredentials, oauthClientID
	reg, err := NewRegistry(RegistryConfig{Agents: []Agent{{ID: "s1", Role: RoleSeller, MCPURL: mcpURL, CredentialRef: "secret/s1",
		Auth: &cfg, Webhook: &WebhookConfig{Mode: WebhookHMAC, HMACSecretRef: "hmac/s1"}}}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(Options{
		Registry: reg, Validator: testValidator(t), Now: clock.Now, CallTimeout: 20 * time.Second, TokenTimeout: 300 * time.Millisecond,
		Credentials: CredentialsFunc(func(_ context.Context, ref string) (string, error) {
			if ref != "secret/s1" {
				return "", fmt.Errorf("no secret %s", ref)
			}
			return oauthClientSecret, nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func oauthTools() map[string]toolFunc {
	return map[string]toolFunc{
		ToolGetAdCPCapabilities: capsTool(capsWithReplay),
		ToolCreateMediaBuy:      func(json.RawMessage) (*mcp.CallToolResult, error) { return structured(successBody) },
	}
}

// TestOAuthDiscoversThenCachesUntilShortlyBeforeExpiry: the agent's 401 leads to its
// protected-resource metadata, the authorization server's metadata and one client credentials
// grant (basic auth, the challenge's scope, the RFC 8707 resource); the token serves every
// call until 10 s before its 60 s run out, and the next call gets a new one before it sends.
func TestOAuthDiscoversThenCachesUntilShortlyBeforeExpiry(t *testing.T) {
	as := newAuthServer(t)
	agent := newProtectedAgent(t, as, oauthTools())
	clock := clocktest.At(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	c := newOAuthClient(t, clock, agent.URL(), AuthConfig{})

	in := mustIntent(t, ToolCreateMediaBuy, validCreate(), clock.Now())
	if _, err := c.CreateMediaBuy(context.Background(), "s1", in); err != nil {
		t.Fatal(err)
	}
	g := as.Grants()
	if len(g) != 1 {
		t.Fatalf("%d token requests, want 1", len(g))
	}
	want := url.Values{"grant_type": {"client_credentials"}, "scope": {"adcp:buy"}, "resource": {agent.URL()},
		"basic_client_id": {oauthClientID}, "basic_client_secret": {oauthClientSecret}}
	for k, v := range want {
		if g[0].Get(k) != v[0] {
			t.Errorf("token request %s = %q, want %q", k, g[0].Get(k), v[0])
		}
	}
	if refused, meta := agent.counts(); refused != 1 || meta != 1 {
		t.Fatalf("agent refused %d requests and served its metadata %d times, want 1 and 1", refused, meta)
	}
	if n := len(agent.Calls(ToolCreateMediaBuy)); n != 1 {
		t.Fatalf("%d creates, want 1", n)
	}

	clock.Advance(49 * time.Second) // 11 s left: still good
	if _, err := c.Tools(context.Background(), "s1"); err != nil {
		t.Fatal(err)
	}
	if n := len(as.Grants()); n != 1 {
		t.Fatalf("%d token requests with 11 s left on the token, want 1", n)
	}
	clock.Advance(2 * time.Second) // 9 s left: replaced before the next call sends
	c.mu.Lock()
	delete(c.tools, "s1")
	c.mu.Unlock()
	if _, err := c.Tools(context.Background(), "s1"); err != nil {
		t.Fatal(err)
	}
	if n := len(as.Grants()); n != 2 {
		t.Fatalf("%d token requests after the token came within 10 s of expiry, want 2", n)
	}
	if refused, meta := agent.counts(); refused != 1 || meta != 1 {
		t.Fatalf("agent refused %d requests, metadata read %d times: the renewal should not wait for a 401", refused, meta)
	}
}

// TestOAuthTokenExpiredMidBuyRefreshesOnceAndResendsTheSameBytes: a token the agent stops
// accepting before its stated expiry is replaced once on the 401, and the create goes out
// again byte for byte (same idempotency key); the agent runs it once.
func TestOAuthTokenExpiredMidBuyRefreshesOnceAndResendsTheSameBytes(t *testing.T) {
	as := newAuthServer(t)
	agent := newProtectedAgent(t, as, oauthTools())
	clock := clocktest.At(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	c := newOAuthClient(t, clock, agent.URL(), AuthConfig{})
	if _, err := c.Capabilities(context.Background(), "s1"); err != nil {
		t.Fatal(err)
	}
	// The token dies on the agent's side with the session's initialize already through: the
	// create's own POST meets the 401.
	agent.mu.Lock()
	agent.expireAtCreate = true
	agent.mu.Unlock()
	in := mustIntent(t, ToolCreateMediaBuy, validCreate(), clock.Now())
	r, err := c.CreateMediaBuy(context.Background(), "s1", in)
	if err != nil {
		t.Fatal(err)
	}
	if r.MediaBuyID != "mb_1" {
		t.Fatalf("result %+v", r)
	}
	if n := len(as.Grants()); n != 2 {
		t.Fatalf("%d token requests, want 2 (the first, and one refresh)", n)
	}
	creates := agent.Creates()
	if len(creates) != 2 || !bytes.Equal(creates[0], creates[1]) {
		t.Fatalf("create POSTs at the agent: %d, identical %v; want the refused one resent byte for byte", len(creates), len(creates) == 2 && bytes.Equal(creates[0], creates[1]))
	}
	calls := agent.Calls(ToolCreateMediaBuy)
	if len(calls) != 1 || string(calls[0].Args) != string(in.Body) || argKey(t, calls[0].Args) != in.Key {
		t.Fatalf("the agent ran %d creates, want 1 with the intent's bytes and key", len(calls))
	}
}

// TestOAuthHostileTokenEndpoints: each way an authorization server can fail ends the call with
// an *Error that says what to do, nothing reaches the agent's tool, and what the circuit
// breaker must count (a transient failure that is not buyflow's own) is transient. No error
// text carries the client secret or a token.
func TestOAuthHostileTokenEndpoints(t *testing.T) {
	tests := []struct {
		mode      string
		code      string
		decision  Decision
		message   string
		tokenReqs int
	}{
		{"hang", CodeTokenEndpointFailed, DecisionRetry, "did not answer within 300ms", 1},
		{"500", CodeTokenEndpointFailed, DecisionRetry, "answered HTTP 500", 1},
		{"html", CodeTokenEndpointFailed, DecisionRetry, "answered something that is not an OAuth token response", 1},
		{"invalid_client", CodeOAuthClientRefused, DecisionStop, `refused client "buyflow-client": invalid_client unknown secret [redacted]; check the agent's auth.client_id`, 1},
		// The agent refuses the token minted for another audience; one fresh token is all a
		// request gets.
		{"other_audience", CodeOAuthTokenRejected, DecisionStop, "refused a token from", 1},
	}
	for _, tc := range tests {
		t.Run(tc.mode, func(t *testing.T) {
			as := newAuthServer(t)
			as.setMode(tc.mode)
			agent := newProtectedAgent(t, as, oauthTools())
			clock := clocktest.At(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
			c := newOAuthClient(t, clock, agent.URL(), AuthConfig{})
			in := mustIntent(t, ToolCreateMediaBuy, validCreate(), clock.Now())
			_, err := c.CreateMediaBuy(context.Background(), "s1", in)
			var ae *Error
			if !errors.As(err, &ae) || ae.Code != tc.code || Decide(err) != tc.decision || !strings.Contains(ae.Error(), tc.message) {
				t.Fatalf("got %v (decision %v), want %s (%v) saying %q", err, Decide(err), tc.code, tc.decision, tc.message)
			}
			if ae.Agent != "s1" || ae.Tool == "" {
				t.Errorf("error names agent %q tool %q", ae.Agent, ae.Tool)
			}
			if counted := Decide(err) == DecisionRetry && ae.Kind != KindLocal; counted != (tc.decision == DecisionRetry) {
				t.Errorf("the breaker would count it: %v", counted)
			}
			if n := len(as.Grants()); n != tc.tokenReqs {
				t.Errorf("%d token requests, want %d", n, tc.tokenReqs)
			}
			if n := len(agent.Calls("")); n != 0 {
				t.Errorf("the agent ran %d tools, want none", n)
			}
			assertNoSecrets(t, as, err.Error())
		})
	}
}

// TestOAuthConfiguredTokenURLSkipsDiscovery: with token_url, scopes and resource set, the
// first request already carries a token and the agent's metadata is never read.
func TestOAuthConfiguredTokenURLSkipsDiscovery(t *testing.T) {
	as := newAuthServer(t)
	agent := newProtectedAgent(t, as, oauthTools())
	clock := clocktest.At(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	c := newOAuthClient(t, clock, agent.URL(), AuthConfig{TokenURL: as.srv.URL + "/token", Scopes: []string{"adcp:buy", "adcp:read"},
		Resource: "https://seller.example/mcp", Audience: "seller-api"})
	if _, err := c.Capabilities(context.Background(), "s1"); err != nil {
		t.Fatal(err)
	}
	g := as.Grants()
	if len(g) != 1 || g[0].Get("scope") != "adcp:buy adcp:read" || g[0].Get("resource") != "https://seller.example/mcp" || g[0].Get("audience") != "seller-api" {
		t.Fatalf("token requests %v", g)
	}
	if refused, meta := agent.counts(); refused != 0 || meta != 0 {
		t.Fatalf("agent refused %d requests, metadata read %d times, want none", refused, meta)
	}
}

// TestOAuthNeverSendsTheClientSecretToTheAgent: the agent sees tokens only, never the secret
// (an OAuth agent is no bearer agent: the modes never fall back).
func TestOAuthNeverSendsTheClientSecretToTheAgent(t *testing.T) {
	as := newAuthServer(t)
	agent := newProtectedAgent(t, as, oauthTools())
	clock := clocktest.At(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	c := newOAuthClient(t, clock, agent.URL(), AuthConfig{})
	if _, err := c.Capabilities(context.Background(), "s1"); err != nil {
		t.Fatal(err)
	}
	agent.fakeAgent.mu.Lock()
	defer agent.fakeAgent.mu.Unlock()
	for _, h := range agent.headers {
		if got := h.Get("Authorization"); !strings.HasPrefix(got, "Bearer at-") {
			t.Fatalf("the agent got Authorization %q", got)
		}
	}
}

// assertNoSecrets fails when text carries the client secret or a token as issued.
func assertNoSecrets(t *testing.T, as *authServer, text string) {
	t.Helper()
	as.mu.Lock()
	defer as.mu.Unlock()
	for _, s := range append([]string{oauthClientSecret}, as.issued...) {
		if strings.Contains(text, s) {
			t.Fatalf("%q leaks a secret or token: %s", s, text)
		}
	}
}

// TestOAuthDiscoveryStaysOffLoopbackForRemoteAgents: an https agent whose 401 points buyflow at
// http://127.0.0.1 (the Lambda runtime API lives there) is not followed.
func TestOAuthDiscoveryStaysOffLoopbackForRemoteAgents(t *testing.T) {
	var hits int
	var mu sync.Mutex
	local := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		hits++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{}`)
	}))
	t.Cleanup(local.Close)
	agent := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+local.URL+`/2018-06-01/runtime/invocation/next"`)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	}))
	t.Cleanup(agent.Close)
	mcpURL := agent.URL + "/mcp" // https: not a loopback http agent, whatever its address
	c := newOAuthClient(t, clocktest.At(time.Now()), mcpURL, AuthConfig{})
	c.opts.HTTPClient = agent.Client()
	_, err := c.Capabilities(context.Background(), "s1")
	var ae *Error
	if !errors.As(err, &ae) || ae.Code != CodeTokenEndpointFailed {
		t.Fatalf("got %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if hits != 0 {
		t.Fatalf("buyflow followed the agent to loopback http %d times", hits)
	}
}

// TestOAuthTokenEndpointRefusesConnections: a token endpoint nobody listens on is a transient
// failure of the agent that names the endpoint, with nothing sent to the agent.
func TestOAuthTokenEndpointRefusesConnections(t *testing.T) {
	as := newAuthServer(t)
	agent := newProtectedAgent(t, as, oauthTools())
	gone := httptest.NewServer(http.NotFoundHandler())
	closedURL := gone.URL + "/token"
	gone.Close()
	c := newOAuthClient(t, clocktest.At(time.Now()), agent.URL(), AuthConfig{TokenURL: closedURL})
	_, err := c.Capabilities(context.Background(), "s1")
	var ae *Error
	if !errors.As(err, &ae) || ae.Code != CodeTokenEndpointFailed || Decide(err) != DecisionRetry || ae.Kind == KindLocal ||
		!strings.Contains(ae.Message, closedURL+" of agent s1 could not be reached") {
		t.Fatalf("got %v", err)
	}
	if refused, _ := agent.counts(); refused != 0 || agent.Requests() != 0 {
		t.Fatalf("the agent refused %d requests and served %d, want none", refused, agent.Requests())
	}
}
