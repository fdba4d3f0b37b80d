package adcp

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
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
	"github.com/buyflow/buyflow/internal/reqsign"
	"github.com/buyflow/buyflow/internal/webhookauth"
)

// capsSigning is an agent that requires create_media_buy signed, with content-digest.
const capsSigning = `{"adcp":{"major_versions":[3],"supported_versions":["3.0","3.1"],"idempotency":{"supported":true,"replay_ttl_seconds":86400}},"supported_protocols":["media_buy"],"request_signing":{"supported":true,"covers_content_digest":"required","required_for":["create_media_buy"]}}`

// seen is one POST that reached a signingFront.
type seen struct {
	url    string
	header http.Header
	body   []byte
}

// signingFront stands before a fake agent as a verifying seller would: it records every POST
// and answers the ones refuse picks with a 401 Signature challenge.
type signingFront struct {
	*fakeAgent
	front *httptest.Server

	mu     sync.Mutex
	posts  []seen
	refuse func(s seen) string // request_signature_* code to answer with, "" to pass
}

func newSigningFront(t *testing.T, tools map[string]toolFunc) *signingFront {
	t.Helper()
	f := &signingFront{fakeAgent: newFakeAgent(t, tools)}
	target, _ := url.Parse(f.srv.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	f.front = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		s := seen{url: f.front.URL + r.URL.RequestURI(), header: r.Header.Clone(), body: body}
		f.mu.Lock()
		if r.Method == http.MethodPost {
			f.posts = append(f.posts, s)
		}
		refuse := f.refuse
		f.mu.Unlock()
		if refuse != nil && r.Method == http.MethodPost {
			if code := refuse(s); code != "" {
				w.Header().Set("WWW-Authenticate", `Signature error="`+code+`"`)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = io.WriteString(w, `{"error":"`+code+`","message":"refused"}`)
				return
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(f.front.Close)
	return f
}

func (f *signingFront) URL() string { return f.front.URL + "/mcp" }

func (f *signingFront) setRefuse(fn func(seen) string) { f.mu.Lock(); f.refuse = fn; f.mu.Unlock() }

// postsOf returns the POSTs whose JSON-RPC body calls tool (or has method tool).
func (f *signingFront) postsOf(tool string) []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []seen
	for _, s := range f.posts {
		if bytes.Contains(s.body, []byte(`"name":"`+tool+`"`)) || bytes.Contains(s.body, []byte(`"method":"`+tool+`"`)) {
			out = append(out, s)
		}
	}
	return out
}

func testSigner(clock *clocktest.Clock) (*reqsign.Signer, ed25519.PublicKey) {
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32))
	return &reqsign.Signer{KeyID: "buyflow-test-1", Key: priv, Now: clock.Now}, priv.Public().(ed25519.PublicKey)
}

