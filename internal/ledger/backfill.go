package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/workflow"
)

// attrLiveRetired marks an operation the delivery reader took off the live list, so that the
// backfill never lists it again.
const attrLiveRetired = "live_retired"

// The backfill's progress lives under pk "BACKFILL#LIVE", sk "PROGRESS": the scan's cursor
// (the last key it evaluated) and, once the whole table was scanned, done.
var backfillKey = map[string]types.AttributeValue{
	AttrPK: &types.AttributeValueMemberS{Value: "BACKFILL#LIVE"},
	AttrSK: &types.AttributeValueMemberS{Value: "PROGRESS"},
}

type backfillProgress struct {
	CursorPK string `dynamodbav:"cursor_pk,omitempty"`
	CursorSK string `dynamodbav:"cursor_sk,omitempty"`
	Done     bool   `dynamodbav:"done,omitempty"`
}

// BackfillLive puts on the live list, due at once, the completed buys that lack a live entry:
// buys completed before the live list existed, which the delivery reader would otherwise
// never read. Each call scans at most scanLimit items of the table, from where the previous
// call stopped, and stores where it stopped; once the scan has covered the table it records
// done, and every later call reads one item and returns. Condition of each add: the
// operation is a completed buy (not a change), not listed anywhere in gsi1, and never retired
// by the reader. Concurrent calls are safe: an add is conditional, and a cursor stored late
// only makes the next call scan a part again.
func (s *Store) BackfillLive(ctx context.Context, scanLimit int) (added int, done bool, err error) {
	var prog backfillProgress
	switch item, err := s.getItem(ctx, backfillKey); {
	case err == nil:
		if err := attributevalue.UnmarshalMap(item, &prog); err != nil {
			return 0, false, fmt.Errorf("ledger: decode the live backfill's progress: %w", err)
		}
	case !errors.Is(err, record.ErrNotFound):
		return 0, false, fmt.Errorf("ledger: read the live backfill's progress: %w", err)
	}
	if prog.Done {
		return 0, true, nil
	}
	filter := expression.Name(AttrSK).Equal(expression.Value(skOperation)).
		And(expression.Name(attrStatus).Equal(expression.Value(string(workflow.StatusCompleted)))).
		And(expression.AttributeNotExists(expression.Name(AttrGSI1PK))).
		And(expression.AttributeNotExists(expression.Name("kind"))).
		And(expression.AttributeNotExists(expression.Name(attrLiveRetired)))
	e, err := build(expression.NewBuilder().WithFilter(filter).
		WithProjection(expression.NamesList(expression.Name("tenant"), expression.Name("id"))))
	if err != nil {
		return 0, false, err
	}
	in := &dynamodb.ScanInput{TableName: aws.String(s.table), FilterExpression: e.Filter(), ProjectionExpression: e.Projection(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(), Limit: aws.Int32(int32(max(scanLimit, 1)))}
	if prog.CursorPK != "" {
		in.ExclusiveStartKey = map[string]types.AttributeValue{
			AttrPK: &types.AttributeValueMemberS{Value: prog.CursorPK}, AttrSK: &types.AttributeValueMemberS{Value: prog.CursorSK}}
	}
	out, err := s.api.Scan(ctx, in)
	if err != nil {
		return 0, false, fmt.Errorf("ledger: scan for buys to put on the live list: %w", err)
	}
	now := s.now()
	for _, item := range out.Items {
		var op struct {
			Tenant string `dynamodbav:"tenant"`
			ID     string `dynamodbav:"id"`
		}
		if attributevalue.UnmarshalMap(item, &op) != nil || op.Tenant == "" || op.ID == "" {
			continue
		}
		ok, err := s.addLive(ctx, op.Tenant, op.ID, now)
		if err != nil {
			return added, false, err
		}
		if ok {
			added++
		}
	}
	next := backfillProgress{Done: len(out.LastEvaluatedKey) == 0}
	if !next.Done {
		var last struct {
			PK string `dynamodbav:"pk"`
			SK string `dynamodbav:"sk"`
		}
		if err := attributevalue.UnmarshalMap(out.LastEvaluatedKey, &last); err != nil {
			return added, false, fmt.Errorf("ledger: decode the scan's cursor: %w", err)
		}
		next.CursorPK, next.CursorSK = last.PK, last.SK
	}
	av, err := attributevalue.MarshalMap(next)
	if err != nil {
		return added, false, fmt.Errorf("ledger: encode the live backfill's progress: %w", err)
	}
	for k, v := range backfillKey {
		av[k] = v
	}
	if _, err := s.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: av}); err != nil {
		return added, false, fmt.Errorf("ledger: store the live backfill's progress: %w", err)
	}
	return added, next.Done, nil
}

// addLive lists one completed buy live, due at now, if it still lacks a live entry.
func (s *Store) addLive(ctx context.Context, tenant, id string, now time.Time) (bool, error) {
	cond := expression.Name(attrStatus).Equal(expression.Value(string(workflow.StatusCompleted))).
		And(expression.AttributeNotExists(expression.Name(AttrGSI1PK))).
		And(expression.AttributeNotExists(expression.Name("kind"))).
		And(expression.AttributeNotExists(expression.Name(attrLiveRetired)))
	up := expression.Set(expression.Name(AttrGSI1PK), expression.Value(liveGSI)).
		Set(expression.Name(AttrGSI1SK), expression.Value(pendingSK(now, tenant, id)))
	_, err := s.update(ctx, key(opPK(tenant, id), skOperation), cond, up, "")
	if failed, _ := conditionFailed(err); failed {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("ledger: put operation %s on the live list: %w", id, err)
	}
	return true, nil
}
