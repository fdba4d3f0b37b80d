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
)

// Lease is a held lock: Fence is the fencing token, strictly greater than every fence handed out
// before for the same lock name (within LockRetention of the last use). Pass it to whatever the
// lock protects so that a stale holder's writes can be refused.
type Lease struct {
	Name      string    `dynamodbav:"lock_name"`
	Owner     string    `dynamodbav:"owner"`
	Fence     int64     `dynamodbav:"fence"`
	ExpiresAt time.Time `dynamodbav:"-"`
	// Expiry is ExpiresAt in Unix milliseconds (the stored form).
	Expiry int64 `dynamodbav:"lease_expiry"`
}

// LockHeldError reports a lock held by someone else; Holder is the current lease.
type LockHeldError struct{ Holder Lease }

func (e *LockHeldError) Error() string {
	return fmt.Sprintf("ledger: lock %s is held by %s until %s", e.Holder.Name, e.Holder.Owner, e.Holder.ExpiresAt.Format(time.RFC3339))
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *LockHeldError) Is(target error) bool { return target == ErrConflict }

// ErrLeaseLost reports a Renew or Release by a holder whose lease was taken over (or released).
// It matches ErrConflict.
var ErrLeaseLost = fmt.Errorf("%w: lease lost", ErrConflict)

// BusinessKeyLock names the lock that allows one active operation per (tenant, seller, PO number).
func BusinessKeyLock(tenant, sellerID, poNumber string) string {
	return "PO#" + tenant + "#" + sellerID + "#" + hashHex(poNumber)
}

// ReconcileLock names the per-seller reconciliation lease.
func ReconcileLock(sellerID string) string { return "RECONCILE#" + sellerID }

// AcquireLock takes the lock name for owner for ttl, in one conditional update:
//
//	attribute_not_exists(pk) OR lease_expiry < :now_ms OR owner = :owner
//
// that also increments the fence counter stored in the same item (ADD fence 1). It returns the
// lease with its new fence, or a *LockHeldError with the current holder.
func (s *Store) AcquireLock(ctx context.Context, name, owner string, ttl time.Duration) (Lease, error) {
	if name == "" || owner == "" || ttl <= 0 {
		return Lease{}, fmt.Errorf("%w: lock name, owner and a positive ttl are required", ErrInvalidArgument)
	}
	now := s.now()
	exp := now.Add(ttl)
	cond := expression.Or(
		expression.AttributeNotExists(expression.Name(AttrPK)),
		expression.Name("lease_expiry").LessThan(expression.Value(now.UnixMilli())),
		expression.Name("owner").Equal(expression.Value(owner)))
	up := expression.Set(expression.Name("owner"), expression.Value(owner)).
		Set(expression.Name("lease_expiry"), expression.Value(exp.UnixMilli())).
		Set(expression.Name("lock_name"), expression.Value(name)).
		Set(expression.Name(AttrTTL), expression.Value(exp.Add(s.LockRetention).Unix())).
		Add(expression.Name("fence"), expression.Value(1))
	e, err := build(expression.NewBuilder().WithCondition(cond).WithUpdate(up))
	if err != nil {
		return Lease{}, err
	}
	k := key(lockPK(name), skLock)
	out, err := s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: k,
		ConditionExpression: e.Condition(), UpdateExpression: e.Update(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err != nil {
		failed, old := conditionFailed(err)
		if !failed {
			return Lease{}, fmt.Errorf("ledger: acquire lock %s: %w", name, err)
		}
		item, rerr := s.oldOrRead(ctx, old, k)
		if errors.Is(rerr, ErrNotFound) {
			return Lease{}, fmt.Errorf("ledger: acquire lock %s: vanished concurrently: %w", name, ErrContention)
		}
		if rerr != nil {
			return Lease{}, fmt.Errorf("ledger: acquire lock %s: read holder: %w", name, rerr)
		}
		holder, derr := decodeLease(item)
		if derr != nil {
			return Lease{}, derr
		}
		return Lease{}, &LockHeldError{Holder: holder}
	}
	return decodeLease(out.Attributes)
}

// RenewLock extends the caller's lease to now+ttl; it requires the stored owner and fence to be
// the lease's (nobody acquired the lock since), else ErrLeaseLost.
func (s *Store) RenewLock(ctx context.Context, l Lease, ttl time.Duration) (Lease, error) {
	exp := s.now().Add(ttl)
	up := expression.Set(expression.Name("lease_expiry"), expression.Value(exp.UnixMilli())).
		Set(expression.Name(AttrTTL), expression.Value(exp.Add(s.LockRetention).Unix()))
	if err := s.updateLease(ctx, l, up); err != nil {
		return Lease{}, fmt.Errorf("ledger: renew lock %s: %w", l.Name, err)
	}
	l.Expiry, l.ExpiresAt = exp.UnixMilli(), time.UnixMilli(exp.UnixMilli()).UTC()
	return l, nil
}

// ReleaseLock ends the caller's lease (owner and fence must match, else ErrLeaseLost). The item
// stays, with its fence, so the next holder gets a higher fence; TTL removes it after
// LockRetention.
func (s *Store) ReleaseLock(ctx context.Context, l Lease) error {
	up := expression.Set(expression.Name("lease_expiry"), expression.Value(int64(0))).
		Remove(expression.Name("owner"))
	if err := s.updateLease(ctx, l, up); err != nil {
		return fmt.Errorf("ledger: release lock %s: %w", l.Name, err)
	}
	return nil
}

func (s *Store) updateLease(ctx context.Context, l Lease, up expression.UpdateBuilder) error {
	cond := expression.Name("owner").Equal(expression.Value(l.Owner)).
		And(expression.Name("fence").Equal(expression.Value(l.Fence)))
	e, err := build(expression.NewBuilder().WithCondition(cond).WithUpdate(up))
	if err != nil {
		return err
	}
	_, err = s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: key(lockPK(l.Name), skLock),
		ConditionExpression: e.Condition(), UpdateExpression: e.Update(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	})
	if err != nil {
		if failed, _ := conditionFailed(err); failed {
			return ErrLeaseLost
		}
		return err
	}
	return nil
}

func decodeLease(item map[string]types.AttributeValue) (Lease, error) {
	var l Lease
	if err := attributevalue.UnmarshalMap(item, &l); err != nil {
		return Lease{}, fmt.Errorf("ledger: decode lease: %w", err)
	}
	l.ExpiresAt = time.UnixMilli(l.Expiry).UTC()
	return l, nil
}
