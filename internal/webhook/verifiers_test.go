package webhook_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/webhook"
	"github.com/buyflow/buyflow/internal/webhookauth"
)

// secretsFunc is a function-typed fake of webhook.Secrets.
type secretsFunc func(ctx context.Context, name string) ([]byte, error)

func (f secretsFunc) Get(ctx context.Context, name string) ([]byte, error) { return f(ctx, name) }

func TestBuildVerifiers(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	jwk, err := webhookauth.PublicJWK("k1", key)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := adcp.NewRegistry(adcp.RegistryConfig{Agents: []adcp.Agent{
		{ID: "s9421", Role: adcp.RoleSeller, MCPURL: "https://a.example/mcp", CredentialRef: "p/a",
			Webhook: &adcp.WebhookConfig{Mode: adcp.WebhookRFC9421, JWKS: []byte(`{"keys":[` + string(jwk) + `]}`)}},
		{ID: "shmac", Role: adcp.RoleSeller, MCPURL: "https://b.example/mcp", CredentialRef: "p/b",
			Webhook: &adcp.WebhookConfig{Mode: adcp.WebhookHMAC, HMACSecretRef: "p/b-webhook"}},
		{ID: "gov", Role: adcp.RoleGovernance, MCPURL: "https://g.example/mcp", CredentialRef: "p/g"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	current, previous := "current-secret-0123456789abcdef0123", "previous-secret-0123456789abcdef012"
	reads := 0
	sec := secretsFunc(func(_ context.Context, name string) ([]byte, error) {
		reads++
		if name != "p/b-webhook" {
			return nil, errors.New("no such secret")
		}
		return []byte(`{"current":"` + current + `","previous":"` + previous + `"}`), nil
	})
	now := time.Date(2099, 1, 1, 12, 0, 0, 0, time.UTC)
	vs, err := webhook.BuildVerifiers(context.Background(), reg, sec, webhook.VerifierOptions{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 2 || vs["gov"] != nil || reads != 1 {
		t.Fatalf("verifiers %v after %d secret reads, want s9421 and shmac after 1", vs, reads)
	}
	// Both the current and the previous secret verify during a rotation.
	for _, s := range []string{current, previous} {
		body := []byte(`{"a":1}`)
		r, _ := http.NewRequest(http.MethodPost, "https://api.example.com/v1/webhooks/adcp/op-1", nil)
		r.Header.Set("Content-Type", "application/json")
		if err := (&webhookauth.HMACSigner{Secret: []byte(s), Now: func() time.Time { return now }}).Sign(r, body); err != nil {
			t.Fatal(err)
		}
		if _, err := vs["shmac"].VerifyDeferred(context.Background(), webhookauth.Request{Method: http.MethodPost, URL: r.URL.String(), Header: r.Header, Body: body}); err != nil {
			t.Fatalf("secret %.8s…: %v", s, err)
		}
	}
	// A missing secret is reported with its name, never a value.
	bad := secretsFunc(func(context.Context, string) ([]byte, error) { return nil, errors.New("access denied") })
	if _, err := webhook.BuildVerifiers(context.Background(), reg, bad, webhook.VerifierOptions{}); err == nil || !strings.Contains(err.Error(), "p/b-webhook") {
		t.Fatalf("err = %v", err)
	}
}
