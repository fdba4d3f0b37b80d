package devstack

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/sivchari/kumo"

	"github.com/buyflow/buyflow/internal/ledger"
)

// TestLedgerTableHasNoKumoStream holds the ledger table kumo hosts to no DynamoDB stream of its
// own: kumo keeps every record of one for as long as the stack runs, and the ledger stream is
// the stack's tap (streams.go), so each write would only add images nobody reads. The table
// keeps the rest of the schema: a write and a read of an item work, TTL is on.
func TestLedgerTableHasNoKumoStream(t *testing.T) {
	emu := kumo.NewServer()
	defer emu.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ddb, _, _ := (&Stack{}).newClients(emu.URL)
	const table = "memory-test-ledger"
	if err := createLedgerTable(ctx, ddb, table); err != nil {
		t.Fatal(err)
	}
	key := map[string]types.AttributeValue{
		ledger.AttrPK: &types.AttributeValueMemberS{Value: "TENANT#t"},
		ledger.AttrSK: &types.AttributeValueMemberS{Value: "OP#1"},
	}
	item := map[string]types.AttributeValue{"payload": &types.AttributeValueMemberS{Value: "x"}}
	for k, v := range key {
		item[k] = v
	}
	if _, err := ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item}); err != nil {
		t.Fatal(err)
	}
	got, err := ddb.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil || got.Item["payload"] == nil {
		t.Fatalf("read back the item: %v, %v", got, err)
	}
	desc, err := ddb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	if arn := aws.ToString(desc.Table.LatestStreamArn); arn != "" {
		t.Errorf("kumo keeps a stream of the ledger table (%s): every write would add records nobody reads", arn)
	}
	if s := desc.Table.StreamSpecification; s != nil && aws.ToBool(s.StreamEnabled) {
		t.Errorf("the ledger table's stream is enabled in kumo: %+v", s)
	}
	ttl, err := ddb.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	if err != nil {
		t.Fatal(err)
	}
	if d := ttl.TimeToLiveDescription; d == nil || aws.ToString(d.AttributeName) != ledger.AttrTTL {
		t.Errorf("TTL is not on %s: %+v", ledger.AttrTTL, d)
	}
}
