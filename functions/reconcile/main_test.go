package main

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/buyflow/buyflow/internal/topology"
)

func TestRunReportsEveryMissingVariable(t *testing.T) {
	err := run(context.Background(), func(string) string { return "" })
	if err == nil {
		t.Fatal("run started without configuration")
	}
	for _, name := range []string{topology.EnvTableName, topology.EnvAgentsSecretPrefix, topology.EnvStateMachineARN, topology.EnvSweepQueueURL} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error %q does not name %s", err, name)
		}
	}
}

func TestTopologyListsWhatRunReads(t *testing.T) {
	f, ok := topology.App.Function("reconcile")
	if !ok {
		t.Fatal("no reconcile function in the topology")
	}
	for _, name := range []string{topology.EnvTableName, topology.EnvAgentsSecretPrefix, topology.EnvStateMachineARN, topology.EnvRunConfig, topology.EnvSweepQueueURL} {
		if !strings.Contains(strings.Join(f.Env, ","), name) {
			t.Errorf("topology does not give reconcile %s", name)
		}
	}
	if !slices.Contains(f.LedgerActions, topology.LedgerUpdate) || !f.CompletesTasks || !f.SweepsShards || f.Placeholder != "" {
		t.Errorf("reconcile %+v: it writes the ledger, completes tasks, sweeps the queue's shards and is not invoked by the state machine", f)
	}
}
