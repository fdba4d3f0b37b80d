package ledger

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/buyflow/buyflow/internal/record"
)

// What the sweep's fan-out keeps in the ledger: the per-seller pending index (gsi3) a shard
// reads its seller's operations from, its backfill for operations stored before gsi3 existed,
// and the sweep's plan (the shards the last planner run handed out, and how many reported).

func sellerSK(tenant, id string) string { return tenant + "#" + id }

// ListPendingBySeller lists the seller's pending operations (gsi3, eventually consistent) in
// "<tenant>#<id>" order, limit a page. Like ListPending it is not tenant-scoped and returns
// full operations; its cursor is only good for the same seller.
func (s *Store) ListPendingBySeller(ctx context.Context, seller string, limit int, cursor string) (record.Page[*record.Operation], error) {
	if err := checkID("seller id", seller); err != nil {
		return record.Page[*record.Operation]{}, err
	}
	start, err := decodeCursor(cursor, func(k map[string]string) bool {
		return strings.HasPrefix(k[AttrPK], tenantPfx) && k[AttrSK] == skOperation &&
			(k[attrGSI3PK] == "" || k[attrGSI3PK] == seller) &&
			onlyKeys(k, AttrPK, AttrSK, attrGSI3PK, attrGSI3SK)
	})
	if err != nil {
		return record.Page[*record.Operation]{}, err
	}
	e, err := build(expression.NewBuilder().WithKeyCondition(expression.Key(attrGSI3PK).Equal(expression.Value(seller))))
	if err != nil {
		return record.Page[*record.Operation]{}, err
	}
	out, err := s.query(ctx, query{index: indexSeller, e: e, limit: clampLimit(limit), start: start})
	if err != nil {
		return record.Page[*record.Operation]{}, fmt.Errorf("ledger: list pending operations of %s: %w", seller, err)
	}
	items := make([]*record.Operation, 0, len(out.Items))
	for _, item := range out.Items {
		op, err := decodeOp(item)
		if err != nil {
			return record.Page[*record.Operation]{}, err
		}
		items = append(items, op)
	}
	return pageOf(items, out.LastEvaluatedKey)
}

var sellerBackfillKey = map[string]types.AttributeValue{
	AttrPK: &types.AttributeValueMemberS{Value: "BACKFILL#SELLERINDEX"},
	AttrSK: &types.AttributeValueMemberS{Value: "PROGRESS"},
}

// BackfillSellerIndex puts on gsi3 the pending operations stored before it existed (they
// carry no gsi3 keys). Each call scans at most scanLimit items of the table, from where the
// previous call stopped, and stores where it stopped; once the scan has covered the table it
// records done, and every later call reads one item and returns done. A scan, not gsi1: an
// operation's table key never changes, so a status move during the backfill cannot carry an
// operation past it (operations created since gsi3 exists are indexed by CreateOperation).
// Concurrent calls are safe: each add is conditional, and a cursor stored late only makes the
// next call scan a part again.
func (s *Store) BackfillSellerIndex(ctx context.Context, scanLimit int) (added int, done bool, err error) {
	return s.backfill(ctx, backfill{
		name: "seller index backfill", what: "operations to put on the seller index", progress: sellerBackfillKey,
		filter: expression.Name(AttrSK).Equal(expression.Value(skOperation)).
			And(expression.Name(AttrGSI1PK).BeginsWith(pendingGSI(""))).
			And(expression.AttributeNotExists(expression.Name(attrGSI3PK))),
		project: []string{"tenant", "id", attrSellerID},
		add: func(ctx context.Context, item map[string]types.AttributeValue) (bool, error) {
			var op struct {
				Tenant string `dynamodbav:"tenant"`
				ID     string `dynamodbav:"id"`
				Seller string `dynamodbav:"seller_id"`
			}
			if attributevalue.UnmarshalMap(item, &op) != nil || op.Tenant == "" || op.ID == "" || op.Seller == "" {
				return false, nil
			}
			return s.indexSeller(ctx, op.Tenant, op.ID, op.Seller)
		},
	}, scanLimit)
}

// indexSeller puts one operation on gsi3 if it is still pending and not there yet.
func (s *Store) indexSeller(ctx context.Context, tenant, id, seller string) (bool, error) {
	cond := expression.AttributeNotExists(expression.Name(attrGSI3PK)).
		And(expression.Name(AttrGSI1PK).BeginsWith(pendingGSI("")))
	up := expression.Set(expression.Name(attrGSI3PK), expression.Value(seller)).
		Set(expression.Name(attrGSI3SK), expression.Value(sellerSK(tenant, id)))
	_, err := s.update(ctx, key(opPK(tenant, id), skOperation), cond, up, "")
	if failed, _ := conditionFailed(err); failed {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("ledger: put operation %s on the seller index: %w", id, err)
	}
	return true, nil
}

// The sweep's plan is one item, pk "SWEEP", sk "PLAN": the planner run that handed out shards
// puts it, and each shard adds itself to Reported (condition: the plan is still that one, so
// a late shard of an older plan counts for nothing).
var planKey = map[string]types.AttributeValue{
	AttrPK: &types.AttributeValueMemberS{Value: "SWEEP"},
	AttrSK: &types.AttributeValueMemberS{Value: "PLAN"},
}

// GetSweepPlan returns the sweep's last plan (a consistent read), or the zero SweepPlan when
// no planner run stored one.
func (s *Store) GetSweepPlan(ctx context.Context) (record.SweepPlan, error) {
	item, err := s.getItem(ctx, planKey)
	if errors.Is(err, record.ErrNotFound) {
		return record.SweepPlan{}, nil
	}
	if err != nil {
		return record.SweepPlan{}, fmt.Errorf("ledger: read the sweep's plan: %w", err)
	}
	var p record.SweepPlan
	if err := attributevalue.UnmarshalMap(item, &p); err != nil {
		return record.SweepPlan{}, fmt.Errorf("ledger: decode the sweep's plan: %w", err)
	}
	return p, nil
}

// PutSweepPlan stores p (Reported as given, normally 0) in place of the last plan.
func (s *Store) PutSweepPlan(ctx context.Context, p record.SweepPlan) error {
	if p.ID == "" {
		return fmt.Errorf("%w: a sweep plan needs an id", record.ErrInvalidArgument)
	}
	item, err := attributevalue.MarshalMap(p)
	if err != nil {
		return fmt.Errorf("ledger: encode the sweep's plan: %w", err)
	}
	maps.Copy(item, planKey)
	if _, err := s.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item}); err != nil {
		return fmt.Errorf("ledger: store the sweep's plan: %w", err)
	}
	return nil
}

// ReportShard counts one shard of plan as reported and returns the plan as it is then. It
// returns false (and writes nothing) when plan is no longer the stored one.
func (s *Store) ReportShard(ctx context.Context, plan string) (record.SweepPlan, bool, error) {
	cond := expression.Name("id").Equal(expression.Value(plan))
	item, err := s.update(ctx, planKey, cond, expression.Add(expression.Name("reported"), expression.Value(1)), types.ReturnValueAllNew)
	if failed, _ := conditionFailed(err); failed {
		return record.SweepPlan{}, false, nil
	}
	if err != nil {
		return record.SweepPlan{}, false, fmt.Errorf("ledger: report a shard of the sweep's plan: %w", err)
	}
	var p record.SweepPlan
	if err := attributevalue.UnmarshalMap(item, &p); err != nil {
		return record.SweepPlan{}, false, fmt.Errorf("ledger: decode the sweep's plan: %w", err)
	}
	return p, true, nil
}
