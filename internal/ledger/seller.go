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
)

// The seller item: what buyflow has seen of one seller, across operations.
const (
	sellerPfx        = "SELLER#"
	skSellerWebhooks = "WEBHOOKS"
	attrLastVerified = "last_verified_at"
)

// SellerWebhookResolution is how stale the recorded time of a seller's last verified webhook
// may be: one item per seller takes every webhook of that seller, so it is rewritten at most
// this often (a storm of webhooks does not make it a hot item), which is nothing against the
// day-long window the evidence is read with.
const SellerWebhookResolution = time.Minute

// RecordSellerWebhook notes that a webhook from sellerID passed verification and correlation
// at at. It only moves forward (a delivery processed late does not turn the time back), by
// steps of at least SellerWebhookResolution. This is the evidence that the seller's webhooks
// arrive (LastSellerWebhook); the per-buy wait no longer depends on it, since the
// reconciliation sweep reads every pending task each minute whatever the seller sends.
func (s *Store) RecordSellerWebhook(ctx context.Context, sellerID string, at time.Time) error {
	if err := checkID("seller id", sellerID); err != nil {
		return err
	}
	v := fmtTime(at)
	cond := expression.AttributeNotExists(expression.Name(attrLastVerified)).
		Or(expression.Name(attrLastVerified).LessThan(expression.Value(fmtTime(at.Add(-SellerWebhookResolution)))))
	e, err := build(expression.NewBuilder().WithCondition(cond).WithUpdate(expression.Set(expression.Name(attrLastVerified), expression.Value(v))))
	if err != nil {
		return err
	}
	_, err = s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: key(sellerPfx+sellerID, skSellerWebhooks),
		ConditionExpression: e.Condition(), UpdateExpression: e.Update(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	})
	if failed, _ := conditionFailed(err); failed {
		return nil // a time at most SellerWebhookResolution older, or newer, is recorded
	}
	if err != nil {
		return fmt.Errorf("ledger: record webhook of seller %s: %w", sellerID, err)
	}
	return nil
}

// LastSellerWebhook returns when a webhook from sellerID last passed verification, or the zero
// time when none ever did.
func (s *Store) LastSellerWebhook(ctx context.Context, sellerID string) (time.Time, error) {
	if err := checkID("seller id", sellerID); err != nil {
		return time.Time{}, err
	}
	item, err := s.getItem(ctx, key(sellerPfx+sellerID, skSellerWebhooks))
	if errors.Is(err, ErrNotFound) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("ledger: read webhooks of seller %s: %w", sellerID, err)
	}
	var v struct {
		LastVerified string `dynamodbav:"last_verified_at"`
	}
	if err := attributevalue.UnmarshalMap(item, &v); err != nil {
		return time.Time{}, fmt.Errorf("ledger: decode webhooks of seller %s: %w", sellerID, err)
	}
	t, err := time.Parse(timeKey, v.LastVerified)
	if err != nil {
		return time.Time{}, fmt.Errorf("ledger: decode webhooks of seller %s: %w", sellerID, err)
	}
	return t, nil
}
