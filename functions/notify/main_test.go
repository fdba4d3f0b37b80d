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
	for _, name := range []string{topology.EnvTableName, topology.EnvLinkKeySecret, topology.EnvSlackSecret,
		topology.EnvPublicBaseURL, topology.EnvApprovalPolicy} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error %q does not name %s", err, name)
		}
	}
}

func TestRunRefusesABadPolicy(t *testing.T) {
	env := map[string]string{
		topology.EnvTableName: "t", topology.EnvLinkKeySecret: "k", topology.EnvSlackSecret: "s",
		topology.EnvPublicBaseURL: "https://api.example.com", topology.EnvApprovalPolicy: `{"approvers":[]}`,
	}
	err := run(context.Background(), func(k string) string { return env[k] })
	if err == nil || !strings.Contains(err.Error(), "approvalpolicy: ") {
		t.Fatalf("run = %v", err)
	}
}
