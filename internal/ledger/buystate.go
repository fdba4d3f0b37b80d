package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/buyflow/buyflow/internal/record"
)

const skBuyState = "BUY"

type buyStateItem struct {
	PK string `dynamodbav:"pk"`
	SK string `dynamodbav:"sk"`
	record.BuyState
}

// GetBuyState returns the tenant's buy state of operation opID, or ErrNotFound when the buy
// has never been changed.
func (s *Store) GetBuyState(ctx context.Context, tenant, opID string) (*record.BuyState, error) {
	item, err := s.getOpItem(ctx, tenant, opID, skBuyState, "buy state of "+opID)
	if err != nil {
		return nil, err
	}
	return decodeBuyState(item)
}

// BeginChange marks change changeID (of kind) in flight on the buy, creating the buy's state
// from initial on its first change. Condition: no change in flight (or the one in flight is
// past its expiry), and the buy not canceled. The same change begun again (a buyer's retry, or
// the SDK's after a lost response) fails that condition and answers the state as it is, without
// a second event. A refusal is a *ChangeRefusedError with the current state. The event is
// written in the same transaction.
func (s *Store) BeginChange(ctx context.Context, initial record.BuyState, changeID, kind string, expires time.Time, ev record.Event) (*record.BuyState, error) {
	tenant, opID := initial.Tenant, initial.OperationID
	if err := checkOp(tenant, opID); err != nil {
		return nil, err
	}
	if err := checkID("change id", changeID); err != nil {
		return nil, err
	}
	now := s.now()
	free := expression.AttributeNotExists(expression.Name("change_id")).
		Or(expression.Name("change_expires").LessThan(expression.Value(now.Unix())))
	cond := keyFree().
		Or(free.And(expression.Name("state").NotEqual(expression.Value(record.BuyStateCanceled))))
	init := func(up expression.UpdateBuilder, name string, v any) expression.UpdateBuilder {
		return up.Set(expression.Name(name), expression.IfNotExists(expression.Name(name), expression.Value(v)))
	}
	pkgs, err := attributevalue.Marshal(initial.Packages)
	if err != nil {
		return nil, fmt.Errorf("ledger: encode packages of %s: %w", opID, err)
	}
	up := expression.Set(expression.Name("change_id"), expression.Value(changeID)).
		Set(expression.Name("change_kind"), expression.Value(kind)).
		Set(expression.Name("change_expires"), expression.Value(expires.Unix())).
		Set(expression.Name(attrUpdatedAt), expression.Value(now))
	up = init(up, "tenant", tenant)
	up = init(up, "operation_id", opID)
	up = init(up, "media_buy_id", initial.MediaBuyID)
	up = init(up, "revision", initial.Revision)
	up = init(up, "state", initial.State)
	up = init(up, "budget_total", initial.BudgetTotal)
	up = init(up, "currency", initial.Currency)
	up = up.Set(expression.Name("packages"), expression.IfNotExists(expression.Name("packages"), expression.Value(pkgs)))
	if initial.EndTime != "" {
		up = init(up, "end_time", initial.EndTime)
	}
	what := fmt.Sprintf("begin change %s of %s", changeID, opID)
	return s.changeTx(ctx, tenant, opID, what, cond, up, ev, func(cur *record.BuyState) (*record.BuyState, error) {
		if cur.ChangeID == changeID && cur.State != record.BuyStateCanceled {
			return cur, nil // this very change, begun already
		}
		return nil, &record.ChangeRefusedError{Current: cur, Canceled: cur.State == record.BuyStateCanceled}
	})
}

// ApplyChange records the buy after change changeID was applied by the seller and ends the
// change: condition change_id = changeID and the stored revision not above next.Revision (the
// revision only moves forward). Applying the same change twice is a no-op that returns the
// state (a retry of a write whose response was lost). ev is written in the same transaction.
func (s *Store) ApplyChange(ctx context.Context, next record.BuyState, changeID string, ev record.Event) (*record.BuyState, error) {
	tenant, opID := next.Tenant, next.OperationID
	if err := checkOp(tenant, opID); err != nil {
		return nil, err
	}
	pkgs, err := attributevalue.Marshal(next.Packages)
	if err != nil {
		return nil, fmt.Errorf("ledger: encode packages of %s: %w", opID, err)
	}
	cond := expression.Name("change_id").Equal(expression.Value(changeID)).
		And(expression.Name("revision").LessThanEqual(expression.Value(next.Revision)))
	up := expression.Set(expression.Name("revision"), expression.Value(next.Revision)).
		Set(expression.Name("state"), expression.Value(next.State)).
		Set(expression.Name("budget_total"), expression.Value(next.BudgetTotal)).
		Set(expression.Name("packages"), expression.Value(pkgs)).
		Set(expression.Name("last_change_id"), expression.Value(changeID)).
		Set(expression.Name("last_outcome"), expression.Value("applied")).
		Set(expression.Name("last_reason"), expression.Value(next.LastReason)).
		Set(expression.Name(attrUpdatedAt), expression.Value(s.now())).
		Remove(expression.Name("change_id")).Remove(expression.Name("change_kind")).Remove(expression.Name("change_expires"))
	if next.EndTime != "" {
		up = up.Set(expression.Name("end_time"), expression.Value(next.EndTime))
	}
	return s.endChange(ctx, tenant, opID, changeID, cond, up, ev)
}

