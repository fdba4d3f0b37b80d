package webhook_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/clocktest"
	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/metrics/metricstest"
	"github.com/buyflow/buyflow/internal/registry"
	"github.com/buyflow/buyflow/internal/webhook"
	"github.com/buyflow/buyflow/internal/webhookauth"
	"github.com/buyflow/buyflow/internal/workflow"
)

// countingLister counts the registry loads.
type countingLister struct {
	registry.Source
	loads atomic.Int32
}

func (c *countingLister) Documents(ctx context.Context) (map[string]string, error) {
	c.loads.Add(1)
	return c.Source.Documents(ctx)
}

// countingRegistry counts the receiver's registry lookups.
type countingRegistry struct {
	webhook.Registry
	lookups atomic.Int32
}

func (c *countingRegistry) Lookup(ctx context.Context, id string) (registry.Record, error) {
	c.lookups.Add(1)
	return c.Registry.Lookup(ctx, id)
}

func inlineJWKS(t *testing.T, keys map[string]ed25519.PrivateKey) json.RawMessage {
	t.Helper()
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	for kid, k := range keys {
		jwk, err := webhookauth.PublicJWK(kid, k)
		if err != nil {
			t.Fatal(err)
		}
		set.Keys = append(set.Keys, jwk)
	}
	b, _ := json.Marshal(set)
	return b
}

