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

	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/workflow"
)

const skDeliveryPfx = "DELIVERY#"

type deliveryItem struct {
	PK string `dynamodbav:"pk"`
	SK string `dynamodbav:"sk"`
	record.DeliverySnapshot
	// LastWrite is the random id of the put that wrote the snapshot: that put, sent again by
	// the SDK after its response was lost, finds it and knows the snapshot is its own.
	LastWrite string `dynamodbav:"last_write,omitempty"`
}

// PutDeliverySnapshot stores d, one snapshot per reported as-of, and reports whether it
// wrote it. A snapshot already stored for that as-of with the same figures (impressions,
// spend, pacing, approved budget) is kept as it was: a report sent again writes nothing. One
// with other figures is the seller's correction of that as-of: d replaces it, and replaced is
// the snapshot it replaced (nil for a new as-of). The put retried by the SDK after its response
// was lost reports the store it made, but cannot say what that replaced (nil).
func (s *Store) PutDeliverySnapshot(ctx context.Context, d record.DeliverySnapshot) (stored bool, replaced *record.DeliverySnapshot, err error) {
	if err := checkOp(d.Tenant, d.OperationID); err != nil {
		return false, nil, err
	}
	if d.AsOf.IsZero() || d.Spend == "" || d.Currency == "" {
		return false, nil, fmt.Errorf("%w: a delivery snapshot needs as_of, spend and currency", record.ErrInvalidArgument)
	}
	if d.ReadAt.IsZero() {
		d.ReadAt = s.now()
	}
	pk, sk, write := opPK(d.Tenant, d.OperationID), skDeliveryPfx+fmtTime(d.AsOf), s.NewID()
	av, err := attributevalue.MarshalMap(deliveryItem{PK: pk, SK: sk, DeliverySnapshot: d, LastWrite: write})
	if err != nil {
		return false, nil, fmt.Errorf("ledger: encode delivery snapshot of %s: %w", d.OperationID, err)
	}
	pacing := expression.AttributeExists(expression.Name("pacing"))
	if d.Pacing != "" {
		pacing = expression.AttributeNotExists(expression.Name("pacing")).Or(expression.Name("pacing").NotEqual(expression.Value(d.Pacing)))
	}
	cond := keyFree().Or(expression.Name("impressions").NotEqual(expression.Value(d.Impressions))).
		Or(expression.Name("spend").NotEqual(expression.Value(d.Spend))).
		Or(expression.Name("approved").NotEqual(expression.Value(d.Approved))).
		Or(pacing)
	e, err := build(expression.NewBuilder().WithCondition(cond))
	if err != nil {
		return false, nil, err
	}
	out, err := s.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: av, ConditionExpression: e.Condition(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(), ReturnValues: types.ReturnValueAllOld,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld})
	if failed, old := conditionFailed(err); failed {
		item, rerr := s.oldOrRead(ctx, old, key(pk, sk))
		if rerr != nil {
			return false, nil, fmt.Errorf("ledger: put delivery snapshot of %s: read the stored one: %w", d.OperationID, rerr)
		}
		var cur deliveryItem
		if err := attributevalue.UnmarshalMap(item, &cur); err == nil && cur.LastWrite == write {
			return true, nil, nil // this very put, sent again after its response was lost
		}
		return false, nil, nil
	}
	if err != nil {
		return false, nil, fmt.Errorf("ledger: put delivery snapshot of %s: %w", d.OperationID, err)
	}
	if len(out.Attributes) > 0 {
		var old deliveryItem
		if err := attributevalue.UnmarshalMap(out.Attributes, &old); err != nil {
			return true, nil, fmt.Errorf("ledger: decode the replaced delivery snapshot of %s: %w", d.OperationID, err)
		}
		replaced = &old.DeliverySnapshot
	}
	return true, replaced, nil
}

