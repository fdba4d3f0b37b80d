package wire

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/buyflow/buyflow/internal/config"
	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/topology"
	"github.com/buyflow/buyflow/internal/workflow"
)

func TestLoadReportsConfigParseAndAWSProblemsTogether(t *testing.T) {
	t.Parallel()
	env := map[string]string{topology.EnvTableName: "t"}
	_, err := Load("poll", func(k string) string { return env[k] },
		func(config.Env) error { return errPolicy })
	if err == nil {
		t.Fatal("loaded without configuration")
	}
	for _, want := range []string{topology.EnvAgentsSecretPrefix, "a bad policy", "AWS_REGION", "AWS_ACCESS_KEY_ID"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v does not name %q", err, want)
		}
	}
}

var errPolicy = &parseError{"a bad policy"}

type parseError struct{ s string }

func (e *parseError) Error() string { return e.s }

// TestTheEmulatorWorkaroundIsInstalledOnlyOnAnEmulator runs a transition that kumo mis-applies
// without ledger.EmulatorCompat (a SET + REMOVE update with more than ten names) through the
// ledger Load builds for an emulator endpoint, and checks that a Lambda on AWS gets none.
func TestTheEmulatorWorkaroundIsInstalledOnlyOnAnEmulator(t *testing.T) {
	t.Parallel()
	client, table := dynamotest.Start(t)
	env := map[string]string{
		topology.EnvTableName: table, topology.EnvAgentsSecretPrefix: "p/",
		"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
	}
	onAWS, err := Load("poll", func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if n := len(onAWS.dynamoOptions()); n != 0 {
		t.Fatalf("%d DynamoDB options without an emulator endpoint, want none", n)
	}
	env["AWS_ENDPOINT_URL"] = aws.ToString(client.Options().BaseEndpoint)
	c, err := Load("poll", func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	s := c.Ledger()
	ctx := context.Background()
	exp := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	if _, err := s.CreateOperation(ctx, record.Operation{ID: "op-1", Tenant: "acme", SellerID: "seller-1", PONumber: "PO-1",
		BudgetTotal: "1500.00", Currency: "USD", Request: []byte(`{"po_number":"PO-1"}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Transition(ctx, "acme", "op-1", workflow.StatusCreating, 1, record.Patch{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Transition(ctx, "acme", "op-1", workflow.StatusCompleted, 2, record.Patch{
		SellerTaskID: ptr("task-1"), MediaBuyID: ptr("mb-1"), GovernanceCheckID: ptr("chk-1"),
		GovernanceContext: ptr("ctx"), GovernanceExpiresAt: &exp, WebhookTokenHash: ptr(record.HashToken("t")),
		Reason: ptr("done"), Deadline: &exp, ExecutionName: ptr("exec-1"),
	}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetOperation(ctx, "acme", "op-1"); err != nil || got.Status != workflow.StatusCompleted || got.MediaBuyID != "mb-1" ||
		got.ExecutionName != "exec-1" || got.Reason != "done" || !got.Deadline.Equal(exp) {
		t.Fatalf("stored %+v, %v; the emulator mis-applied the update", got, err)
	}
}

func ptr(s string) *string { return &s }
