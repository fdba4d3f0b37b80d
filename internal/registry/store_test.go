package registry_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/registry"
)

func seller(id string) registry.Record {
	return registry.Record{Agent: adcp.Agent{
		ID: id, Role: adcp.RoleSeller, MCPURL: "https://" + id + ".example/mcp",
		CredentialRef: "buyflow/agents/" + id,
		Webhook:       &adcp.WebhookConfig{Mode: adcp.WebhookRFC9421, JWKSURI: "https://" + id + ".example/.well-known/jwks.json"},
	}}
}

func newStore(t testing.TB) *registry.Store {
	t.Helper()
	client, table := dynamotest.Start(t)
	return registry.NewStore(client, table)
}

func TestAddGetListHistory(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	added, err := s.Add(ctx, seller("acme"), "arn:aws:iam::111122223333:user/ops", registry.ActionAdded)
	if err != nil {
		t.Fatal(err)
	}
	if added.Version != 1 || added.UpdatedBy != "arn:aws:iam::111122223333:user/ops" || added.CreatedAt.IsZero() {
		t.Fatalf("added = %+v", added)
	}
	if _, err := s.Add(ctx, seller("acme"), "someone", registry.ActionAdded); !errors.Is(err, registry.ErrExists) {
		t.Fatalf("second add: %v", err)
	}
	got, err := s.Get(ctx, "acme")
	if err != nil || got.MCPURL != "https://acme.example/mcp" || got.Webhook.JWKSURI == "" {
		t.Fatalf("get = %+v, %v", got, err)
	}
	if _, err := s.Get(ctx, "nobody"); !errors.Is(err, registry.ErrUnknown) || !errors.Is(err, adcp.ErrUnknownAgent) {
		t.Fatalf("get unknown: %v", err)
	}
	if _, err := s.Add(ctx, seller("beta"), "ops", registry.ActionAdded); err != nil {
		t.Fatal(err)
	}
	all, err := s.List(ctx)
	if err != nil || len(all) != 2 || all[0].ID != "acme" || all[1].ID != "beta" {
		t.Fatalf("list = %+v, %v", all, err)
	}
	hist, err := s.History(ctx, "acme")
	if err != nil || len(hist) != 1 || hist[0].Action != registry.ActionAdded || hist[0].Actor != "arn:aws:iam::111122223333:user/ops" {
		t.Fatalf("history = %+v, %v", hist, err)
	}
}

func TestUpdateRecordsWhoAndWhat(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	if _, err := s.Add(ctx, seller("acme"), "ops", registry.ActionAdded); err != nil {
		t.Fatal(err)
	}
	disable := func(r *registry.Record) (string, string, error) {
		r.Disabled, r.DisabledReason = true, "contract paused"
		return registry.ActionDisabled, r.DisabledReason, nil
	}
	got, err := s.Update(ctx, "acme", "arn:aws:iam::111122223333:role/Operator", disable, nil)
	if err != nil || !got.Disabled || got.Version != 2 || got.UpdatedBy != "arn:aws:iam::111122223333:role/Operator" {
		t.Fatalf("update = %+v, %v", got, err)
	}
	// A change its validation refuses writes nothing.
	refuse := func(registry.Record) error { return fmt.Errorf("%w: no", registry.ErrInvalid) }
	if _, err := s.Update(ctx, "acme", "ops", disable, refuse); !errors.Is(err, registry.ErrInvalid) {
		t.Fatalf("refused update: %v", err)
	}
	if _, err := s.Update(ctx, "nobody", "ops", disable, nil); !errors.Is(err, registry.ErrUnknown) {
		t.Fatalf("update unknown: %v", err)
	}
	hist, err := s.History(ctx, "acme")
	if err != nil || len(hist) != 2 || hist[1].Action != registry.ActionDisabled || hist[1].Detail != "contract paused" || hist[1].Version != 2 {
		t.Fatalf("history = %+v, %v", hist, err)
	}
	cur, _ := s.Get(ctx, "acme")
	if cur.Version != 2 {
		t.Fatalf("a refused change moved the version to %d", cur.Version)
	}
}

