package ledger

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/buyflow/buyflow/internal/record"
)

// AcquireLock takes the lock name for owner for ttl, in one conditional update:
//
//	attribute_not_exists(pk) OR lease_expiry < :now_ms OR owner = :owner
//
// that also increments the fence counter stored in the same item (ADD fence 1). It returns the
// lease with its new fence, or a *LockHeldError with the current holder.
func (s *Store) AcquireLock(ctx context.Context, name, owner string, ttl time.Duration) (record.Lease, error) {
	if name == "" || owner == "" || ttl <= 0 {
		return record.Lease{}, fmt.Errorf("%w: lock name, owner and a positive ttl are required", record.ErrInvalidArgument)
	}
	now := s.now()
	exp := now.Add(ttl)
	cond := expression.Or(
		keyFree(),
		expression.Name("lease_expiry").LessThan(expression.Value(now.UnixMilli())),
		expression.Name("owner").Equal(expression.Value(owner)))
	up := expression.Set(expression.Name("owner"), expression.Value(owner)).
		Set(expression.Name("lease_expiry"), expression.Value(exp.UnixMilli())).
		Set(expression.Name("lock_name"), expression.Value(name)).
		Set(expression.Name(AttrTTL), expression.Value(exp.Add(s.LockRetention).Unix())).
		Add(expression.Name("fence"), expression.Value(1))
	k := key(lockPK(name), skLock)
	out, err := s.update(ctx, k, cond, up, types.ReturnValueAllNew)
	if err != nil {
		failed, old := conditionFailed(err)
		if !failed {
			return record.Lease{}, fmt.Errorf("ledger: acquire lock %s: %w", name, err)
		}
		item, rerr := s.oldOrRead(ctx, old, k)
		if errors.Is(rerr, record.ErrNotFound) {
			return record.Lease{}, fmt.Errorf("ledger: acquire lock %s: vanished concurrently: %w", name, record.ErrContention)
		}
		if rerr != nil {
			return record.Lease{}, fmt.Errorf("ledger: acquire lock %s: read holder: %w", name, rerr)
		}
		holder, derr := decodeLease(item)
		if derr != nil {
			return record.Lease{}, derr
		}
		return record.Lease{}, &record.LockHeldError{Holder: holder}
	}
	return decodeLease(out)
}

// RenewLock extends the caller's lease to now+ttl; it requires the stored owner and fence to be
// the lease's (nobody acquired the lock since), else ErrLeaseLost.
func (s *Store) RenewLock(ctx context.Context, l record.Lease, ttl time.Duration) (record.Lease, error) {
	exp := s.now().Add(ttl)
	up := expression.Set(expression.Name("lease_expiry"), expression.Value(exp.UnixMilli())).
		Set(expression.Name(AttrTTL), expression.Value(exp.Add(s.LockRetention).Unix()))
	if err := s.updateLease(ctx, l, up); err != nil {
		return record.Lease{}, fmt.Errorf("ledger: renew lock %s: %w", l.Name, err)
	}
	l.Expiry, l.ExpiresAt = exp.UnixMilli(), time.UnixMilli(exp.UnixMilli()).UTC()
	return l, nil
}

// ReleaseLock ends the caller's lease (owner and fence must match, else ErrLeaseLost). The item
// stays, with its fence, so the next holder gets a higher fence; TTL removes it after
// LockRetention.
func (s *Store) ReleaseLock(ctx context.Context, l record.Lease) error {
	up := expression.Set(expression.Name("lease_expiry"), expression.Value(int64(0))).
		Remove(expression.Name("owner"))
	if err := s.updateLease(ctx, l, up); err != nil {
		return fmt.Errorf("ledger: release lock %s: %w", l.Name, err)
	}
	return nil
}

func (s *Store) updateLease(ctx context.Context, l record.Lease, up expression.UpdateBuilder) error {
	cond := expression.Name("owner").Equal(expression.Value(l.Owner)).
		And(expression.Name("fence").Equal(expression.Value(l.Fence)))
	_, err := s.update(ctx, key(lockPK(l.Name), skLock), cond, up, "")
	if err != nil {
		if failed, _ := conditionFailed(err); failed {
			return record.ErrLeaseLost
		}
		return err
	}
	return nil
}