// ListDeliverySnapshots returns the newest limit snapshots of the tenant's buy opID, newest
// first. Another tenant's buy has none.
func (s *Store) ListDeliverySnapshots(ctx context.Context, tenant, opID string, limit int) ([]record.DeliverySnapshot, error) {
	if err := checkOp(tenant, opID); err != nil {
		return nil, err
	}
	kc := expression.Key(AttrPK).Equal(expression.Value(opPK(tenant, opID))).And(expression.Key(AttrSK).BeginsWith(skDeliveryPfx))
	e, err := build(expression.NewBuilder().WithKeyCondition(kc))
	if err != nil {
		return nil, err
	}
	out, err := s.query(ctx, query{e: e, limit: clampLimit(limit), backward: true, consistent: true})
	if err != nil {
		return nil, fmt.Errorf("ledger: list delivery snapshots of %s: %w", opID, err)
	}
	snaps := make([]record.DeliverySnapshot, 0, len(out.Items))
	for _, item := range out.Items {
		var it deliveryItem
		if err := attributevalue.UnmarshalMap(item, &it); err != nil {
			return nil, fmt.Errorf("ledger: decode delivery snapshot of %s: %w", opID, err)
		}
		snaps = append(snaps, it.DeliverySnapshot)
	}
	return snaps, nil
}

// liveGSI is gsi1's partition of completed operations (live buys, and changes until the
// delivery reader retires them), sorted by when each is due for its next delivery read.
const liveGSI = "LIVE"

// skLive is the sort key of a buy's live entry, under its operation's pk: the small item that
// lists the buy live from its first delivery read on. A completion lists the operation item
// itself (its transition moves gsi1 anyway); rescheduling it there would rewrite a ~2 KB item,
// move it in gsi1 and update its gsi2 copy (8 write units a read), so the first read hands the
// listing to the entry, whose reschedule is a write of well under 1 KB and its gsi1 move (3).
const skLive = "LIVE"

// liveEntry is a buy's live entry: its listing, and the delivery mark and push flag the
// reader needs besides the operation.
type liveEntry struct {
	PK     string `dynamodbav:"pk"`
	SK     string `dynamodbav:"sk"`
	GSI1PK string `dynamodbav:"gsi1pk"`
	GSI1SK string `dynamodbav:"gsi1sk"`
	Tenant string `dynamodbav:"tenant"`
	ID     string `dynamodbav:"id"`
	Mark   string `dynamodbav:"delivery_mark,omitempty"`
	Pushed bool   `dynamodbav:"delivery_pushed,omitempty"`
}

// ListLiveDue returns up to limit completed operations whose next delivery read is due at or
// before dueBefore, the longest overdue first (gsi1 "LIVE"). It is not tenant-scoped: the delivery
// reader is internal. A buy completed before this index existed is listed once BackfillLive
// has reached it. A buy listed by its live entry comes with DeliveryEntry set and the entry's
// mark and push flag (its operation read consistently); a buy listed by both its operation (a
// resumed buy) and its entry comes once, as listed by its operation, with the entry's mark.
func (s *Store) ListLiveDue(ctx context.Context, dueBefore time.Time, limit int) ([]*record.Operation, error) {
	kc := expression.Key(AttrGSI1PK).Equal(expression.Value(liveGSI)).
		And(expression.Key(AttrGSI1SK).LessThan(expression.Value(fmtTime(dueBefore) + "$"))) // "$" sorts after the "#" that follows the time: due at dueBefore counts
	e, err := build(expression.NewBuilder().WithKeyCondition(kc))
	if err != nil {
		return nil, err
	}
	out, err := s.query(ctx, query{index: indexPending, e: e, limit: clampLimit(limit)})
	if err != nil {
		return nil, fmt.Errorf("ledger: list live operations: %w", err)
	}
	ops := make([]*record.Operation, 0, len(out.Items))
	seen := map[string]*record.Operation{} // pk → the buy listed
	for _, item := range out.Items {
		sk, _ := item[AttrSK].(*types.AttributeValueMemberS)
		if sk == nil || sk.Value != skLive {
			op, err := decodeOp(item)
			if err != nil {
				return nil, err
			}
			if prev := seen[opPK(op.Tenant, op.ID)]; prev != nil { // its entry came first
				op.DeliveryMark, op.DeliveryPushed = prev.DeliveryMark, prev.DeliveryPushed || op.DeliveryPushed
				*prev = *op
				continue
			}
			seen[opPK(op.Tenant, op.ID)] = op
			ops = append(ops, op)
			continue
		}
		var en liveEntry
		if err := attributevalue.UnmarshalMap(item, &en); err != nil {
			return nil, fmt.Errorf("ledger: decode live entry: %w", err)
		}
		if prev := seen[en.PK]; prev != nil { // listed by its operation too: that listing goes on
			prev.DeliveryMark, prev.DeliveryPushed = en.Mark, en.Pushed || prev.DeliveryPushed
			continue
		}
		opItem, err := s.getOpItem(ctx, en.Tenant, en.ID, skOperation, "operation "+en.ID)
		if errors.Is(err, record.ErrNotFound) {
			continue // never: operations are not deleted
		}
		if err != nil {
			return nil, err
		}
		op, err := decodeOp(opItem)
		if err != nil {
			return nil, err
		}
		op.DeliveryEntry, op.DeliveryMark, op.DeliveryPushed = true, en.Mark, en.Pushed
		seen[en.PK] = op
		ops = append(ops, op)
	}
	return ops, nil
}

