package ledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/buyflow/buyflow/internal/record"
)

// intentAttrs name an intent's claim attributes on the item that holds it.
type intentAttrs struct{ claims, unsent, claimedBy, createdAt string }

var (
	intentItemAttrs   = intentAttrs{claims: "claims", unsent: "unsent", claimedBy: "claimed_by", createdAt: "created_at"}
	campaignPlanAttrs = intentAttrs{claims: "plan_claims", unsent: "plan_unsent", claimedBy: "plan_claimed_by", createdAt: "plan_created_at"}
)

// intentKey returns the key of the item that holds in, the names of its claim attributes there,
// and how that item reads back as in. A campaign's plan intent (Campaign.PlanIntentRecord) lives
// on the campaign's item: its claims are that item's plan_* attributes.
func intentKey(in *record.Intent) (map[string]types.AttributeValue, intentAttrs, func(map[string]types.AttributeValue) (*record.Intent, error)) {
	if in.Task == record.SyncPlansIntent {
		tenant := in.Tenant
		return key(campaignPK(in.Tenant, in.OperationID), skCampaign), campaignPlanAttrs, func(item map[string]types.AttributeValue) (*record.Intent, error) {
			c, err := decodeCampaign(item, tenant)
			if err != nil {
				return nil, err
			}
			return c.PlanIntentRecord()
		}
	}
	return key(opPK(in.Tenant, in.OperationID), skIntentPfx+in.Task), intentItemAttrs, decodeIntent
}

type intentItem struct {
	PK string `dynamodbav:"pk"`
	SK string `dynamodbav:"sk"`
	record.Intent
}

// PutIntent stores in with attribute_not_exists(pk). If an intent for the same operation and task
// already exists, it is returned unchanged with created false (same-intent semantics: the caller
// must then send the stored bytes and key, not its own). The put leaves its random id in
// last_write, so that its own retry after a lost response is still created true.
func (s *Store) PutIntent(ctx context.Context, in record.Intent) (stored *record.Intent, created bool, err error) {
	if err := checkOp(in.Tenant, in.OperationID); err != nil {
		return nil, false, err
	}
	if in.Task == "" || in.IdempotencyKey == "" || len(in.Request) == 0 {
		return nil, false, fmt.Errorf("%w: intent needs a task, an idempotency key and the request bytes", record.ErrInvalidArgument)
	}
	if in.CreatedAt.IsZero() {
		in.CreatedAt = s.now()
	}
	k := key(opPK(in.Tenant, in.OperationID), skIntentPfx+in.Task)
	av, err := attributevalue.MarshalMap(intentItem{PK: opPK(in.Tenant, in.OperationID), SK: skIntentPfx + in.Task, Intent: in})
	if err != nil {
		return nil, false, fmt.Errorf("ledger: encode intent %s of operation %s: %w", in.Task, in.OperationID, err)
	}
	write := s.NewID()
	av[attrLastWrite] = &types.AttributeValueMemberS{Value: write}
	err = s.putIf(ctx, av, keyFree())
	if err == nil {
		return &in, true, nil
	}
	failed, old := conditionFailed(err)
	if !failed {
		return nil, false, fmt.Errorf("ledger: put intent %s of operation %s: %w", in.Task, in.OperationID, err)
	}
	item, err := s.oldOrRead(ctx, old, k)
	if err != nil {
		return nil, false, fmt.Errorf("ledger: put intent %s of operation %s: read existing: %w", in.Task, in.OperationID, err)
	}
	if wroteLast(item, write) {
		// This very put, retried by the SDK after its response was lost. Taken for another
		// attempt's, a put that was a first send's claim would be claimed again: a resend.
		return &in, true, nil
	}
	existing, err := decodeIntent(item)
	if err != nil {
		return nil, false, err
	}
	return existing, false, nil
}

// GetIntent returns the stored intent of the tenant's operation for task, or ErrNotFound.
func (s *Store) GetIntent(ctx context.Context, tenant, operationID, task string) (*record.Intent, error) {
	item, err := s.getOpItem(ctx, tenant, operationID, skIntentPfx+task, fmt.Sprintf("intent %s of operation %s", task, operationID))
	if err != nil {
		return nil, err
	}
	return decodeIntent(item)
}