// TestConcurrentUpdatesAllLand: changes racing on one agent are each applied once, in some
// order, each with its own audit event (the write is conditioned on the version it read).
func TestConcurrentUpdatesAllLand(t *testing.T) {
	if dynamotest.Current() == dynamotest.Moto {
		t.Skip("moto does not isolate concurrent conditional writes")
	}
	s := newStore(t)
	ctx := context.Background()
	if _, err := s.Add(ctx, seller("acme"), "ops", registry.ActionAdded); err != nil {
		t.Fatal(err)
	}
	const n = 3
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			_, errs[i] = s.Update(ctx, "acme", fmt.Sprintf("op-%d", i), func(r *registry.Record) (string, string, error) {
				var set map[string]int
				_ = json.Unmarshal(r.Settings, &set)
				if set == nil {
					set = map[string]int{}
				}
				set[fmt.Sprintf("k%d", i)] = i
				r.Settings, _ = json.Marshal(set)
				return registry.ActionUpdated, "settings", nil
			}, nil)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil && !errors.Is(err, registry.ErrConflict) {
			t.Fatalf("update %d: %v", i, err)
		}
	}
	cur, _ := s.Get(ctx, "acme")
	hist, _ := s.History(ctx, "acme")
	if int(cur.Version) != len(hist) {
		t.Fatalf("version %d but %d audit events: a change went unrecorded or an event has no change", cur.Version, len(hist))
	}
}

func TestSeedKeepsOperatorChanges(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	seed := []adcp.Agent{seller("acme").Agent, seller("beta").Agent}
	added, err := s.Seed(ctx, seed, "deploy")
	if err != nil || strings.Join(added, ",") != "acme,beta" {
		t.Fatalf("first seed = %v, %v", added, err)
	}
	if _, err := s.Update(ctx, "acme", "ops", func(r *registry.Record) (string, string, error) {
		r.MCPURL = "https://new.acme.example/mcp"
		return registry.ActionUpdated, "mcp_url", nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	// The next deploy seeds again: what an operator changed stays, a new seed entry is added.
	added, err = s.Seed(ctx, append(seed, seller("gamma").Agent), "deploy")
	if err != nil || strings.Join(added, ",") != "gamma" {
		t.Fatalf("second seed = %v, %v", added, err)
	}
	if got, _ := s.Get(ctx, "acme"); got.MCPURL != "https://new.acme.example/mcp" {
		t.Fatalf("the seed overwrote an operator's change: %s", got.MCPURL)
	}
	if hist, _ := s.History(ctx, "gamma"); len(hist) != 1 || hist[0].Action != registry.ActionSeeded || hist[0].Actor != "deploy" {
		t.Fatalf("seed history = %+v", hist)
	}
}

func TestValidate(t *testing.T) {
	ok := seller("acme")
	if err := registry.Validate(ok, "buyflow/agents/"); err != nil {
		t.Fatalf("valid agent: %v", err)
	}
	ok.Settings = json.RawMessage(`{"circuit_breaker":{"failures":3,"cooldown_seconds":120}}`)
	if err := registry.Validate(ok, "buyflow/agents/"); err != nil {
		t.Fatalf("valid breaker settings: %v", err)
	}
	cases := map[string]func(r *registry.Record){
		"outside the secret prefix": func(r *registry.Record) { r.CredentialRef = "prod/db-password" },
		"bad id":                    func(r *registry.Record) { r.ID = "a#b" },
		"http off loopback":         func(r *registry.Record) { r.MCPURL = "http://acme.example/mcp" },
		"seller without webhook":    func(r *registry.Record) { r.Webhook = nil },
		"settings not an object":    func(r *registry.Record) { r.Settings = json.RawMessage(`[1]`) },
		"settings key":              func(r *registry.Record) { r.Settings = json.RawMessage(`{"Bad Key":1}`) },
		"breaker failures":          func(r *registry.Record) { r.Settings = json.RawMessage(`{"circuit_breaker":{"failures":0}}`) },
		"breaker unknown setting":   func(r *registry.Record) { r.Settings = json.RawMessage(`{"circuit_breaker":{"cooldown":5}}`) },
		"settings too big": func(r *registry.Record) {
			r.Settings = json.RawMessage(`{"a":"` + strings.Repeat("x", registry.MaxSettingsBytes) + `"}`)
		},
		"hmac secret outside": func(r *registry.Record) {
			r.Webhook = &adcp.WebhookConfig{Mode: adcp.WebhookHMAC, HMACSecretRef: "other/x"}
		},
		// The OAuth client secret is credential_ref's: only the functions that call agents read
		// it, through their grant on the agents prefix.
		"oauth client secret outside": func(r *registry.Record) {
			r.Auth = &adcp.AuthConfig{Mode: adcp.AuthOAuth2ClientCredentials, ClientID: "c"}
			r.CredentialRef = "prod/oauth-client"
		},
		"oauth without client id": func(r *registry.Record) { r.Auth = &adcp.AuthConfig{Mode: adcp.AuthOAuth2ClientCredentials} },
	}
	for name, mutate := range cases {
		r := seller("acme")
		mutate(&r)
		if err := registry.Validate(r, "buyflow/agents/"); !errors.Is(err, registry.ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
