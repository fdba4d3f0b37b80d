package main

import (
	"context"
	"strings"
	"testing"

	"github.com/buyflow/buyflow/internal/topology"
)

func TestRunReportsEveryMissingVariable(t *testing.T) {
	err := run(context.Background(), func(string) string { return "" })
	if err == nil {
		t.Fatal("run started without configuration")
	}
	for _, name := range []string{topology.EnvTableName, topology.EnvAgentsConfig, topology.EnvAgentsSecretPrefix} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error %q does not name %s", err, name)
		}
	}
}

func TestRunRefusesWebhookSecretsOutsideThePrefix(t *testing.T) {
	agents := `{"agents":[{"id":"acme","role":"seller","mcp_url":"https://acme.example/mcp","credential_ref":"buyflow/agents/acme",
		"webhook":{"mode":"hmac","hmac_secret_ref":"other/acme-webhook"}}]}`
	env := map[string]string{topology.EnvTableName: "t", topology.EnvAgentsConfig: agents, topology.EnvAgentsSecretPrefix: "buyflow/agents/",
		topology.EnvRunConfig: `{"poll_initial_seconds":-1}`}
	err := run(context.Background(), func(k string) string { return env[k] })
	if err == nil || !strings.Contains(err.Error(), "other/acme-webhook") || !strings.Contains(err.Error(), topology.EnvRunConfig) {
		t.Fatalf("err = %v, want the secret outside the prefix and the bad run config named", err)
	}
}
