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
	for _, name := range []string{topology.EnvTableName, topology.EnvAgentsSecretPrefix, topology.EnvOperators} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error %q does not name %s", err, name)
		}
	}
}

func TestRunRefusesASessionAsOperator(t *testing.T) {
	env := map[string]string{topology.EnvTableName: "t", topology.EnvAgentsSecretPrefix: "buyflow/agents/",
		topology.EnvOperators: `["arn:aws:sts::111122223333:assumed-role/Ops/alice"]`}
	err := run(context.Background(), func(k string) string { return env[k] })
	if err == nil || !strings.Contains(err.Error(), "operators[0]") {
		t.Fatalf("err = %v, want the session ARN refused", err)
	}
}