func newSigningClient(t *testing.T, clock *clocktest.Clock, mcpURL string, signer *reqsign.Signer, signAll bool) *Client {
	t.Helper()
	reg, err := NewRegistry(RegistryConfig{Agents: []Agent{{ID: "s1", Role: RoleSeller, MCPURL: mcpURL, CredentialRef: "secret/s1",
		SignRequests: signAll, Webhook: &WebhookConfig{Mode: WebhookHMAC, HMACSecretRef: "hmac/s1"}}}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(Options{Registry: reg, Validator: testValidator(t), Now: clock.Now, CallTimeout: 20 * time.Second,
		Credentials:   CredentialsFunc(func(context.Context, string) (string, error) { return testToken, nil }),
		RequestSigner: signer})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// checkSigned verifies s as the agent would: the request-signing tag, the profile's
// encoding, a Content-Digest of the bytes received, and the signature over the base rebuilt
// from what arrived.
func checkSigned(t *testing.T, s seen, pub ed25519.PublicKey, enc *base64.Encoding) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.url, bytes.NewReader(s.body))
	req.Header = s.header
	in, err := webhookauth.ParseSignatureInput(s.header.Get("Signature-Input"))
	if err != nil || len(in) != 1 || in[0].Tag != reqsign.Tag || in[0].KeyID != "buyflow-test-1" {
		t.Fatalf("Signature-Input %q (%v)", s.header.Get("Signature-Input"), err)
	}
	sum := sha256.Sum256(s.body)
	if want := "sha-256=:" + enc.EncodeToString(sum[:]) + ":"; s.header.Get("Content-Digest") != want {
		t.Errorf("Content-Digest %q, want %q over the bytes received", s.header.Get("Content-Digest"), want)
	}
	base, err := webhookauth.SignatureBase(req, "sig1")
	if err != nil {
		t.Fatal(err)
	}
	sig, err := enc.Strict().DecodeString(strings.TrimSuffix(strings.TrimPrefix(s.header.Get("Signature"), "sig1=:"), ":"))
	if err != nil {
		t.Fatalf("Signature %q: %v", s.header.Get("Signature"), err)
	}
	if !ed25519.Verify(pub, base, sig) {
		t.Errorf("signature does not verify over\n%s", base)
	}
}

// TestSignsTheOperationsTheAgentRequires: create_media_buy, which the agent lists in
// required_for, goes out signed (3.1 profile: base64url) over the exact bytes sent; the
// capabilities read and the session's initialize, which it does not list, go out unsigned.
func TestSignsTheOperationsTheAgentRequires(t *testing.T) {
	clock := clocktest.At(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	agent := newSigningFront(t, map[string]toolFunc{ToolGetAdCPCapabilities: capsTool(capsSigning),
		ToolCreateMediaBuy: func(json.RawMessage) (*mcp.CallToolResult, error) { return structured(successBody) }})
	agent.setRefuse(func(s seen) string {
		if bytes.Contains(s.body, []byte(`"create_media_buy"`)) && s.header.Get("Signature") == "" {
			return "request_signature_required"
		}
		return ""
	})
	signer, pub := testSigner(clock)
	c := newSigningClient(t, clock, agent.URL(), signer, false)
	if _, err := c.CreateMediaBuy(context.Background(), "s1", mustIntent(t, ToolCreateMediaBuy, validCreate(), clock.Now())); err != nil {
		t.Fatal(err)
	}
	creates := agent.postsOf(ToolCreateMediaBuy)
	if len(creates) != 1 {
		t.Fatalf("%d creates reached the agent, want 1", len(creates))
	}
	checkSigned(t, creates[0], pub, base64.RawURLEncoding)
	for _, tool := range []string{ToolGetAdCPCapabilities, "initialize"} {
		for _, s := range agent.postsOf(tool) {
			if s.header.Get("Signature") != "" {
				t.Errorf("%s went out signed; the agent requires only create_media_buy", tool)
			}
		}
	}
}

// TestSignAllUses32ProfileForA32Agent: with the operator's sign_requests flag every request is
// signed, and an agent spoken to in 3.2 gets the 3.2 profile's padded standard base64.
func TestSignAllUses32ProfileForA32Agent(t *testing.T) {
	clock := clocktest.At(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	agent := newSigningFront(t, map[string]toolFunc{ToolGetAdCPCapabilities: capsTool(
		`{"adcp":{"major_versions":[3],"supported_versions":["3.2"],"idempotency":{"supported":true,"replay_ttl_seconds":86400}},"supported_protocols":["media_buy"]}`)})
	signer, pub := testSigner(clock)
	c := newSigningClient(t, clock, agent.URL(), signer, true)
	if _, err := c.Capabilities(context.Background(), "s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Tools(context.Background(), "s1"); err != nil {
		t.Fatal(err)
	}
	lists := agent.postsOf("tools/list")
	if len(lists) != 1 {
		t.Fatalf("%d tools/list POSTs, want 1", len(lists))
	}
	checkSigned(t, lists[0], pub, base64.StdEncoding)
}

// TestRefusesAtSubmitWithoutAKey: an agent that requires create_media_buy signed, while
// buyflow has no key, gets nothing: the refusal names the agent and says why.
func TestRefusesRequiredSigningWithoutAKey(t *testing.T) {
	clock := clocktest.At(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	agent := newSigningFront(t, map[string]toolFunc{ToolGetAdCPCapabilities: capsTool(capsSigning),
		ToolCreateMediaBuy: func(json.RawMessage) (*mcp.CallToolResult, error) { return structured(successBody) }})
	c := newSigningClient(t, clock, agent.URL(), nil, false)
	_, err := c.CreateMediaBuy(context.Background(), "s1", mustIntent(t, ToolCreateMediaBuy, validCreate(), clock.Now()))
	var ae *Error
	if !errors.As(err, &ae) || ae.Code != CodeSignatureRequired || !NotSent(err) || Decide(err) == DecisionRetry {
		t.Fatalf("err = %v, want a terminal %s before sending", err, CodeSignatureRequired)
	}
	if !strings.Contains(ae.Message, "s1") || !strings.Contains(ae.Message, "request-signing key") {
		t.Errorf("message %q does not name the agent and the missing key", ae.Message)
	}
	if n := len(agent.postsOf(ToolCreateMediaBuy)); n != 0 {
		t.Fatalf("%d creates reached the agent", n)
	}
}

// TestSignatureAnswersHaveTheirOwnCodes: a 401 with a Signature challenge is about signing,
// not the credential: request_signature_required unsigned, and a signature the agent
// refuses (a key it no longer accepts) names the key.
func TestSignatureAnswersHaveTheirOwnCodes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		signer    bool
		answer    string
		code      string
		mentioned []string
	}{
		{"unsigned, required", false, "request_signature_required", CodeSignatureRequired, []string{"signed request", "no request-signing key"}},
		{"signed, key refused", true, "request_signature_key_unknown", CodeSignatureRejected, []string{"request_signature_key_unknown", "buyflow-test-1", "JWKS"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := clocktest.At(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
			// The capabilities do not list create_media_buy: the agent's verifier is ahead of them.
			agent := newSigningFront(t, map[string]toolFunc{ToolGetAdCPCapabilities: capsTool(capsWithReplay),
				ToolCreateMediaBuy: func(json.RawMessage) (*mcp.CallToolResult, error) { return structured(successBody) }})
			agent.setRefuse(func(s seen) string {
				if bytes.Contains(s.body, []byte(`"create_media_buy"`)) {
					return tc.answer
				}
				return ""
			})
			var signer *reqsign.Signer
			if tc.signer {
				signer, _ = testSigner(clock)
			}
			c := newSigningClient(t, clock, agent.URL(), signer, tc.signer)
			_, err := c.CreateMediaBuy(context.Background(), "s1", mustIntent(t, ToolCreateMediaBuy, validCreate(), clock.Now()))
			var ae *Error
			if !errors.As(err, &ae) || ae.Code != tc.code || ae.HTTPStatus != 401 || Decide(err) == DecisionRetry {
				t.Fatalf("err = %#v, want terminal %s", err, tc.code)
			}
			for _, m := range tc.mentioned {
				if !strings.Contains(ae.Message, m) {
					t.Errorf("message %q lacks %q", ae.Message, m)
				}
			}
			if strings.Contains(ae.Error(), "credential rejected") {
				t.Errorf("%q still blames the credential", ae.Error())
			}
		})
	}
}

// TestOAuthAgentSignatureChallengeIsNotATokenProblem: at an OAuth agent, a 401 whose challenge
// is a Signature one is about signing: buyflow gets no new token and does not resend, and the
// error says signing.
func TestOAuthAgentSignatureChallengeIsNotATokenProblem(t *testing.T) {
	as := newAuthServer(t)
	agent := newProtectedAgent(t, as, oauthTools())
	agent.setFault(func(tool string) (int, http.Header, string, bool) {
		if tool != ToolCreateMediaBuy {
			return 0, nil, "", false
		}
		return http.StatusUnauthorized, http.Header{"Www-Authenticate": {`Signature error="request_signature_required"`}}, `{"error":"request_signature_required"}`, true
	})
	clock := clocktest.At(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	c := newOAuthClient(t, clock, agent.URL(), AuthConfig{})
	_, err := c.CreateMediaBuy(context.Background(), "s1", mustIntent(t, ToolCreateMediaBuy, validCreate(), clock.Now()))
	var ae *Error
	if !errors.As(err, &ae) || ae.Code != CodeSignatureRequired || !strings.Contains(ae.Message, "signed request") {
		t.Fatalf("err = %v, want %s", err, CodeSignatureRequired)
	}
	if n := len(agent.Creates()); n != 1 {
		t.Errorf("the create went out %d times, want once", n)
	}
	if g := as.Grants(); len(g) != 1 {
		t.Errorf("%d token requests, want the first one only", len(g))
	}
}
