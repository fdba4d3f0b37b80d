package agentwire

import (
	"context"
	"testing"

	"github.com/buyflow/buyflow/functions/internal/wire"
	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/config"
	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/registry"
)

// TestRegistryLeavesOutSecretsOutsideThePrefix: the function's registry serves the agents
// whose secrets its role may read, and answers for the others as for unknown agents.
func TestRegistryLeavesOutSecretsOutsideThePrefix(t *testing.T) {
	client, table := dynamotest.Start(t)
	store := registry.NewStore(client, table)
	ctx := context.Background()
	for _, a := range []adcp.Agent{
		{ID: "ok", Role: adcp.RoleGovernance, MCPURL: "https://ok.example/mcp", CredentialRef: "buyflow/agents/ok"},
		{ID: "g", Role: adcp.RoleGovernance, MCPURL: "https://g.example/mcp", CredentialRef: "elsewhere/g"},
		{ID: "s", Role: adcp.RoleSeller, MCPURL: "https://s.example/mcp", CredentialRef: "buyflow/agents/s",
			Webhook: &adcp.WebhookConfig{Mode: adcp.WebhookHMAC, HMACSecretRef: "other/s-webhook"}},
	} {
		if _, err := store.Add(ctx, registry.Record{Agent: a}, "test", registry.ActionAdded); err != nil {
			t.Fatal(err)
		}
	}
	c := &wire.Cold{Env: config.Env{TableName: table, AgentSecretPrefix: "buyflow/agents/"}, AWS: dynamotest.AWSConfig()}
	reg, err := Registry(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Agent(ctx, "ok"); err != nil {
		t.Errorf("ok: %v", err)
	}
	for _, id := range []string{"g", "s"} {
		if _, err := reg.Agent(ctx, id); err == nil {
			t.Errorf("%s, whose secrets lie outside the prefix, was served", id)
		}
	}
}
