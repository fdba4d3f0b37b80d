package adcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/adcpschemas"
)

func TestParseRegistry(t *testing.T) {
	good := `{"agents":[
	 {"id":"seller-a","role":"seller","mcp_url":"https://seller.example/mcp","credential_ref":"buyflow/seller-a",
	  "webhook":{"mode":"rfc9421","jwks_uri":"https://seller.example/.well-known/jwks.json"}},
	 {"id":"seller-b","role":"seller","mcp_url":"http://127.0.0.1:4000/mcp","credential_ref":"buyflow/seller-b",
	  "webhook":{"mode":"hmac","hmac_secret_ref":"buyflow/seller-b-hmac"}},
	 {"id":"seller-c","role":"seller","mcp_url":"https://c.example/mcp","credential_ref":"buyflow/c",
	  "webhook":{"mode":"rfc9421","jwks":{"keys":[{"kty":"OKP","crv":"Ed25519","x":"abc","kid":"k1"}]}}},
	 {"id":"gov","role":"governance","mcp_url":"https://gov.example/mcp","credential_ref":"buyflow/gov"}
	]}`
	r, err := ParseRegistry([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.IDs(), ","); got != "gov,seller-a,seller-b,seller-c" {
		t.Fatalf("ids %s", got)
	}
	a, err := r.Agent("seller-b")
	if err != nil || a.Webhook.Mode != WebhookHMAC || a.CredentialRef != "buyflow/seller-b" {
		t.Fatalf("agent %+v %v", a, err)
	}
	if _, err := r.Agent("seller-z"); !errors.Is(err, ErrUnknownAgent) {
		t.Fatalf("got %v", err)
	}

	tests := []struct {
		name string
		doc  string
		want []string // every fragment must appear in the one error
	}{
		{"all problems together", `{"agents":[
		  {"id":"","role":"buyer","mcp_url":"http://seller.example/mcp","credential_ref":""},
		  {"id":"s2","role":"seller","mcp_url":"https://s2.example/mcp","credential_ref":"x","webhook":{"mode":"hmac"}},
		  {"id":"s2","role":"seller","mcp_url":"ftp://s2.example","credential_ref":"x","webhook":{"mode":"rfc9421"}},
		  {"id":"s4","role":"seller","mcp_url":"https://user:pw@s4.example/mcp","credential_ref":"x","webhook":{"mode":"carrier-pigeon"}},
		  {"id":"s5","role":"seller","mcp_url":"https://s5.example/mcp","credential_ref":"x","webhook":{"mode":"rfc9421","jwks_uri":"https://k","jwks":{"keys":[{}]}}},
		  {"id":"s6","role":"seller","mcp_url":"https://s6.example/mcp","credential_ref":"x","webhook":{"mode":"bearer"}},
		  {"id":"s7","role":"seller","mcp_url":"https://s7.example/mcp","credential_ref":"x"}
		 ]}`,
			[]string{"agents[0] ()", "id must match", `role "buyer"`, "http is allowed only on loopback", "credential_ref is required",
				"webhook verification settings are required", "hmac needs hmac_secret_ref", "duplicate id", `scheme "ftp"`,
				"rfc9421 needs jwks_uri or jwks", "must not carry credentials", `mode "carrier-pigeon"`, "not both", "bearer needs bearer_secret_ref"}},
		{"unknown field", `{"agents":[{"id":"a","role":"seller","url":"https://x"}]}`, []string{"unknown field"}},
		{"empty", `{"agents":[]}`, []string{"no agents configured"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseRegistry([]byte(tt.doc))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestDecide(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want Decision
	}{
		{"nil", nil, DecisionNone},
		{"transient", &Error{Recovery: RecoveryTransient}, DecisionRetry},
		{"correctable", &Error{Recovery: RecoveryCorrectable}, DecisionFix},
		{"terminal", &Error{Recovery: RecoveryTerminal}, DecisionStop},
		{"unknown recovery value", &Error{Recovery: "deferred"}, DecisionStop},
		{"wrapped transient", errors.Join(errors.New("ctx"), &Error{Recovery: RecoveryTransient}), DecisionRetry},
		{"validation", &ValidationError{Pointer: "/x"}, DecisionFix},
		{"bare deadline", context.DeadlineExceeded, DecisionRetry},
		{"unknown agent", ErrUnknownAgent, DecisionStop},
		{"other", errors.New("boom"), DecisionStop},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Decide(tt.err); got != tt.want {
				t.Fatalf("Decide = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDefaultRecovery(t *testing.T) {
	tests := map[string]Recovery{
		"RATE_LIMITED": RecoveryTransient, "SERVICE_UNAVAILABLE": RecoveryTransient, "CONFLICT": RecoveryTransient,
		"IDEMPOTENCY_IN_FLIGHT": RecoveryTransient, "BUDGET_TOO_LOW": RecoveryCorrectable, "IDEMPOTENCY_CONFLICT": RecoveryCorrectable,
		"AUTH_INVALID": RecoveryTerminal, "ACCOUNT_MOVED": RecoveryCorrectable, "X_VENDOR": RecoveryTerminal,
	}
	for code, want := range tests {
		t.Run(code, func(t *testing.T) {
			if got := DefaultRecovery(code); got != want {
				t.Fatalf("got %s, want %s", got, want)
			}
		})
	}
}

// TestDefaultRecoveriesMatchSchema proves the generated table equals the
// schema's enumMetadata.
func TestDefaultRecoveriesMatchSchema(t *testing.T) {
	schemas, err := adcpschemas.FS()
	if err != nil {
		t.Fatal(err)
	}
	want, err := readErrorCodeMetadata(schemas)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != len(defaultRecovery) {
		t.Fatalf("table has %d codes, schema %d", len(defaultRecovery), len(want))
	}
	for code, r := range want {
		if defaultRecovery[code] != r {
			t.Errorf("%s: table %q, schema %q", code, defaultRecovery[code], r)
		}
	}
}

func TestNewIntent(t *testing.T) {
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	req := validCreate()
	req.IdempotencyKey = "fixed-key-0123456789"
	in := mustIntent(t, ToolCreateMediaBuy, req, at)
	if in.Key != "fixed-key-0123456789" || in.Created != at || in.Attempt != 0 {
		t.Fatalf("intent %+v", in)
	}
	again := mustIntent(t, ToolCreateMediaBuy, req, at)
	if string(again.Body) != string(in.Body) {
		t.Fatalf("same request, different bytes")
	}
	if !strings.Contains(string(in.Body), `"adcp_version":"3.1"`) || !strings.Contains(string(in.Body), `"adcp_major_version":3`) {
		t.Fatalf("body %s", in.Body)
	}
	if r := in.Retry(); r.Attempt != 1 || string(r.Body) != string(in.Body) || r.Key != in.Key {
		t.Fatalf("retry %+v", r)
	}
	fresh := mustIntent(t, ToolCreateMediaBuy, validCreate(), at)
	other := mustIntent(t, ToolCreateMediaBuy, validCreate(), at)
	if fresh.Key == other.Key {
		t.Fatal("two intents share a key")
	}
	if _, err := NewIntent(ToolCreateMediaBuy, []int{1}, at); err == nil {
		t.Fatal("non-object accepted")
	}
}

// readErrorCodeMetadata reads enumMetadata recoveries from the schema fs, to prove the generated table matches the schema file.
func readErrorCodeMetadata(fsys fs.FS) (map[string]Recovery, error) {
	b, err := fs.ReadFile(fsys, "enums/error-code.json")
	if err != nil {
		return nil, fmt.Errorf("adcp: read error-code enum: %w", err)
	}
	var doc struct {
		Enum     []string                   `json:"enum"`
		Metadata map[string]json.RawMessage `json:"enumMetadata"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("adcp: parse error-code enum: %w", err)
	}
	out := map[string]Recovery{}
	for _, code := range doc.Enum {
		var m struct {
			Recovery string `json:"recovery"`
		}
		if err := json.Unmarshal(doc.Metadata[code], &m); err != nil {
			return nil, fmt.Errorf("adcp: error-code %s metadata: %w", code, err)
		}
		out[code] = Recovery(m.Recovery)
	}
	return out, nil
}

// TestAuthConfig: an agent's auth settings are checked with the rest of the registry, every
// problem at once; absent, the agent keeps its static bearer token.
func TestAuthConfig(t *testing.T) {
	agent := func(auth string) string {
		return `{"agents":[{"id":"s1","role":"seller","mcp_url":"https://s1.example/mcp","credential_ref":"buyflow/s1",` +
			auth + `"webhook":{"mode":"hmac","hmac_secret_ref":"buyflow/s1-hmac"}}]}`
	}
	for _, ok := range []string{``, `"auth":{"mode":"bearer"},`, `"auth":{"mode":"oauth2_client_credentials","client_id":"c"},`,
		`"auth":{"mode":"oauth2_client_credentials","client_id":"c","token_url":"https://as.example/token","scopes":["adcp:buy"],"resource":"https://s1.example/mcp","audience":"s1"},`} {
		r, err := ParseRegistry([]byte(agent(ok)))
		if err != nil {
			t.Fatalf("%s: %v", ok, err)
		}
		a, _ := r.Agent("s1")
		if a.OAuth() != strings.Contains(ok, "oauth2") {
			t.Errorf("%s: OAuth() = %v", ok, a.OAuth())
		}
	}
	tests := []struct{ auth, want string }{
		{`"auth":{"mode":"oauth2_client_credentials"},`, "needs client_id"},
		{`"auth":{"mode":"oauth2_client_credentials","client_id":"c","token_url":"http://as.example/token"},`, "token_url: http is allowed only on loopback"},
		{`"auth":{"mode":"oauth2_client_credentials","client_id":"c","resource":"seller"},`, "resource must be an absolute URI"},
		{`"auth":{"mode":"oauth2_client_credentials","client_id":"c","scopes":["a b"]},`, `scope "a b" must be one non-empty token`},
		{`"auth":{"mode":"bearer","client_id":"c"},`, "bearer takes no client_id"},
		{`"auth":{"mode":"saml"},`, `mode "saml" is not bearer or oauth2_client_credentials`},
		{`"auth":{"mode":"bearer","client_secret":"x"},`, "unknown field"},
	}
	for _, tc := range tests {
		_, err := ParseRegistry([]byte(agent(tc.auth)))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.auth, err, tc.want)
		}
	}
}
