package dynamotest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/ledger"
)

// TestEmulatorCompat checks the two expression shapes kumo mis-evaluates without
// ledger.EmulatorCompat, which Start installs: a multi-clause update as the expression builder
// renders it, and more than ten names.
func TestEmulatorCompat(t *testing.T) {
	client, table := dynamotest.Start(t)
	ctx := context.Background()
	key := map[string]types.AttributeValue{
		ledger.AttrPK: &types.AttributeValueMemberS{Value: "p"},
		ledger.AttrSK: &types.AttributeValueMemberS{Value: "s"},
	}
	item := map[string]types.AttributeValue{"gone": &types.AttributeValueMemberS{Value: "x"}, "n": &types.AttributeValueMemberN{Value: "1"}}
	for k, v := range key {
		item[k] = v
	}
	if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
		t.Fatal(err)
	}
	up := expression.Remove(expression.Name("gone")).Set(expression.Name("n"), expression.Name("n").Plus(expression.Value(1)))
	for i := range 12 {
		up = up.Set(expression.Name(fmt.Sprintf("field_%c", 'a'+i)), expression.Value(i))
	}
	e, err := expression.NewBuilder().WithUpdate(up).
		WithCondition(expression.Name("n").Equal(expression.Value(1))).Build()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(table), Key: key, UpdateExpression: e.Update(), ConditionExpression: e.Condition(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	}); err != nil {
		t.Fatal(err)
	}
	out, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := attributevalue.UnmarshalMap(out.Item, &got); err != nil {
		t.Fatal(err)
	}
	if _, ok := got["gone"]; ok {
		t.Errorf("REMOVE not applied: %v", got)
	}
	if got["n"] != float64(2) {
		t.Errorf("n = %v, want 2", got["n"])
	}
	for i := range 12 {
		if name := fmt.Sprintf("field_%c", 'a'+i); got[name] != float64(i) {
			t.Errorf("%s = %v, want %d (item %v)", name, got[name], i, got)
		}
	}
	if len(got) != 2+1+12 {
		t.Errorf("stray attributes: %v", got)
	}
}
