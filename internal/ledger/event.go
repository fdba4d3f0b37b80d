package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/workflow"
)

type eventItem struct {
	PK          string `dynamodbav:"pk"`
	SK          string `dynamodbav:"sk"`
	Tenant      string `dynamodbav:"tenant"`
	OperationID string `dynamodbav:"operation_id"`
	record.Event
}

// eventSK is "EV#<fixed-width RFC 3339 UTC>#<process sequence>-<random>": time order first; for
// events of one process in the same nanosecond, write order; the random part keeps keys of
// different processes apart.
func (s *Store) eventSK(at time.Time) string {
	return fmt.Sprintf("%s%s#%012d-%s", skEventPfx, fmtTime(at), s.seq.Add(1), s.NewID())
}

// eventPut builds the conditional Put of one event (attribute_not_exists: never overwritten).
func (s *Store) eventPut(tenant, opID string, ev record.Event) (types.TransactWriteItem, error) {
	in, err := s.eventInput(tenant, opID, ev)
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	return types.TransactWriteItem{Put: &types.Put{
		TableName: in.TableName, Item: in.Item, ConditionExpression: in.ConditionExpression,
		ExpressionAttributeNames: in.ExpressionAttributeNames, ExpressionAttributeValues: in.ExpressionAttributeValues,
	}}, nil
}

// updateWithEvent is the transaction of one conditional update of item k (e, its first write: see
// writeTx) and evPut, the Put of its event (eventPut).
func (s *Store) updateWithEvent(k map[string]types.AttributeValue, e expression.Expression, evPut types.TransactWriteItem) *dynamodb.TransactWriteItemsInput {
	return &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Update: &types.Update{
			TableName: aws.String(s.table), Key: k,
			ConditionExpression: e.Condition(), UpdateExpression: e.Update(),
			ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}},
		evPut,
	}}
}

func (s *Store) eventInput(tenant, opID string, ev record.Event) (*dynamodb.PutItemInput, error) {
	if ev.At.IsZero() {
		ev.At = s.now()
	}
	ev.At = ev.At.UTC()
	av, err := attributevalue.MarshalMap(eventItem{
		PK: opPK(tenant, opID), SK: s.eventSK(ev.At), Tenant: tenant, OperationID: opID, Event: ev,
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: encode event of operation %s: %w", opID, err)
	}
	e, err := build(expression.NewBuilder().WithCondition(keyFree()))
	if err != nil {
		return nil, err
	}
	return &dynamodb.PutItemInput{
		TableName: aws.String(s.table), Item: av, ConditionExpression: e.Condition(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	}, nil
}

// AppendEvent appends ev to the timeline of the tenant's operation opID (At defaults to now). It
// does not check that the operation exists; the key embeds the tenant, so an event can only ever
// be read back by the same tenant.
func (s *Store) AppendEvent(ctx context.Context, tenant, opID string, ev record.Event) error {
	if err := checkOp(tenant, opID); err != nil {
		return err
	}
	in, err := s.eventInput(tenant, opID, ev)
	if err != nil {
		return err
	}
	if _, err := s.api.PutItem(ctx, in); err != nil {
		if failed, _ := conditionFailed(err); failed {
			// The key ends in a random id, so only this very put can hold it: the SDK retried
			// it after its response was lost, and the event is stored.
			return nil
		}
		return fmt.Errorf("ledger: append %s event to operation %s: %w", ev.Type, opID, err)
	}
	return nil
}

// AppendEventWhile appends ev to the timeline of the tenant's operation opID only while the
// operation's status is status: one transaction of a condition check on the operation and the
// event's put. An operation another actor moved on gets no event (ErrConflict): a step that
// depended on the status it read records nothing once that status is gone. A missing
// operation is ErrNotFound.
func (s *Store) AppendEventWhile(ctx context.Context, tenant, opID string, status workflow.Status, ev record.Event) error {
	if err := checkOp(tenant, opID); err != nil {
		return err
	}
	put, err := s.eventPut(tenant, opID, ev)
	if err != nil {
		return err
	}
	e, err := build(expression.NewBuilder().WithCondition(expression.Name(attrStatus).Equal(statusValue(status))))
	if err != nil {
		return err
	}
	k := key(opPK(tenant, opID), skOperation)
	_, err = s.api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{ConditionCheck: &types.ConditionCheck{TableName: aws.String(s.table), Key: k, ConditionExpression: e.Condition(),
			ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()}},
		put,
	}})
	if err == nil {
		return nil
	}
	if failed, _, _ := canceledAt(err, 1); failed {
		return nil // the event's random key: this very transaction, retried after its response was lost
	}
	switch failed, _, contention := canceledAt(err, 0); {
	case failed:
		if _, gerr := s.getItem(ctx, k); errors.Is(gerr, record.ErrNotFound) {
			return record.ErrNotFound
		}
		return fmt.Errorf("ledger: append %s event to operation %s: not %s: %w", ev.Type, opID, status, record.ErrConflict)
	case contention:
		return fmt.Errorf("ledger: append %s event to operation %s: %w", ev.Type, opID, record.ErrContention)
	}
	return fmt.Errorf("ledger: append %s event to operation %s: %w", ev.Type, opID, err)
}

// ListEvents returns the timeline of the tenant's operation opID in time order, one page at a
// time. An operation of another tenant (or none) is ErrNotFound. A campaign's own timeline (its
// approval's events) is kept as an operation's under the campaign id (campaign and operation
// ids never collide), so opID may name the tenant's campaign.
func (s *Store) ListEvents(ctx context.Context, tenant, opID string, limit int, cursor string) (record.Page[record.Event], error) {
	if _, err := s.GetOperation(ctx, tenant, opID); errors.Is(err, record.ErrNotFound) {
		if _, cerr := s.GetCampaign(ctx, tenant, opID); cerr != nil {
			return record.Page[record.Event]{}, fmt.Errorf("ledger: list events: %w", err)
		}
	} else if err != nil {
		return record.Page[record.Event]{}, fmt.Errorf("ledger: list events: %w", err)
	}
	pk := opPK(tenant, opID)
	start, err := decodeCursor(cursor, func(k map[string]string) bool {
		return k[AttrPK] == pk && strings.HasPrefix(k[AttrSK], skEventPfx) && onlyKeys(k, AttrPK, AttrSK)
	})
	if err != nil {
		return record.Page[record.Event]{}, err
	}
	kc := expression.Key(AttrPK).Equal(expression.Value(pk)).And(expression.Key(AttrSK).BeginsWith(skEventPfx))
	e, err := build(expression.NewBuilder().WithKeyCondition(kc))
	if err != nil {
		return record.Page[record.Event]{}, err
	}
	out, err := s.query(ctx, query{e: e, limit: clampLimit(limit), start: start, consistent: true})
	if err != nil {
		return record.Page[record.Event]{}, fmt.Errorf("ledger: list events of operation %s: %w", opID, err)
	}
	var items []record.Event
	for _, item := range out.Items {
		var it eventItem
		if err := attributevalue.UnmarshalMap(item, &it); err != nil {
			return record.Page[record.Event]{}, fmt.Errorf("ledger: decode event of operation %s: %w", opID, err)
		}
		items = append(items, it.Event)
	}
	return pageOf(items, out.LastEvaluatedKey)
}
