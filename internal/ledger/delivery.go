package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// DeliverySnapshot is what a seller reported a live buy delivered, as of a moment: one read of
// get_media_buy_delivery. Snapshots are append-only, one per (buy, as-of): reading the same
// report twice stores it once.
type DeliverySnapshot struct {
	Tenant      string `dynamodbav:"tenant" json:"-"`
	OperationID string `dynamodbav:"operation_id" json:"operation_id"`
	MediaBuyID  string `dynamodbav:"media_buy_id" json:"media_buy_id"`
	// AsOf is the end of the reporting period the seller reported.
	AsOf        time.Time `dynamodbav:"as_of" json:"as_of"`
	Impressions int64     `dynamodbav:"impressions" json:"impressions"`
	// Spend is exact (a decimal string in Currency).
	Spend    string `dynamodbav:"spend" json:"spend"`
	Currency string `dynamodbav:"currency" json:"currency"`
	// Pacing is the seller's pacing index when it reports one (a decimal string, 1 = on pace).
	Pacing string `dynamodbav:"pacing,omitempty" json:"pacing,omitempty"`
	// Approved is the budget approved when the snapshot was read, for spend-against-budget.
	Approved string    `dynamodbav:"approved" json:"approved"`
	ReadAt   time.Time `dynamodbav:"read_at" json:"read_at"`
}

const skDeliveryPfx = "DELIVERY#"

type deliveryItem struct {
	PK string `dynamodbav:"pk"`
	SK string `dynamodbav:"sk"`
	DeliverySnapshot
}

// PutDeliverySnapshot stores d (attribute_not_exists: a report already stored for that as-of
// is kept as it was) and reports whether it was new.
func (s *Store) PutDeliverySnapshot(ctx context.Context, d DeliverySnapshot) (created bool, err error) {
	if err := checkID("tenant", d.Tenant); err != nil {
		return false, err
	}
	if err := checkID("operation id", d.OperationID); err != nil {
		return false, err
	}
	if d.AsOf.IsZero() || d.Spend == "" || d.Currency == "" {
		return false, fmt.Errorf("%w: a delivery snapshot needs as_of, spend and currency", ErrInvalidArgument)
	}
	if d.ReadAt.IsZero() {
		d.ReadAt = s.now()
	}
	pk := opPK(d.Tenant, d.OperationID)
	av, err := attributevalue.MarshalMap(deliveryItem{PK: pk, SK: skDeliveryPfx + fmtTime(d.AsOf), DeliverySnapshot: d})
	if err != nil {
		return false, fmt.Errorf("ledger: encode delivery snapshot of %s: %w", d.OperationID, err)
	}
	e, err := build(expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name(AttrPK))))
	if err != nil {
		return false, err
	}
	_, err = s.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table), Item: av, ConditionExpression: e.Condition(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	})
	if err != nil {
		if failed, _ := conditionFailed(err); failed {
			return false, nil
		}
		return false, fmt.Errorf("ledger: put delivery snapshot of %s: %w", d.OperationID, err)
	}
	return true, nil
}

// ListDeliverySnapshots returns the newest limit snapshots of the tenant's buy opID, newest
// first. Another tenant's buy has none.
func (s *Store) ListDeliverySnapshots(ctx context.Context, tenant, opID string, limit int) ([]DeliverySnapshot, error) {
	if err := checkID("tenant", tenant); err != nil {
		return nil, err
	}
	if err := checkID("operation id", opID); err != nil {
		return nil, err
	}
	kc := expression.Key(AttrPK).Equal(expression.Value(opPK(tenant, opID))).And(expression.Key(AttrSK).BeginsWith(skDeliveryPfx))
	e, err := build(expression.NewBuilder().WithKeyCondition(kc))
	if err != nil {
		return nil, err
	}
	out, err := s.api.Query(ctx, &dynamodb.QueryInput{
		TableName: aws.String(s.table), KeyConditionExpression: e.KeyCondition(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		Limit: aws.Int32(int32(clampLimit(limit))), ScanIndexForward: aws.Bool(false), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: list delivery snapshots of %s: %w", opID, err)
	}
	snaps := make([]DeliverySnapshot, 0, len(out.Items))
	for _, item := range out.Items {
		var it deliveryItem
		if err := attributevalue.UnmarshalMap(item, &it); err != nil {
			return nil, fmt.Errorf("ledger: decode delivery snapshot of %s: %w", opID, err)
		}
		snaps = append(snaps, it.DeliverySnapshot)
	}
	return snaps, nil
}
