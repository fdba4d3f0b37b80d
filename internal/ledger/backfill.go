package ledger

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/buyflow/buyflow/internal/record"
)

// backfillProgress is where a backfill's scan stopped (the last key it evaluated) and, once the
// scan has covered the table, done.
type backfillProgress struct {
	CursorPK string `dynamodbav:"cursor_pk,omitempty"`
	CursorSK string `dynamodbav:"cursor_sk,omitempty"`
	Done     bool   `dynamodbav:"done,omitempty"`
}

// backfill is a resumable scan of the table that puts the items it finds somewhere they should
// already be (BackfillLive, BackfillSellerIndex).
type backfill struct {
	// name is the backfill in error messages ("live backfill"); what the scan looks for
	// ("buys to put on the live list").
	name, what string
	// progress is the key of the item that keeps its backfillProgress.
	progress map[string]types.AttributeValue
	// filter selects the items to add, project names the attributes add reads.
	filter  expression.ConditionBuilder
	project []string
	// add puts one scanned item where it belongs: false when a condition found it there, or
	// no longer a candidate, already.
	add func(ctx context.Context, item map[string]types.AttributeValue) (bool, error)
}

// backfill runs one step of b: it scans at most scanLimit items of the table from where the
// previous step stopped, adds what the filter selects and stores where it stopped; once the scan
// has covered the table it records done, and every later step reads one item and returns done.
// Concurrent steps are safe when add is conditional: a cursor stored late only makes the next
// step scan a part again.
func (s *Store) backfill(ctx context.Context, b backfill, scanLimit int) (added int, done bool, err error) {
	var prog backfillProgress
	switch item, err := s.getItem(ctx, b.progress); {
	case err == nil:
		if err := attributevalue.UnmarshalMap(item, &prog); err != nil {
			return 0, false, fmt.Errorf("ledger: decode the %s's progress: %w", b.name, err)
		}
	case !errors.Is(err, record.ErrNotFound):
		return 0, false, fmt.Errorf("ledger: read the %s's progress: %w", b.name, err)
	}
	if prog.Done {
		return 0, true, nil
	}
	names := make([]expression.NameBuilder, 0, len(b.project))
	for _, n := range b.project {
		names = append(names, expression.Name(n))
	}
	e, err := build(expression.NewBuilder().WithFilter(b.filter).WithProjection(expression.NamesList(names[0], names[1:]...)))
	if err != nil {
		return 0, false, err
	}
	in := &dynamodb.ScanInput{TableName: aws.String(s.table), FilterExpression: e.Filter(), ProjectionExpression: e.Projection(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(), Limit: aws.Int32(int32(max(scanLimit, 1)))}
	if prog.CursorPK != "" {
		in.ExclusiveStartKey = key(prog.CursorPK, prog.CursorSK)
	}
	out, err := s.api.Scan(ctx, in)
	if err != nil {
		return 0, false, fmt.Errorf("ledger: scan for %s: %w", b.what, err)
	}
	for _, item := range out.Items {
		ok, err := b.add(ctx, item)
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
		return added, false, fmt.Errorf("ledger: encode the %s's progress: %w", b.name, err)
	}
	maps.Copy(av, b.progress)
	if _, err := s.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: av}); err != nil {
		return added, false, fmt.Errorf("ledger: store the %s's progress: %w", b.name, err)
	}
	return added, next.Done, nil
}
