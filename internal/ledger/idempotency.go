package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/buyflow/buyflow/internal/record"
)

type claimItem struct {
	PK string `dynamodbav:"pk"`
	SK string `dynamodbav:"sk"`
	record.Claim
}

// Claim takes the tenant's idempotency key for a request whose payload hashes to payloadHash, in
// one conditional put (Powertools semantics):
//
//	attribute_not_exists(pk) OR ttl < :now OR (status = INPROGRESS AND in_progress_expiry < :now_ms)
//
// with ReturnValuesOnConditionCheckFailure ALL_OLD (or a consistent read when the stand-in does
// not return the item). On success the claim is INPROGRESS and owned by the caller. On conflict:
// *PayloadMismatchError if the live record has another payload hash, else *ClaimExistsError with
// the live record.
func (s *Store) Claim(ctx context.Context, tenant, idempotencyKey, payloadHash string) (*record.Claim, error) {
	if err := checkID("tenant", tenant); err != nil {
		return nil, err
	}
	if idempotencyKey == "" || len(idempotencyKey) > 255 || payloadHash == "" {
		return nil, fmt.Errorf("%w: idempotency key must be 1-255 bytes and the payload hash set", record.ErrInvalidArgument)
	}
	now := s.now()
	c := record.Claim{
		Tenant: tenant, Key: idempotencyKey, Status: record.ClaimInProgress, PayloadHash: payloadHash,
		Owner: s.NewID(), Expiry: now.Add(s.ClaimTTL).Unix(),
		InProgressExpiry: now.Add(s.InProgressTTL).UnixMilli(), CreatedAt: now,
	}
	k := key(claimPK(tenant, idempotencyKey), skClaim)
	av, err := attributevalue.MarshalMap(claimItem{PK: claimPK(tenant, idempotencyKey), SK: skClaim, Claim: c})
	if err != nil {
		return nil, fmt.Errorf("ledger: encode claim: %w", err)
	}
	cond := expression.Or(
		keyFree(),
		expression.Name(AttrTTL).LessThan(expression.Value(now.Unix())),
		expression.Name(attrStatus).Equal(expression.Value(string(record.ClaimInProgress))).
			And(expression.Name("in_progress_expiry").LessThan(expression.Value(now.UnixMilli()))))
	err = s.putIf(ctx, av, cond)
	if err == nil {
		return &c, nil
	}
	failed, old := conditionFailed(err)
	if !failed {
		return nil, fmt.Errorf("ledger: claim idempotency key: %w", err)
	}
	item, err := s.oldOrRead(ctx, old, k)
	if errors.Is(err, record.ErrNotFound) {
		// Deleted (released) between our write and our read: the caller may simply try again.
		return nil, fmt.Errorf("ledger: claim idempotency key: released concurrently: %w", record.ErrContention)
	}
	if err != nil {
		return nil, fmt.Errorf("ledger: claim idempotency key: read existing: %w", err)
	}
	var existing claimItem
	if err := attributevalue.UnmarshalMap(item, &existing); err != nil {
		return nil, fmt.Errorf("ledger: decode claim: %w", err)
	}
	if existing.Owner == c.Owner {
		// Our own put, retried by the SDK after its response was lost (owners are random).
		return &c, nil
	}
	if existing.PayloadHash != payloadHash {
		return nil, &record.PayloadMismatchError{Existing: &existing.Claim}
	}
	return nil, &record.ClaimExistsError{Existing: &existing.Claim}
}

// CompleteClaim marks the caller's INPROGRESS claim COMPLETED with the operation id and the
// response to replay; it fails with ErrConflict if the claim is no longer the caller's (it lapsed
// and was reclaimed, or was released).
func (s *Store) CompleteClaim(ctx context.Context, c *record.Claim, operationID string, response json.RawMessage) error {
	up := expression.Set(expression.Name(attrStatus), expression.Value(string(record.ClaimCompleted))).
		Set(expression.Name("operation_id"), expression.Value(operationID)).
		Set(expression.Name("response"), expression.Value([]byte(response))).
		Remove(expression.Name("in_progress_expiry"))
	k := key(claimPK(c.Tenant, c.Key), skClaim)
	_, err := s.update(ctx, k, ownClaim(c), up, "")
	if err != nil {
		failed, old := conditionFailed(err)
		if !failed {
			return fmt.Errorf("ledger: complete claim: %w", err)
		}
		// Completed by this very call, retried by the SDK after its response was lost?
		item, rerr := s.oldOrRead(ctx, old, k)
		var cur claimItem
		if rerr != nil || attributevalue.UnmarshalMap(item, &cur) != nil ||
			cur.Owner != c.Owner || cur.Status != record.ClaimCompleted || cur.OperationID != operationID {
			return fmt.Errorf("ledger: complete claim: no longer ours: %w", record.ErrConflict)
		}
	}
	c.Status, c.OperationID, c.Response, c.InProgressExpiry = record.ClaimCompleted, operationID, response, 0
	return nil
}

// ReleaseClaim deletes the caller's INPROGRESS claim after a failure, so that a retry can run; it
// fails with ErrConflict if the claim is no longer the caller's.
func (s *Store) ReleaseClaim(ctx context.Context, c *record.Claim) error {
	e, err := build(expression.NewBuilder().WithCondition(ownClaim(c)))
	if err != nil {
		return err
	}
	_, err = s.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(s.table), Key: key(claimPK(c.Tenant, c.Key), skClaim),
		ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	})
	if err != nil {
		failed, _ := conditionFailed(err)
		if !failed {
			return fmt.Errorf("ledger: release claim: %w", err)
		}
		// Gone: released by this very call, retried by the SDK after its response was lost (or
		// expired); either way nothing holds the key for us any more.
		if _, rerr := s.getItem(ctx, key(claimPK(c.Tenant, c.Key), skClaim)); errors.Is(rerr, record.ErrNotFound) {
			return nil
		}
		return fmt.Errorf("ledger: release claim: no longer ours: %w", record.ErrConflict)
	}
	return nil
}

func ownClaim(c *record.Claim) expression.ConditionBuilder {
	return expression.Name("owner").Equal(expression.Value(c.Owner)).
		And(expression.Name(attrStatus).Equal(expression.Value(string(record.ClaimInProgress))))
}
