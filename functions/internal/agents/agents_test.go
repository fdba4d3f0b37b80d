package agents

import (
	"context"
	"strings"
	"testing"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/config"
)

func TestRegistryRefusesEverySecretOutsideThePrefix(t *testing.T) {
	t.Parallel()
	env := config.Env{AgentSecretPrefix: "buyflow/agents/", Agents: []byte(`{"agents":[
		{"id":"g","role":"governance","mcp_url":"https://gov.example/mcp","credential_ref":"elsewhere/g"},
		{"id":"s","role":"seller","mcp_url":"https://s.example/mcp","credential_ref":"buyflow/agents/s",
		 "webhook":{"mode":"hmac","hmac_secret_ref":"other/s-webhook"}},
		{"id":"b","role":"seller","mcp_url":"https://b.example/mcp","credential_ref":"buyflow/agents/b",
		 "webhook":{"mode":"bearer","bearer_secret_ref":"else/b-bearer"}},
		{"id":"ok","role":"seller","mcp_url":"https://ok.example/mcp","credential_ref":"buyflow/agents/ok",
		 "webhook":{"mode":"hmac","hmac_secret_ref":"buyflow/agents/ok-webhook"}}]}`)}
	_, err := Registry(env)
	if err == nil {
		t.Fatal("a registry with secrets outside the prefix was accepted")
	}
	for _, want := range []string{"agent g: credential_ref elsewhere/g", "agent s: webhook secret other/s-webhook", "agent b: webhook bearer secret else/b-bearer"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "agent ok") {
		t.Errorf("%v names an agent whose secrets are under the prefix", err)
	}
}

func TestRegistryOfAnAbsentOrBadDocument(t *testing.T) {
	t.Parallel()
	if reg, err := Registry(config.Env{}); reg != nil || err != nil {
		t.Fatalf("Registry(absent) = %v, %v; config.Load reports it missing", reg, err)
	}
	if _, err := Registry(config.Env{Agents: []byte(`{"agents":`)}); err == nil || !strings.Contains(err.Error(), "BUYFLOW_AGENTS") {
		t.Fatalf("Registry(bad) = %v", err)
	}
	reg, err := Registry(config.Env{AgentSecretPrefix: "p/", Agents: []byte(`{"agents":[{"id":"a","role":"governance","mcp_url":"https://a.example/mcp","credential_ref":"p/a"}]}`)})
	if err != nil || len(reg.IDs()) != 1 {
		t.Fatalf("Registry(good) = %v, %v", reg, err)
	}
	if _, err := Client(reg, adcp.CredentialsFunc(func(context.Context, string) (string, error) { return "token", nil })); err != nil {
		t.Fatalf("Client = %v", err)
	}
}
