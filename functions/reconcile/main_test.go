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
	for _, name := range []string{topology.EnvTableName, topology.EnvAgentsConfig, topology.EnvAgentsSecretPrefix, topology.EnvStateMachineARN} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error %q does not name %s", err, name)
		}
	}
}

func TestRunRefusesCredentialsOutsideThePrefix(t *testing.T) {
	agents := `{"agents":[{"id":"acme","role":"seller","mcp_url":"https://acme.example/mcp","credential_ref":"other/acme",
		"webhook":{"mode":"hmac","hmac_secret_ref":"buyflow/agents/acme-webhook"}}]}`
	env := map[string]string{topology.EnvTableName: "t", topology.EnvAgentsConfig: agents, topology.EnvAgentsSecretPrefix: "buyflow/agents/",
		topology.EnvStateMachineARN: "arn:aws:states:us-east-1:123456789012:stateMachine:MediaBuy", "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}
	err := run(context.Background(), func(k string) string { return env[k] })
	if err == nil || !strings.Contains(err.Error(), "agent acme: credential_ref other/acme is not under buyflow/agents/") {
		t.Fatalf("err = %v, want the agent whose credential lies outside the prefix named", err)
	}
}

func TestTopologyListsWhatRunReads(t *testing.T) {
	f, ok := topology.App.Function("reconcile")
	if !ok {
		t.Fatal("no reconcile function in the topology")
	}
	for _, name := range []string{topology.EnvTableName, topology.EnvAgentsConfig, topology.EnvAgentsSecretPrefix, topology.EnvStateMachineARN, topology.EnvRunConfig} {
		if !strings.Contains(strings.Join(f.Env, ","), name) {
			t.Errorf("topology does not give reconcile %s", name)
		}
	}
	if !f.LedgerWrite || !f.CompletesTasks || f.Placeholder != "" {
		t.Errorf("reconcile %+v: it writes the ledger, completes tasks and is not invoked by the state machine", f)
	}
}
