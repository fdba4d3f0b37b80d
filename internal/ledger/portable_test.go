package ledger_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/buyflow/buyflow/internal/clocktest"
	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/workflow"
)

// TestStoreIsPortableWithEmulatorCompat runs a terminal transition with every change set (a SET
// + REMOVE update with more than ten names) through a fresh client with only EmulatorCompat, as
// the local stack's Lambdas get it: kumo must apply it fully.
func TestStoreIsPortableWithEmulatorCompat(t *testing.T) {
	t.Parallel()
	client, table := dynamotest.Start(t)
	opts := client.Options()
	opts.APIOptions = nil // drop what Start installed
	s := ledger.New(dynamodb.New(opts, ledger.EmulatorCompat), table)
	clk := clocktest.At(time.Date(2099, 1, 1, 12, 0, 0, 0, time.UTC))
	s.Now = clk.Now
	ctx := context.Background()
	mustCreate(t, s, newOp("op-1"))
	if _, err := s.Transition(ctx, "acme", "op-1", workflow.StatusCreating, 1, record.Patch{}); err != nil {
		t.Fatal(err)
	}
	exp := clk.Now().Add(time.Hour)
	got, err := s.Transition(ctx, "acme", "op-1", workflow.StatusCompleted, 2, record.Patch{
		SellerTaskID: ptr("task-1"), MediaBuyID: ptr("mb-1"), GovernanceCheckID: ptr("chk-1"),
		GovernanceContext: ptr("ctx"), GovernanceExpiresAt: &exp, WebhookTokenHash: ptr(record.HashToken("t")),
		Reason: ptr("done"), Deadline: &exp, ExecutionName: ptr("exec-1"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != workflow.StatusCompleted || got.Version != 3 || got.SellerTaskID != "task-1" || got.MediaBuyID != "mb-1" ||
		got.GovernanceCheckID != "chk-1" || got.ExecutionName != "exec-1" || !got.Deadline.Equal(exp) || got.Reason != "done" {
		t.Fatalf("after transition: %+v", got)
	}
	if ids := pendingOf(t, s, "seller-1", 10); len(ids) != 0 {
		t.Fatalf("terminal operation still pending: %v", ids)
	}
}

func TestPortableInputIsIdempotent(t *testing.T) {
	t.Parallel()
	up := expression.Remove(expression.Name("a"))
	for _, n := range []string{"b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"} {
		up = up.Set(expression.Name(n), expression.Value(n))
	}
	e, err := expression.NewBuilder().WithUpdate(up).Build()
	if err != nil {
		t.Fatal(err)
	}
	in := &dynamodb.UpdateItemInput{TableName: aws.String("t"), UpdateExpression: e.Update(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()}
	once := ledger.PortableInput(in).(*dynamodb.UpdateItemInput)
	twice := ledger.PortableInput(once).(*dynamodb.UpdateItemInput)
	if !reflect.DeepEqual(once.ExpressionAttributeNames, twice.ExpressionAttributeNames) || *once.UpdateExpression != *twice.UpdateExpression {
		t.Fatalf("second pass changed the input:\n%q %v\n%q %v", *once.UpdateExpression, once.ExpressionAttributeNames,
			*twice.UpdateExpression, twice.ExpressionAttributeNames)
	}
	if *in.UpdateExpression == *once.UpdateExpression || len(in.ExpressionAttributeNames["#0"]) == 0 {
		t.Fatal("the caller's input was modified or not rewritten")
	}
	t.Logf("%q", *once.UpdateExpression)
}
