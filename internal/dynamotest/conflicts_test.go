package dynamotest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/buyflow/buyflow/internal/ledger"
)

// While a transaction writes an item, a second transaction naming it and a single write to it
// are refused in DynamoDB's form, decoded by the SDK into its own types, and nothing of them is
// applied; writes to other items pass.
func TestConflictsRefuseWritesRacingATransaction(t *testing.T) {
	client, table, c := StartConflicting(t, 400*time.Millisecond)
	ctx := context.Background()
	item := func(pk, sk, v string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{
			ledger.AttrPK: &types.AttributeValueMemberS{Value: pk}, ledger.AttrSK: &types.AttributeValueMemberS{Value: sk},
			"v": &types.AttributeValueMemberS{Value: v},
		}
	}
	put := func(pk, sk, v string) types.TransactWriteItem {
		return types.TransactWriteItem{Put: &types.Put{TableName: aws.String(table), Item: item(pk, sk, v)}}
	}
	first := make(chan error, 1)
	go func() {
		_, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			put("P", "a", "first"), put("P", "b", "first"),
		}})
		first <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); ; {
		c.mu.Lock()
		n := len(c.busy)
		c.mu.Unlock()
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first transaction never arrived")
		}
		time.Sleep(time.Millisecond)
	}

	_, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		put("Q", "x", "second"), put("P", "b", "second"),
	}})
	tce, ok := errors.AsType[*types.TransactionCanceledException](err)
	if !ok || len(tce.CancellationReasons) != 2 || aws.ToString(tce.CancellationReasons[0].Code) != "None" ||
		aws.ToString(tce.CancellationReasons[1].Code) != "TransactionConflict" {
		t.Fatalf("the racing transaction: %v, want cancelled with [None, TransactionConflict]", err)
	}
	_, err = client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item("P", "a", "single")})
	if _, ok := errors.AsType[*types.TransactionConflictException](err); !ok {
		t.Fatalf("the racing single write: %v, want TransactionConflictException", err)
	}
	if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item("P", "c", "other")}); err != nil {
		t.Fatalf("a write to another item of the partition: %v", err)
	}
	if err := <-first; err != nil {
		t.Fatalf("the first transaction: %v", err)
	}
	for sk, want := range map[string]string{"a": "first", "b": "first", "c": "other"} {
		got, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{ledger.AttrPK: &types.AttributeValueMemberS{Value: "P"}, ledger.AttrSK: &types.AttributeValueMemberS{Value: sk}}})
		if err != nil || got.Item["v"].(*types.AttributeValueMemberS).Value != want {
			t.Errorf("item P/%s: %v %v, want %q", sk, got.Item, err, want)
		}
	}
	if got, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{ledger.AttrPK: &types.AttributeValueMemberS{Value: "Q"}, ledger.AttrSK: &types.AttributeValueMemberS{Value: "x"}}}); err != nil || len(got.Item) != 0 {
		t.Errorf("the cancelled transaction wrote Q/x: %v %v", got.Item, err)
	}
	if c.Refused() != 2 || c.Accepted() != 2 {
		t.Errorf("refused %d, accepted %d writes, want 2 and 2", c.Refused(), c.Accepted())
	}
	// Once the transaction ended, its items take writes again.
	if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item("P", "a", "later")}); err != nil {
		t.Fatalf("a write after the transaction: %v", err)
	}
}

// A lost response: the write is applied, the client's connection is reset, and the SDK sends
// the same request again, which the stand-in runs again: an unconditional write lands once
// more, a transaction conditioned on the item not existing then fails its own condition.
func TestConflictsLoseAResponseAfterTheWrite(t *testing.T) {
	client, table, c := StartConflicting(t, 0)
	ctx := context.Background()
	key := map[string]types.AttributeValue{
		ledger.AttrPK: &types.AttributeValueMemberS{Value: "P"}, ledger.AttrSK: &types.AttributeValueMemberS{Value: "a"},
	}
	c.LoseResponses(1)
	if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: key}); err != nil {
		t.Fatalf("a put whose first response was lost: %v (the SDK should have sent it again)", err)
	}
	if c.Lost() != 1 || c.Accepted() != 2 {
		t.Fatalf("lost %d, accepted %d writes, want 1 and 2 (the write and the SDK's resend)", c.Lost(), c.Accepted())
	}

	created := map[string]types.AttributeValue{
		ledger.AttrPK: &types.AttributeValueMemberS{Value: "P"}, ledger.AttrSK: &types.AttributeValueMemberS{Value: "b"},
	}
	c.LoseResponses(1)
	_, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{Put: &types.Put{
		TableName: aws.String(table), Item: created,
		ConditionExpression: aws.String("attribute_not_exists(#pk)"), ExpressionAttributeNames: map[string]string{"#pk": ledger.AttrPK},
	}}}})
	tce, ok := errors.AsType[*types.TransactionCanceledException](err)
	if !ok || len(tce.CancellationReasons) != 1 || aws.ToString(tce.CancellationReasons[0].Code) != "ConditionalCheckFailed" {
		t.Fatalf("the resent transaction: %v, want its own condition failed (the stand-in ran it again)", err)
	}
	got, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: created, ConsistentRead: aws.Bool(true)})
	if err != nil || len(got.Item) == 0 {
		t.Fatalf("the first run of the transaction was not applied: %v %v", got.Item, err)
	}
	if c.Lost() != 2 {
		t.Fatalf("lost %d responses, want 2", c.Lost())
	}
	// Once spent, responses reach the client again.
	if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: key}); err != nil || c.Lost() != 2 {
		t.Fatalf("a later write: %v, lost %d", err, c.Lost())
	}
}