func decodeIntent(item map[string]types.AttributeValue) (*record.Intent, error) {
	var it intentItem
	if err := attributevalue.UnmarshalMap(item, &it); err != nil {
		return nil, fmt.Errorf("ledger: decode intent: %w", err)
	}
	return &it.Intent, nil
}

// ClaimIntent records, before a send, that an attempt sets out to send seen, the intent as
// the caller read it: claims + 1. From an unsent intent the claim is a first send again
// (Unsent cleared, CreatedAt now); otherwise it is a resend, and it also keeps a release of
// the claim before it from marking the intent unsent. The condition is that the intent is
// still as read; when another attempt claimed or released it since, the result is ErrConflict
// and the caller reads it again.
func (s *Store) ClaimIntent(ctx context.Context, seen *record.Intent) (*record.Intent, error) {
	if err := checkOp(seen.Tenant, seen.OperationID); err != nil {
		return nil, err
	}
	_, attr, _ := intentKey(seen)
	next := *seen
	next.Claims++
	next.ClaimedBy = s.NewID()
	cond := expression.AttributeExists(expression.Name(AttrPK))
	if seen.Claims == 0 {
		cond = cond.And(expression.AttributeNotExists(expression.Name(attr.claims)))
	} else {
		cond = cond.And(expression.Name(attr.claims).Equal(expression.Value(seen.Claims)))
	}
	up := expression.Set(expression.Name(attr.claims), expression.Value(next.Claims)).
		Set(expression.Name(attr.claimedBy), expression.Value(next.ClaimedBy))
	if seen.Unsent {
		cond = cond.And(expression.Name(attr.unsent).Equal(expression.Value(true)))
		next.Unsent, next.CreatedAt = false, s.now()
		up = up.Remove(expression.Name(attr.unsent)).Set(expression.Name(attr.createdAt), expression.Value(next.CreatedAt))
	} else {
		cond = cond.And(expression.AttributeNotExists(expression.Name(attr.unsent)))
	}
	err := s.updateIntent(ctx, seen, cond, up, func(cur *record.Intent) bool { return cur.ClaimedBy == next.ClaimedBy })
	if err != nil {
		return nil, fmt.Errorf("ledger: claim intent %s of operation %s: %w", seen.Task, seen.OperationID, err)
	}
	return &next, nil
}

// ReleaseIntent marks claimed unsent: the attempt that holds its claim (the last one, which set
// out to send it as a first send) sent nothing. The condition is that no attempt claimed it
// since; otherwise the result is ErrConflict and the intent stays maybe sent.
func (s *Store) ReleaseIntent(ctx context.Context, claimed *record.Intent) error {
	if err := checkOp(claimed.Tenant, claimed.OperationID); err != nil {
		return err
	}
	if claimed.Claims == 0 || claimed.Unsent {
		return fmt.Errorf("%w: intent %s of operation %s holds no claim to release", record.ErrInvalidArgument, claimed.Task, claimed.OperationID)
	}
	_, attr, _ := intentKey(claimed)
	cond := expression.Name(attr.claims).Equal(expression.Value(claimed.Claims)).
		And(expression.AttributeNotExists(expression.Name(attr.unsent)))
	up := expression.Set(expression.Name(attr.unsent), expression.Value(true))
	err := s.updateIntent(ctx, claimed, cond, up, func(cur *record.Intent) bool { return cur.Claims == claimed.Claims && cur.Unsent })
	if err != nil {
		return fmt.Errorf("ledger: release intent %s of operation %s: %w", claimed.Task, claimed.OperationID, err)
	}
	return nil
}

// updateIntent applies up to the intent of in under cond. A failed condition is ErrConflict
// (ErrNotFound for a missing intent) unless mine says the current item is this very write,
// retried by the SDK after its response was lost.
func (s *Store) updateIntent(ctx context.Context, in *record.Intent, cond expression.ConditionBuilder, up expression.UpdateBuilder, mine func(cur *record.Intent) bool) error {
	k, _, decode := intentKey(in)
	_, err := s.update(ctx, k, cond, up, "")
	if err == nil {
		return nil
	}
	failed, old := conditionFailed(err)
	if !failed {
		return err
	}
	item, err := s.oldOrRead(ctx, old, k)
	if errors.Is(err, record.ErrNotFound) {
		return record.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("read after a failed condition: %w", err)
	}
	cur, err := decode(item)
	if err != nil {
		return err
	}
	if mine(cur) {
		return nil
	}
	return record.ErrConflict
}