func decodeLease(item map[string]types.AttributeValue) (record.Lease, error) {
	var l record.Lease
	if err := attributevalue.UnmarshalMap(item, &l); err != nil {
		return record.Lease{}, fmt.Errorf("ledger: decode lease: %w", err)
	}
	l.ExpiresAt = time.UnixMilli(l.Expiry).UTC()
	return l, nil
}

// The sweep's progress of a seller lives under pk "RECONCILE#<seller>", sk "PROGRESS" (a
// prefix no other item uses), written with a put conditioned on the lease fence:
//
//	attribute_not_exists(pk) OR fence <= :fence
func progressKey(seller string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		AttrPK: &types.AttributeValueMemberS{Value: "RECONCILE#" + seller},
		AttrSK: &types.AttributeValueMemberS{Value: "PROGRESS"},
	}
}

// GetProgress returns the sweep's progress of seller (a consistent read), or the zero
// SweepProgress of the seller when none is stored.
func (s *Store) GetProgress(ctx context.Context, seller string) (record.SweepProgress, error) {
	item, err := s.getItem(ctx, progressKey(seller))
	if errors.Is(err, record.ErrNotFound) {
		return record.SweepProgress{Seller: seller}, nil
	}
	if err != nil {
		return record.SweepProgress{}, fmt.Errorf("ledger: read sweep progress of %s: %w", seller, err)
	}
	var p record.SweepProgress
	if err := attributevalue.UnmarshalMap(item, &p); err != nil {
		return record.SweepProgress{}, fmt.Errorf("ledger: decode sweep progress of %s: %w", seller, err)
	}
	return p, nil
}

// PutProgress stores p unless a sweep run holding a newer lease (a higher fence) stored one:
// then it returns ErrStaleFence.
func (s *Store) PutProgress(ctx context.Context, p record.SweepProgress) error {
	p.UpdatedAt = s.now()
	item, err := attributevalue.MarshalMap(p)
	if err != nil {
		return fmt.Errorf("ledger: encode sweep progress of %s: %w", p.Seller, err)
	}
	for k, v := range progressKey(p.Seller) {
		item[k] = v
	}
	cond := expression.Or(
		keyFree(),
		expression.Name("fence").LessThanEqual(expression.Value(p.Fence)))
	err = s.putIf(ctx, item, cond)
	if failed, _ := conditionFailed(err); failed {
		return record.ErrStaleFence
	}
	if err != nil {
		return fmt.Errorf("ledger: store sweep progress of %s: %w", p.Seller, err)
	}
	return nil
}

// The sweep's heartbeat is one item, pk "SWEEP", sk "HEARTBEAT" (no other item uses the pk),
// put only forward (condition: no item, or a stored Until not later than ours), so a slow run
// that ends after a newer one cannot age it.
func heartbeatKey() map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		AttrPK: &types.AttributeValueMemberS{Value: "SWEEP"},
		AttrSK: &types.AttributeValueMemberS{Value: "HEARTBEAT"},
	}
}

// GetSweepHeartbeat returns the sweep's last heartbeat (an eventually consistent read: a
// heartbeat a second old vouches as well), or the zero SweepHeartbeat, never fresh, when no
// run has stored one.
func (s *Store) GetSweepHeartbeat(ctx context.Context) (record.SweepHeartbeat, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: heartbeatKey()})
	if err != nil {
		return record.SweepHeartbeat{}, fmt.Errorf("ledger: read the sweep's heartbeat: %w", err)
	}
	var h record.SweepHeartbeat
	if len(out.Item) == 0 {
		return h, nil
	}
	if err := attributevalue.UnmarshalMap(out.Item, &h); err != nil {
		return record.SweepHeartbeat{}, fmt.Errorf("ledger: decode the sweep's heartbeat: %w", err)
	}
	return h, nil
}

// PutSweepHeartbeat stores h unless a later one is stored (then it does nothing).
func (s *Store) PutSweepHeartbeat(ctx context.Context, h record.SweepHeartbeat) error {
	item, err := attributevalue.MarshalMap(h)
	if err != nil {
		return fmt.Errorf("ledger: encode the sweep's heartbeat: %w", err)
	}
	maps.Copy(item, heartbeatKey())
	err = s.putIf(ctx, item, expression.Or(keyFree(), expression.Name("until").LessThanEqual(expression.Value(h.Until.Unix()))))
	if failed, _ := conditionFailed(err); failed {
		return nil
	}
	if err != nil {
		return fmt.Errorf("ledger: store the sweep's heartbeat: %w", err)
	}
	return nil
}
