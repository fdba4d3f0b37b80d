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
	for _, name := range []string{topology.EnvTableName, topology.EnvAgentsSecretPrefix} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error %q does not name %s", err, name)
		}
	}
}