// TestRotatedInlineKeyIsPickedUpOnFirstUse: an operator replaces a seller's inline JWKS
// through the registry; the first webhook signed with the new key id reloads the registry
// (one load), is verified with the new key and accepted, while a warm function never saw the
// change before. Forged key ids then reload the registry at most once per KeyMissRefresh. A
// webhook signed with a known key looks its seller up once.
func TestRotatedInlineKeyIsPickedUpOnFirstUse(t *testing.T) {
	client, table := dynamotest.Start(t)
	store := registry.NewStore(client, table)
	ctx := context.Background()
	_, oldKey, _ := ed25519.GenerateKey(rand.Reader)
	_, newKey, _ := ed25519.GenerateKey(rand.Reader)
	seller := registry.Record{Agent: adcp.Agent{ID: "acme", Role: adcp.RoleSeller, MCPURL: "https://acme.example/mcp", CredentialRef: "p/acme",
		Webhook: &adcp.WebhookConfig{Mode: adcp.WebhookRFC9421, JWKS: inlineJWKS(t, map[string]ed25519.PrivateKey{"k-2026": oldKey})}}}
	if _, err := store.Add(ctx, seller, "ops", registry.ActionAdded); err != nil {
		t.Fatal(err)
	}
	clk := clocktest.At(time.Now())
	src := &countingLister{Source: store}
	cache := registry.NewCache(src)
	cache.Now = clk.Now
	if err := cache.Load(ctx); err != nil {
		t.Fatal(err)
	}
	counted := &countingRegistry{Registry: cache}
	rv := &webhook.RegistryVerifiers{Registry: counted, Options: webhook.VerifierOptions{Now: clk.Now}}
	verify := func(kid string, key ed25519.PrivateKey) error {
		t.Helper()
		v, err := rv.Verifier(ctx, "acme")
		if err != nil || v == nil {
			t.Fatalf("Verifier = %v, %v", v, err)
		}
		body := []byte(`{"task_id":"t1","status":"completed"}`)
		r, _ := http.NewRequest(http.MethodPost, "https://api.example.com/v1/webhooks/adcp/op-1", nil)
		r.Header.Set("Content-Type", "application/json")
		if err := (&webhookauth.RFC9421Signer{KeyID: kid, Key: key, Now: clk.Now}).Sign(r, body); err != nil {
			t.Fatal(err)
		}
		p, err := v.VerifyDeferred(ctx, webhookauth.Request{Method: http.MethodPost, URL: r.URL.String(), Header: r.Header, Body: body})
		if err != nil {
			return err
		}
		return p.Commit(ctx)
	}
	if err := verify("k-2026", oldKey); err != nil {
		t.Fatalf("the configured key: %v", err)
	}
	if n := counted.lookups.Load(); n != 1 {
		t.Fatalf("a webhook with a known key looked its seller up %d times, want once", n)
	}
	// The seller rotates; the operator puts its new JWKS in the registry.
	if _, err := store.Update(ctx, "acme", "ops", func(r *registry.Record) (string, string, error) {
		r.Webhook.JWKS = inlineJWKS(t, map[string]ed25519.PrivateKey{"k-2027": newKey})
		return registry.ActionUpdated, "webhook", nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	clk.Advance(registry.DefaultMissGap) // well within the cache's TTL: the warm cache still has the old key
	before := src.loads.Load()
	if err := verify("k-2027", newKey); err != nil {
		t.Fatalf("the first webhook signed with the rotated key: %v", err)
	}
	if got := src.loads.Load() - before; got != 1 {
		t.Fatalf("%d registry loads for the new key id, want 1", got)
	}
	if err := verify("k-2026", oldKey); !errors.Is(err, webhookauth.ErrUnknownKey) {
		t.Fatalf("the retired key still verifies: %v", err)
	}
	_, forged, _ := ed25519.GenerateKey(rand.Reader)
	before = src.loads.Load()
	for range 5 {
		if err := verify("forged", forged); !errors.Is(err, webhookauth.ErrUnknownKey) {
			t.Fatalf("forged key id: %v", err)
		}
	}
	if got := src.loads.Load() - before; got != 0 {
		t.Fatalf("forged key ids right after a reload cost %d loads, want 0", got)
	}
	clk.Advance(webhook.DefaultKeyMissRefresh)
	before = src.loads.Load()
	for range 5 {
		_ = verify("forged", forged)
	}
	if got := src.loads.Load() - before; got != 1 {
		t.Fatalf("forged key ids after the gap cost %d loads, want 1", got)
	}
}

// TestRegistryVerifiersUnknownSeller: a seller the registry does not have gets no verifier
// (the receiver answers as for any seller without one) and an unreadable registry is an error.
func TestRegistryVerifiersUnknownSeller(t *testing.T) {
	client, table := dynamotest.Start(t)
	cache := registry.NewCache(registry.NewStore(client, table))
	rv := &webhook.RegistryVerifiers{Registry: cache}
	if _, err := rv.Verifier(context.Background(), "nobody"); !errors.Is(err, adcp.ErrUnknownAgent) {
		t.Fatalf("unknown seller: %v", err)
	}
}

// oneAgent is a registry of one agent.
type oneAgent struct{ r registry.Record }

func (o oneAgent) Lookup(_ context.Context, id string) (registry.Record, error) {
	if id != o.r.ID {
		return registry.Record{}, adcp.ErrUnknownAgent
	}
	return o.r, nil
}

func (oneAgent) Refresh(context.Context) error { return nil }

// secretsOf is a secret store of fixed values.
type secretsOf map[string]string

func (s secretsOf) Get(_ context.Context, name string) ([]byte, error) {
	v, ok := s[name]
	if !ok {
		return nil, errors.New("no secret " + name)
	}
	return []byte(v), nil
}

// TestShortHMACSecretIsAConfigurationError: an HMAC seller whose stored secret is under 32
// bytes gets a 503 that says buyflow's webhook secret is misconfigured (so it retries, and the
// retry after the operator's fix is taken), not registry_unavailable; the log line names the
// agent, the secret's name, its length and the fix, and never the secret; WebhookSecretInvalid
// counts it by seller and with no dimension (the alarm's series).
func TestShortHMACSecretIsAConfigurationError(t *testing.T) {
	const short = "only-sixteen-byt"
	seller := registry.Record{Agent: adcp.Agent{ID: sellerHMAC, Role: adcp.RoleSeller, MCPURL: "https://hmac.example/mcp", CredentialRef: "p/hmac",
		Webhook: &adcp.WebhookConfig{Mode: adcp.WebhookHMAC, HMACSecretRef: "p/hmac-webhook"}}}
	var sink *metricstest.Sink
	e := newEnvWith(t, func(c *webhook.Config) {
		c.Verifiers = nil
		c.Sellers = &webhook.RegistryVerifiers{Registry: oneAgent{seller}, Secrets: secretsOf{"p/hmac-webhook": short}}
		sink = metricstest.NewSink(t, c.Now)
		c.Metrics = sink.Recorder
	})
	e.op("op-short", sellerHMAC, true)
	resp := e.deliver("op-short", sellerHMAC, payload("op-short", "completed", key("short")), signOpts{})
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(resp.Body, `"webhook_secret_invalid"`) || resp.Headers["Retry-After"] == "" {
		t.Fatalf("answer %d %v %s, want 503 webhook_secret_invalid with Retry-After", resp.StatusCode, resp.Headers, resp.Body)
	}
	var series []string
	for _, p := range sink.Flush()[metrics.WebhookSecretInvalid] {
		if p.Value != 1.0 || p.Unit != metrics.UnitCount {
			t.Errorf("%s %v = %v %s, want 1 Count", metrics.WebhookSecretInvalid, p.Dims, p.Value, p.Unit)
		}
		series = append(series, fmt.Sprint(p.Dims))
	}
	want := []string{fmt.Sprint(map[string]string{}), fmt.Sprint(map[string]string{"Seller": sellerHMAC})}
	slices.Sort(series)
	slices.Sort(want)
	if !slices.Equal(series, want) {
		t.Errorf("%s series %v, want %v", metrics.WebhookSecretInvalid, series, want)
	}
	logs := e.logBuf.String()
	for _, want := range []string{`"code":"webhook_secret_invalid"`, sellerHMAC, "p/hmac-webhook", "16 bytes", "at least 32", "buyflow agents update"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log lacks %q: %s", want, logs)
		}
	}
	if strings.Contains(logs, short) || strings.Contains(resp.Body, short) {
		t.Errorf("the secret leaked: log %s, answer %s", logs, resp.Body)
	}
	if got := e.get("op-short").Status; got != workflow.StatusSubmitted {
		t.Errorf("the operation is %s, want it untouched (submitted)", got)
	}

	// The operator puts a proper secret: a warm function takes the seller's retry.
	ok := &webhook.RegistryVerifiers{Registry: oneAgent{seller}, Secrets: secretsOf{"p/hmac-webhook": hmacSecret}}
	if v, err := ok.Verifier(context.Background(), sellerHMAC); err != nil || v == nil {
		t.Fatalf("a 32-byte secret: %v, %v", v, err)
	}
}