// EndChange ends change changeID without changing the buy (denied, rejected, failed,
// expired): condition change_id = changeID. Ending it twice is a no-op.
func (s *Store) EndChange(ctx context.Context, tenant, opID, changeID, outcome, reason string, ev record.Event) (*record.BuyState, error) {
	return s.endChangeAs(ctx, tenant, opID, changeID, outcome, reason, "", ev)
}

// ContradictChange ends change changeID whose success answer contradicted it (outcome
// record.OutcomeContradicted, reason the finding) and records the buy's state as the seller's
// answer reported it (state, when not empty): not the change as planned, nor the buy as it
// was if the seller says otherwise. Condition change_id = changeID; ending it twice is a no-op.
func (s *Store) ContradictChange(ctx context.Context, tenant, opID, changeID, state, reason string, ev record.Event) (*record.BuyState, error) {
	return s.endChangeAs(ctx, tenant, opID, changeID, record.OutcomeContradicted, reason, state, ev)
}

func (s *Store) endChangeAs(ctx context.Context, tenant, opID, changeID, outcome, reason, state string, ev record.Event) (*record.BuyState, error) {
	if err := checkOp(tenant, opID); err != nil {
		return nil, err
	}
	cond := expression.Name("change_id").Equal(expression.Value(changeID))
	up := expression.Set(expression.Name("last_change_id"), expression.Value(changeID)).
		Set(expression.Name("last_outcome"), expression.Value(outcome)).
		Set(expression.Name("last_reason"), expression.Value(reason)).
		Set(expression.Name(attrUpdatedAt), expression.Value(s.now())).
		Remove(expression.Name("change_id")).Remove(expression.Name("change_kind")).Remove(expression.Name("change_expires"))
	if state != "" {
		up = up.Set(expression.Name("state"), expression.Value(state))
	}
	return s.endChange(ctx, tenant, opID, changeID, cond, up, ev)
}

func (s *Store) endChange(ctx context.Context, tenant, opID, changeID string, cond expression.ConditionBuilder, up expression.UpdateBuilder, ev record.Event) (*record.BuyState, error) {
	what := fmt.Sprintf("end change %s of %s", changeID, opID)
	return s.changeTx(ctx, tenant, opID, what, cond, up, ev, func(cur *record.BuyState) (*record.BuyState, error) {
		switch {
		case cur.ChangeID == changeID:
			return nil, fmt.Errorf("ledger: %s: %w", what, record.ErrStaleRevision)
		case cur.LastChangeID == changeID:
			return cur, nil // this very change, ended already
		}
		return nil, fmt.Errorf("ledger: %s: it is not in flight (in flight: %q): %w", what, cur.ChangeID, record.ErrConflict)
	})
}

// changeTx writes a buy-state update and its event in one transaction and returns the state
// after it; when the update's condition failed, refused decides from the state as it is. what
// names the write in errors.
func (s *Store) changeTx(ctx context.Context, tenant, opID, what string, cond expression.ConditionBuilder, up expression.UpdateBuilder, ev record.Event, refused func(cur *record.BuyState) (*record.BuyState, error)) (*record.BuyState, error) {
	in, err := s.buyStateTx(tenant, opID, cond, up, ev)
	if err != nil {
		return nil, err
	}
	failed, old, err := s.writeTx(ctx, in, what)
	if err != nil {
		return nil, err
	}
	if failed {
		item, err := s.oldOrRead(ctx, old, key(opPK(tenant, opID), skBuyState))
		if err != nil {
			return nil, fmt.Errorf("ledger: %s: read current: %w", what, err)
		}
		cur, err := decodeBuyState(item)
		if err != nil {
			return nil, err
		}
		return refused(cur)
	}
	return s.GetBuyState(ctx, tenant, opID)
}

// buyStateTx is the transaction of one conditional buy-state update and its event.
func (s *Store) buyStateTx(tenant, opID string, cond expression.ConditionBuilder, up expression.UpdateBuilder, ev record.Event) (*dynamodb.TransactWriteItemsInput, error) {
	e, err := build(expression.NewBuilder().WithCondition(cond).WithUpdate(up))
	if err != nil {
		return nil, err
	}
	if ev.At.IsZero() {
		ev.At = s.now()
	}
	evPut, err := s.eventPut(tenant, opID, ev)
	if err != nil {
		return nil, err
	}
	return s.updateWithEvent(key(opPK(tenant, opID), skBuyState), e, evPut), nil
}

func decodeBuyState(item map[string]types.AttributeValue) (*record.BuyState, error) {
	var it buyStateItem
	if err := attributevalue.UnmarshalMap(item, &it); err != nil {
		return nil, fmt.Errorf("ledger: decode buy state: %w", err)
	}
	return &it.BuyState, nil
}