// ScheduleDeliveryRead sets when the tenant's live operation id is next due for a delivery
// read: on its live entry if it has one, else as ScheduleLive hands the listing to one. An
// operation that is listed nowhere (canceled, retired) is ErrConflict.
func (s *Store) ScheduleDeliveryRead(ctx context.Context, tenant, id string, next time.Time) error {
	due := expression.Set(expression.Name(AttrGSI1SK), expression.Value(pendingSK(next, tenant, id)))
	err := s.updateEntry(ctx, tenant, id, due)
	if !errors.Is(err, record.ErrConflict) {
		return err
	}
	op, err := s.GetOperation(ctx, tenant, id)
	if err != nil {
		return err
	}
	if err := s.ScheduleLive(ctx, op, next, ""); !errors.Is(err, record.ErrConflict) {
		return err
	}
	// Another writer handed the listing to the entry between the two reads (two schedulers of
	// one buy at once): the entry exists now, else the buy is listed nowhere (ErrConflict).
	return s.updateEntry(ctx, tenant, id, due)
}

// ScheduleLive sets when op, as ListLiveDue listed it, is next due for a delivery read, and
// stores mark as its DeliveryMark (unless empty) in the same write: the mark of the snapshot
// just stored rides on the update the read makes anyway, so the next read compares without
// reading a snapshot. A buy listed by its entry (DeliveryEntry) updates the entry (condition:
// it exists, else ErrConflict: retired). A buy listed by its operation hands the listing to
// its entry in one transaction: the operation leaves gsi1 (condition status completed or
// paused and still listed live, else ErrConflict) and is marked so that the backfill never
// lists it again, and the entry is written (created, or for a resumed buy moved; an entry's
// mark is kept when this read stored none).
func (s *Store) ScheduleLive(ctx context.Context, op *record.Operation, next time.Time, mark string) error {
	if op.DeliveryEntry {
		up := expression.Set(expression.Name(AttrGSI1SK), expression.Value(pendingSK(next, op.Tenant, op.ID)))
		if mark != "" {
			up = up.Set(expression.Name(attrDeliveryMark), expression.Value(mark))
		}
		return s.updateEntry(ctx, op.Tenant, op.ID, up)
	}
	if err := checkOp(op.Tenant, op.ID); err != nil {
		return err
	}
	unlist, err := build(expression.NewBuilder().WithCondition(listedOnItself()).WithUpdate(
		expression.Remove(expression.Name(AttrGSI1PK)).Remove(expression.Name(AttrGSI1SK)).Set(expression.Name(attrLiveRetired), expression.Value(true))))
	if err != nil {
		return err
	}
	up := expression.Set(expression.Name(AttrGSI1PK), expression.Value(liveGSI)).
		Set(expression.Name(AttrGSI1SK), expression.Value(pendingSK(next, op.Tenant, op.ID))).
		Set(expression.Name("tenant"), expression.Value(op.Tenant)).
		Set(expression.Name("id"), expression.Value(op.ID))
	switch {
	case mark != "": // this read's snapshot
		up = up.Set(expression.Name(attrDeliveryMark), expression.Value(mark))
	case op.DeliveryMark != "": // the operation's, older than an entry's own
		up = up.Set(expression.Name(attrDeliveryMark), expression.IfNotExists(expression.Name(attrDeliveryMark), expression.Value(op.DeliveryMark)))
	}
	if op.DeliveryPushed {
		up = up.Set(expression.Name(attrDeliveryPushed), expression.Value(true))
	}
	entry, err := build(expression.NewBuilder().WithUpdate(up))
	if err != nil {
		return err
	}
	in := s.updateWithEvent(key(opPK(op.Tenant, op.ID), skOperation), unlist, types.TransactWriteItem{Update: &types.Update{
		TableName: aws.String(s.table), Key: key(opPK(op.Tenant, op.ID), skLive), UpdateExpression: entry.Update(),
		ExpressionAttributeNames: entry.Names(), ExpressionAttributeValues: entry.Values()}})
	failed, _, err := s.writeTx(ctx, in, "hand operation "+op.ID+" to its live entry")
	if failed {
		return fmt.Errorf("ledger: operation %s is not live: %w", op.ID, record.ErrConflict)
	}
	return err
}

// attrDeliveryMark and attrDeliveryPushed are record.Operation's DeliveryMark and
// DeliveryPushed, on an operation item or a live entry.
const (
	attrDeliveryMark   = "delivery_mark"
	attrDeliveryPushed = "delivery_pushed"
)

// MarkDeliveryPushed records that the seller of the tenant's live buy id pushes its delivery
// reports (record.Operation's DeliveryPushed), on its live entry or, before its first read,
// its operation (condition still listed live, else ErrConflict).
func (s *Store) MarkDeliveryPushed(ctx context.Context, tenant, id string) error {
	up := expression.Set(expression.Name(attrDeliveryPushed), expression.Value(true))
	if err := s.updateEntry(ctx, tenant, id, up); !errors.Is(err, record.ErrConflict) {
		return err
	}
	return s.updateLive(ctx, tenant, id, up)
}

// RetireLive takes the tenant's operation id off the live list (a change, or a buy that will
// deliver no more): its live entry is deleted and, if the operation lists itself, it leaves
// gsi1. ErrConflict when it was listed nowhere.
func (s *Store) RetireLive(ctx context.Context, tenant, id string) error {
	if err := checkOp(tenant, id); err != nil {
		return err
	}
	err := s.deleteItem(ctx, key(opPK(tenant, id), skLive), expression.AttributeExists(expression.Name(AttrPK)))
	if failed, _ := conditionFailed(err); !failed && err != nil {
		return fmt.Errorf("ledger: delete the live entry of %s: %w", id, err)
	}
	entry := err == nil
	err = s.updateLive(ctx, tenant, id, expression.Remove(expression.Name(AttrGSI1PK)).Remove(expression.Name(AttrGSI1SK)).
		Set(expression.Name(attrLiveRetired), expression.Value(true)))
	if entry && errors.Is(err, record.ErrConflict) {
		return nil // listed by its entry alone, the usual case
	}
	return err
}

// updateEntry applies up to the live entry of the tenant's buy id: condition it exists, else
// ErrConflict.
func (s *Store) updateEntry(ctx context.Context, tenant, id string, up expression.UpdateBuilder) error {
	if err := checkOp(tenant, id); err != nil {
		return err
	}
	_, err := s.update(ctx, key(opPK(tenant, id), skLive), expression.AttributeExists(expression.Name(AttrPK)), up, "")
	if failed, _ := conditionFailed(err); failed {
		return fmt.Errorf("ledger: buy %s has no live entry: %w", id, record.ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("ledger: update the live entry of %s: %w", id, err)
	}
	return nil
}

// listedOnItself is the condition of a write to an operation the live list holds by its own
// item: completed or paused, and in gsi1's LIVE partition.
func listedOnItself() expression.ConditionBuilder {
	return expression.Name(attrStatus).In(statusValue(workflow.StatusCompleted), statusValue(workflow.StatusPaused)).
		And(expression.Name(AttrGSI1PK).Equal(expression.Value(liveGSI)))
}

func (s *Store) updateLive(ctx context.Context, tenant, id string, up expression.UpdateBuilder) error {
	if err := checkOp(tenant, id); err != nil {
		return err
	}
	_, err := s.update(ctx, key(opPK(tenant, id), skOperation), listedOnItself(), up, "")
	if failed, _ := conditionFailed(err); failed {
		return fmt.Errorf("ledger: operation %s is not live: %w", id, record.ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("ledger: update live operation %s: %w", id, err)
	}
	return nil
}

// attrLiveRetired marks an operation that left the live list on its own item (retired, or
// handed to its live entry), so that the backfill never lists it again.
const attrLiveRetired = "live_retired"

// The backfill's progress lives under pk "BACKFILL#LIVE", sk "PROGRESS": the scan's cursor
// (the last key it evaluated) and, once the whole table was scanned, done.
var backfillKey = map[string]types.AttributeValue{
	AttrPK: &types.AttributeValueMemberS{Value: "BACKFILL#LIVE"},
	AttrSK: &types.AttributeValueMemberS{Value: "PROGRESS"},
}

// BackfillLive puts on the live list, due at once, the completed buys that lack a live entry:
// buys completed before the live list existed, which the delivery reader would otherwise
// never read. Each call scans at most scanLimit items of the table, from where the previous
// call stopped, and stores where it stopped; once the scan has covered the table it records
// done, and every later call reads one item and returns. Condition of each add: the
// operation is a completed buy (not a change), not listed anywhere in gsi1, and never retired
// by the reader. Concurrent calls are safe: an add is conditional, and a cursor stored late
// only makes the next call scan a part again.
func (s *Store) BackfillLive(ctx context.Context, scanLimit int) (added int, done bool, err error) {
	now := s.now()
	return s.backfill(ctx, backfill{
		name: "live backfill", what: "buys to put on the live list", progress: backfillKey,
		filter: expression.Name(AttrSK).Equal(expression.Value(skOperation)).
			And(expression.Name(attrStatus).Equal(expression.Value(string(workflow.StatusCompleted)))).
			And(expression.AttributeNotExists(expression.Name(AttrGSI1PK))).
			And(expression.AttributeNotExists(expression.Name("kind"))).
			And(expression.AttributeNotExists(expression.Name(attrLiveRetired))),
		project: []string{"tenant", "id"},
		add: func(ctx context.Context, item map[string]types.AttributeValue) (bool, error) {
			var op struct {
				Tenant string `dynamodbav:"tenant"`
				ID     string `dynamodbav:"id"`
			}
			if attributevalue.UnmarshalMap(item, &op) != nil || op.Tenant == "" || op.ID == "" {
				return false, nil
			}
			return s.addLive(ctx, op.Tenant, op.ID, now)
		},
	}, scanLimit)
}

// addLive lists one completed buy live, due at now, if it still lacks a live entry.
func (s *Store) addLive(ctx context.Context, tenant, id string, now time.Time) (bool, error) {
	cond := expression.Name(attrStatus).Equal(expression.Value(string(workflow.StatusCompleted))).
		And(expression.AttributeNotExists(expression.Name(AttrGSI1PK))).
		And(expression.AttributeNotExists(expression.Name("kind"))).
		And(expression.AttributeNotExists(expression.Name(attrLiveRetired)))
	up := expression.Set(expression.Name(AttrGSI1PK), expression.Value(liveGSI)).
		Set(expression.Name(AttrGSI1SK), expression.Value(pendingSK(now, tenant, id)))
	_, err := s.update(ctx, key(opPK(tenant, id), skOperation), cond, up, "")
	if failed, _ := conditionFailed(err); failed {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("ledger: put operation %s on the live list: %w", id, err)
	}
	return true, nil
}
