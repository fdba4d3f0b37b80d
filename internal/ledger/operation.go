package ledger

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"github.com/buyflow/buyflow/internal/dynamoretry"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/workflow"
)

func randomID() string { return uuid.NewString() }

// Attribute names used in expressions.
const (
	attrStatus    = "status"
	attrVersion   = "version"
	attrUpdatedAt = "updated_at"
	attrTaskToken = "task_token"
	// attrTokenClearedBy holds the random id of the write that took the parked task token, so
	// that the same write retried by the SDK after its response was lost knows it won it.
	attrTokenClearedBy = "token_cleared_by"
	attrSellerID       = "seller_id"
	// attrLastWrite holds the random id of an item's last conditional write: how a write the
	// SDK sent again after its response was lost knows it is its own.
	attrLastWrite = "last_write"
)

// opItem is the stored shape of an operation: the fields plus keys and index attributes.
type opItem struct {
	PK     string `dynamodbav:"pk"`
	SK     string `dynamodbav:"sk"`
	GSI1PK string `dynamodbav:"gsi1pk,omitempty"`
	GSI1SK string `dynamodbav:"gsi1sk,omitempty"`
	GSI2PK string `dynamodbav:"gsi2pk"`
	GSI2SK string `dynamodbav:"gsi2sk"`
	GSI3PK string `dynamodbav:"gsi3pk,omitempty"`
	GSI3SK string `dynamodbav:"gsi3sk,omitempty"`
	record.Operation
}

func pendingSK(updated time.Time, tenant, id string) string {
	return fmtTime(updated) + "#" + tenant + "#" + id
}

func decodeOp(item map[string]types.AttributeValue) (*record.Operation, error) {
	var it opItem
	if err := attributevalue.UnmarshalMap(item, &it); err != nil {
		return nil, fmt.Errorf("ledger: decode operation: %w", err)
	}
	op := it.Operation
	return &op, nil
}

// CreateOperation stores a new operation in status requested (or op.Status when set and not
// terminal) at version 1, with created/updated times from the clock. It fails with a
// *ConflictError if the id is taken for the tenant, and records a "created" event in the same
// transaction.
func (s *Store) CreateOperation(ctx context.Context, op record.Operation) (*record.Operation, error) {
	if err := checkOp(op.Tenant, op.ID); err != nil {
		return nil, err
	}
	if err := checkID("seller id", op.SellerID); err != nil {
		return nil, err
	}
	if op.Status == "" {
		op.Status = workflow.StatusRequested
	}
	if !op.Status.Pending() {
		return nil, fmt.Errorf("%w: new operation status %q must be pending", record.ErrInvalidArgument, op.Status)
	}
	now := s.now()
	op.Version, op.CreatedAt, op.UpdatedAt, op.TaskToken = 1, now, now, ""
	it := opItem{
		PK: opPK(op.Tenant, op.ID), SK: skOperation,
		GSI1PK: pendingGSI(string(op.Status)), GSI1SK: pendingSK(now, op.Tenant, op.ID),
		GSI2PK: tenantGSI(op.Tenant), GSI2SK: fmtTime(now) + "#" + op.ID,
		GSI3PK: op.SellerID, GSI3SK: sellerSK(op.Tenant, op.ID),
		Operation: op,
	}
	av, err := attributevalue.MarshalMap(it)
	if err != nil {
		return nil, fmt.Errorf("ledger: encode operation %s: %w", op.ID, err)
	}
	e, err := build(expression.NewBuilder().WithCondition(keyFree()))
	if err != nil {
		return nil, err
	}
	evPut, err := s.eventPut(op.Tenant, op.ID, record.Event{
		At: now, Type: record.EventCreated, To: op.Status, Version: 1,
		Amount: op.BudgetTotal, Currency: op.Currency,
	})
	if err != nil {
		return nil, err
	}
	idx, err := attributevalue.MarshalMap(opIndexItem{PK: opIndexPK(op.ID), SK: skOpIndex, Tenant: op.Tenant, OperationID: op.ID, SellerID: op.SellerID})
	if err != nil {
		return nil, fmt.Errorf("ledger: encode operation index %s: %w", op.ID, err)
	}
	_, err = s.api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{
			TableName: aws.String(s.table), Item: av,
			ConditionExpression:                 e.Condition(),
			ExpressionAttributeNames:            e.Names(),
			ExpressionAttributeValues:           e.Values(),
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}},
		evPut,
		{Put: &types.Put{
			TableName: aws.String(s.table), Item: idx,
			ConditionExpression:       e.Condition(),
			ExpressionAttributeNames:  e.Names(),
			ExpressionAttributeValues: e.Values(),
		}},
	}})
	if err != nil {
		if failed, _, _ := canceledAt(err, 2); failed {
			if held, _, _ := canceledAt(err, 0); !held {
				// The id is another tenant's: refuse without revealing that operation.
				return nil, &record.ConflictError{What: "operation id " + op.ID}
			}
		}
		if failed, old, contention := canceledAt(err, 0); failed {
			cur, rerr := s.oldOrRead(ctx, old, key(opPK(op.Tenant, op.ID), skOperation))
			if rerr != nil {
				return nil, fmt.Errorf("ledger: create operation %s: read existing: %w", op.ID, rerr)
			}
			existing, derr := decodeOp(cur)
			if derr != nil {
				return nil, derr
			}
			return nil, &record.ConflictError{What: "operation " + op.ID, Operation: existing}
		} else if contention {
			return nil, fmt.Errorf("ledger: create operation %s: %w", op.ID, record.ErrContention)
		}
		return nil, fmt.Errorf("ledger: create operation %s: %w", op.ID, err)
	}
	return &op, nil
}

// canceledAt inspects a TransactWriteItems error: failed is true when the item at index i failed
// its condition (old is the item if DynamoDB returned it), contention when the transaction lost a
// race with another transaction.
// writeTx writes the transaction in, whose first item is its conditional write. failed reports
// that this condition failed, with the item as it was when DynamoDB sent it; contention and other
// errors come back wrapped, what naming the write.
func (s *Store) writeTx(ctx context.Context, in *dynamodb.TransactWriteItemsInput, what string) (failed bool, old map[string]types.AttributeValue, err error) {
	_, err = s.api.TransactWriteItems(ctx, in)
	if err == nil {
		return false, nil, nil
	}
	failed, old, contention := canceledAt(err, 0)
	switch {
	case failed:
		return true, old, nil
	case contention:
		return false, nil, fmt.Errorf("ledger: %s: %w", what, record.ErrContention)
	}
	return false, nil, fmt.Errorf("ledger: %s: %w", what, err)
}

func canceledAt(err error, i int) (failed bool, old map[string]types.AttributeValue, contention bool) {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return false, nil, false
	}
	if i < len(tce.CancellationReasons) && aws.ToString(tce.CancellationReasons[i].Code) == dynamoretry.ReasonConditionalCheck {
		return true, tce.CancellationReasons[i].Item, false
	}
	for _, r := range tce.CancellationReasons {
		if aws.ToString(r.Code) == dynamoretry.ReasonTransactionConflict {
			return false, nil, true
		}
	}
	return false, nil, false
}

// opIndexItem maps an operation id, which is all a seller's webhook URL carries, to the one
// tenant that owns it, and to its seller, so that a webhook can be authenticated before the
// operation is read. CreateOperation writes it in the same transaction as the operation
// (attribute_not_exists(pk)), so ids are unique across tenants; it is never updated. Items
// written before the seller was kept have none.
type opIndexItem struct {
	PK          string `dynamodbav:"pk"`
	SK          string `dynamodbav:"sk"`
	Tenant      string `dynamodbav:"tenant"`
	OperationID string `dynamodbav:"operation_id"`
	SellerID    string `dynamodbav:"seller_id,omitempty"`
}

const skOpIndex = "OPIDX"

func opIndexPK(id string) string { return "OPIDX#" + id }

// LocateOperation returns who owns the operation id, whatever its tenant, for callers that
// authenticate by other means than the tenant (a seller's signed webhook names only the
// operation): an error matching record.ErrNotFound for an unknown id. Callers must not reveal
// the operation to anyone but its tenant and its seller. An owner once read is remembered
// (the index item never changes), so a buy's later webhooks skip the read.
func (s *Store) LocateOperation(ctx context.Context, id string) (record.OperationOwner, error) {
	if err := checkID("operation id", id); err != nil {
		return record.OperationOwner{}, err
	}
	if owner, ok := s.opOwners.get(id); ok {
		return owner, nil
	}
	item, err := s.getItem(ctx, key(opIndexPK(id), skOpIndex))
	if err != nil {
		return record.OperationOwner{}, fmt.Errorf("ledger: find operation %s: %w", id, err)
	}
	var idx opIndexItem
	if err := attributevalue.UnmarshalMap(item, &idx); err != nil || idx.Tenant == "" {
		return record.OperationOwner{}, fmt.Errorf("ledger: operation index %s is unreadable", id)
	}
	owner := record.OperationOwner{Tenant: idx.Tenant, SellerID: idx.SellerID}
	s.opOwners.put(id, owner)
	return owner, nil
}

// GetOperation returns the tenant's operation id (consistent read). Another tenant's operation is
// ErrNotFound: the key embeds the tenant.
func (s *Store) GetOperation(ctx context.Context, tenant, id string) (*record.Operation, error) {
	item, err := s.getOpItem(ctx, tenant, id, skOperation, "operation "+id)
	if err != nil {
		return nil, err
	}
	return decodeOp(item)
}

// Transition moves the tenant's operation id to status to, forward only: the condition requires
// the current status to be one of workflow.Predecessors(to) (or exactly ch.From when set) and, when
// expectedVersion is not AnyVersion, the version to equal it. The version increments, updated_at
// is set, the gsi1 keys follow the status (removed once terminal), the changes are applied, and an
// audit event is written in the same transaction. A refused transition returns a
// *TransitionError built from a consistent read of the current item; a missing operation returns
// ErrNotFound. The returned operation is read after the commit and may include later writes.
func (s *Store) Transition(ctx context.Context, tenant, id string, to workflow.Status, expectedVersion int64, ch record.Patch) (*record.Operation, error) {
	if err := checkOp(tenant, id); err != nil {
		return nil, err
	}
	preds := workflow.Predecessors(to)
	if ch.From != "" {
		if !workflow.CanMove(ch.From, to) {
			return nil, fmt.Errorf("%w: %s may not move to %s", record.ErrInvalidArgument, ch.From, to)
		}
		preds = []workflow.Status{ch.From}
	}
	if len(preds) == 0 {
		return nil, fmt.Errorf("%w: no status may move to %q", record.ErrInvalidArgument, to)
	}
	return s.transition(ctx, tenant, id, to, preds, expectedVersion, ch, fmt.Sprintf("transition operation %s to %s", id, to))
}

// Advance moves op, exactly as the caller read it, to status to: Transition's transaction,
// conditioned on all that another writer could have changed since the read (the status, the
// version, and the parked task token or its absence). With take it also removes that token
// (leaving the write's id in token_cleared_by, as ClearTaskToken does), so that the caller
// alone completes it. It returns the operation as the write left it, built from op without
// reading the table again (record.Patch.ApplyTo): one round trip where Transition needs two,
// and a waker's clear needs a third. Attributes other writers keep without a version (a
// live buy's delivery and sweep marks) are as op had them.
//
// A refused condition returns a *TransitionError built from the item as the refusal found it
// (kind version when its status still allows the move: the caller may advance from Current);
// a missing operation returns ErrNotFound.
func (s *Store) Advance(ctx context.Context, op *record.Operation, to workflow.Status, ch record.Patch, take bool) (*record.Operation, error) {
	if err := checkOp(op.Tenant, op.ID); err != nil {
		return nil, err
	}
	switch {
	case !workflow.CanMove(op.Status, to):
		return nil, fmt.Errorf("%w: %s may not move to %s", record.ErrInvalidArgument, op.Status, to)
	case ch.From != "" && ch.From != op.Status:
		return nil, fmt.Errorf("%w: the change is from %s, the operation is %s", record.ErrInvalidArgument, ch.From, op.Status)
	case take && op.TaskToken == "":
		return nil, fmt.Errorf("%w: no parked task token to take", record.ErrInvalidArgument)
	}
	token := expression.AttributeNotExists(expression.Name(attrTaskToken))
	if op.TaskToken != "" {
		token = expression.Name(attrTaskToken).Equal(expression.Value(op.TaskToken))
	}
	write, now := s.NewID(), s.now()
	in, err := s.transitionInput(op.Tenant, op.ID, to, []workflow.Status{op.Status}, op.Version, ch, now, write, take, token)
	if err != nil {
		return nil, err
	}
	failed, old, err := s.writeTx(ctx, in, fmt.Sprintf("advance operation %s to %s", op.ID, to))
	if err != nil {
		return nil, err
	}
	if failed {
		// Classified against every status that may move to to, not just op's: a refusal because
		// another writer moved the operation on is a version conflict while the move stays legal.
		preds := workflow.Predecessors(to)
		if ch.From != "" {
			preds = []workflow.Status{ch.From}
		}
		err := s.transitionConflict(ctx, op.Tenant, op.ID, to, preds, op.Version, old)
		if te, ok := errors.AsType[*record.TransitionError](err); !ok || te.Current.LastWrite != write {
			return nil, err
		}
		// This very write, retried by the SDK after its response was lost.
	}
	next := *op
	next.Status, next.Version, next.UpdatedAt, next.LastWrite = to, op.Version+1, now, write
	ch.ApplyTo(&next)
	if take {
		next.TaskToken = ""
	}
	return &next, nil
}

// UpdateFields applies changes to the tenant's pending operation without moving its status
// (a seller task id, a governance check, a deadline): condition status IN (every pending status)
// (or status = ch.From when set) and, unless expectedVersion is AnyVersion, version = expected.
// Like Transition it increments the version, refreshes updated_at and the gsi1 sort key, writes
// an "update" event in the same transaction, and reports a refusal as a *TransitionError (kind
// terminal or version) or ErrNotFound.
func (s *Store) UpdateFields(ctx context.Context, tenant, id string, expectedVersion int64, ch record.Patch) (*record.Operation, error) {
	if err := checkOp(tenant, id); err != nil {
		return nil, err
	}
	var preds []workflow.Status
	for _, st := range workflow.Statuses {
		if st.Pending() && (ch.From == "" || st == ch.From) {
			preds = append(preds, st)
		}
	}
	if len(preds) == 0 {
		return nil, fmt.Errorf("%w: %q is not a pending status", record.ErrInvalidArgument, ch.From)
	}
	return s.transition(ctx, tenant, id, "", preds, expectedVersion, ch, "update operation "+id)
}

// FollowChange records on a placed buy's operation what a change the seller answered made of
// it: its status to (completed, paused or canceled, from the buy's state) and its committed
// budget. Condition: the status is from (a placed status, as the caller read it), and the
// operation does not already read to with that budget, so a retry writes nothing twice. A
// status change is a transition event (and a status event on the bus), a budget change alone
// an update event; either carries the budget as its amount. An operation already as asked is
// returned as it is; any other refusal is a *TransitionError.
func (s *Store) FollowChange(ctx context.Context, tenant, id string, from, to workflow.Status, budget string, ch record.Patch) (*record.Operation, error) {
	if err := checkOp(tenant, id); err != nil {
		return nil, err
	}
	if !from.Placed() || (from != to && !workflow.FollowsChange(from, to)) {
		return nil, fmt.Errorf("%w: a placed buy may not follow a change from %s to %s", record.ErrInvalidArgument, from, to)
	}
	ch.From, ch.BudgetTotal = from, &budget
	if ch.EventType == "" {
		ch.EventType = record.EventTransition
		if from == to {
			ch.EventType = record.EventUpdate
		}
	}
	done := expression.Name(attrStatus).Equal(statusValue(to)).And(expression.Name("budget_total").Equal(expression.Value(budget)))
	write := s.NewID()
	in, err := s.transitionInput(tenant, id, to, []workflow.Status{from}, record.AnyVersion, ch, s.now(), write, false, expression.Not(done))
	if err != nil {
		return nil, err
	}
	what := fmt.Sprintf("operation %s follows a change to %s", id, to)
	failed, old, err := s.writeTx(ctx, in, what)
	if err != nil {
		return nil, err
	}
	if !failed {
		return s.GetOperation(ctx, tenant, id)
	}
	err = s.transitionConflict(ctx, tenant, id, to, []workflow.Status{from}, record.AnyVersion, old)
	if te, ok := errors.AsType[*record.TransitionError](err); ok && (te.Current.LastWrite == write || te.Current.Status == to && te.Current.BudgetTotal == budget) {
		return te.Current, nil // written already: this write retried by the SDK, or an earlier attempt
	}
	return nil, err
}

// transition writes the transaction of a transition (to set) or of an UpdateFields (to "") and
// reads the operation after it; what names the write in errors.
func (s *Store) transition(ctx context.Context, tenant, id string, to workflow.Status, preds []workflow.Status, expectedVersion int64, ch record.Patch, what string) (*record.Operation, error) {
	write := s.NewID()
	in, err := s.transitionInput(tenant, id, to, preds, expectedVersion, ch, s.now(), write, false)
	if err != nil {
		return nil, err
	}
	failed, old, err := s.writeTx(ctx, in, what)
	if err != nil {
		return nil, err
	}
	if failed {
		err := s.transitionConflict(ctx, tenant, id, to, preds, expectedVersion, old)
		if te, ok := errors.AsType[*record.TransitionError](err); ok && te.Current.LastWrite == write {
			return te.Current, nil // this very write, retried by the SDK after its response was lost
		}
		return nil, err
	}
	return s.GetOperation(ctx, tenant, id)
}

// transitionInput builds the transaction of a transition (to set) or of an UpdateFields (to ""),
// its condition narrowed further by the extra ones.
func (s *Store) transitionInput(tenant, id string, to workflow.Status, preds []workflow.Status, expectedVersion int64, ch record.Patch, now time.Time, write string, take bool, extra ...expression.ConditionBuilder) (*dynamodb.TransactWriteItemsInput, error) {
	cond := expression.Name(attrStatus).In(statusValue(preds[0]), statusOperands(preds[1:])...)
	if len(preds) == 1 {
		cond = expression.Name(attrStatus).Equal(statusValue(preds[0]))
	}
	if expectedVersion != record.AnyVersion {
		cond = cond.And(expression.Name(attrVersion).Equal(expression.Value(expectedVersion)))
	}
	for _, c := range extra {
		cond = cond.And(c)
	}
	up := expression.Set(expression.Name(attrVersion), expression.Name(attrVersion).Plus(expression.Value(1))).
		Set(expression.Name(attrUpdatedAt), expression.Value(now)).
		Set(expression.Name(attrLastWrite), expression.Value(write))
	switch {
	case to == "": // UpdateFields: the status stays (pending), only the gsi1 time moves
		up = up.Set(expression.Name(AttrGSI1SK), expression.Value(pendingSK(now, tenant, id)))
	case to == workflow.StatusCompleted:
		// A completed operation leaves the pending lists for the live one, due for its first
		// delivery read at once (ListLiveDue).
		up = up.Set(expression.Name(attrStatus), expression.Value(string(to))).
			Set(expression.Name(AttrGSI1PK), expression.Value(liveGSI)).
			Set(expression.Name(AttrGSI1SK), expression.Value(pendingSK(now, tenant, id)))
	case to == workflow.StatusPaused:
		// A paused buy stays live: what it delivered before the pause is still read.
		up = up.Set(expression.Name(attrStatus), expression.Value(string(to)))
	case to.Terminal():
		up = up.Set(expression.Name(attrStatus), expression.Value(string(to)))
		up = up.Remove(expression.Name(AttrGSI1PK)).Remove(expression.Name(AttrGSI1SK))
	default:
		up = up.Set(expression.Name(attrStatus), expression.Value(string(to))).
			Set(expression.Name(AttrGSI1PK), expression.Value(pendingGSI(string(to)))).
			Set(expression.Name(AttrGSI1SK), expression.Value(pendingSK(now, tenant, id)))
	}
	if to != "" && !to.Pending() {
		// Off the per-seller pending index (gsi3) too: the sweep's shards read only pending ones.
		up = up.Remove(expression.Name(attrGSI3PK)).Remove(expression.Name(attrGSI3SK))
	}
	if take {
		up = up.Remove(expression.Name(attrTaskToken)).Set(expression.Name(attrTokenClearedBy), expression.Value(write))
	}
	up = applyChanges(ch, up)
	e, err := build(expression.NewBuilder().WithCondition(cond).WithUpdate(up))
	if err != nil {
		return nil, err
	}
	evType := ch.EventType
	switch {
	case evType != "":
	case to == "":
		evType = record.EventUpdate
	default:
		evType = record.EventTransition
	}
	ev := record.Event{At: now, Type: evType, Actor: ch.Actor, From: ch.From, To: to, Detail: ch.Detail}
	if ch.Reason != nil {
		ev.Reason = *ch.Reason
	}
	if ch.BudgetTotal != nil {
		ev.Amount, ev.Currency = *ch.BudgetTotal, ch.EventCurrency
	}
	if expectedVersion != record.AnyVersion {
		ev.Version = expectedVersion + 1
	}
	evPut, err := s.eventPut(tenant, id, ev)
	if err != nil {
		return nil, err
	}
	return s.updateWithEvent(key(opPK(tenant, id), skOperation), e, evPut), nil
}

func statusValue(s workflow.Status) expression.OperandBuilder { return expression.Value(string(s)) }

func statusOperands(ss []workflow.Status) []expression.OperandBuilder {
	out := make([]expression.OperandBuilder, len(ss))
	for i, s := range ss {
		out[i] = statusValue(s)
	}
	return out
}

func applyChanges(ch record.Patch, up expression.UpdateBuilder) expression.UpdateBuilder {
	setS := func(name string, v *string) {
		if v != nil {
			up = up.Set(expression.Name(name), expression.Value(*v))
		}
	}
	setT := func(name string, v *time.Time) {
		if v != nil {
			up = up.Set(expression.Name(name), expression.Value(v.UTC()))
		}
	}
	setS("seller_task_id", ch.SellerTaskID)
	setS("media_buy_id", ch.MediaBuyID)
	setS("governance_check_id", ch.GovernanceCheckID)
	setS("governance_context", ch.GovernanceContext)
	setT("governance_expires_at", ch.GovernanceExpiresAt)
	setS("webhook_token_hash", ch.WebhookTokenHash)
	setS("reason", ch.Reason)
	setS("error_code", ch.ErrorCode)
	setT("deadline", ch.Deadline)
	setS("execution_name", ch.ExecutionName)
	setS("budget_total", ch.BudgetTotal)
	setS("seller_state", ch.SellerState)
	if ch.SellerPackages != nil {
		up = up.Set(expression.Name("seller_packages"), expression.Value(ch.SellerPackages))
	}
	return up
}

// transitionConflict classifies a failed transition from the current item.
func (s *Store) transitionConflict(ctx context.Context, tenant, id string, to workflow.Status, preds []workflow.Status, expected int64, old map[string]types.AttributeValue) error {
	item, err := s.oldOrRead(ctx, old, key(opPK(tenant, id), skOperation))
	if errors.Is(err, record.ErrNotFound) {
		return fmt.Errorf("ledger: transition operation %s: %w", id, record.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("ledger: transition operation %s: read current: %w", id, err)
	}
	cur, err := decodeOp(item)
	if err != nil {
		return err
	}
	te := &record.TransitionError{To: to, ExpectedVersion: expected, Current: cur, Kind: record.ConflictVersion}
	switch {
	case cur.Status.Terminal():
		te.Kind = record.ConflictTerminal
	case !slices.Contains(preds, cur.Status):
		te.Kind = record.ConflictIllegal
	}
	// Otherwise the status allows the move: the version differs, or the item changed between the
	// write and the read; either way the caller must re-read and decide again.
	return te
}

// SetTaskToken stores the task token the workflow now waits on and returns the operation as it
// is after the write, so the caller can see a terminal status that arrived first (the
// lost-wakeup race) and complete the token itself.
func (s *Store) SetTaskToken(ctx context.Context, tenant, id, token string) (*record.Operation, error) {
	if err := checkOp(tenant, id); err != nil {
		return nil, err
	}
	if token == "" {
		return nil, fmt.Errorf("%w: empty task token", record.ErrInvalidArgument)
	}
	out, err := s.update(ctx, key(opPK(tenant, id), skOperation),
		expression.AttributeExists(expression.Name(AttrPK)),
		expression.Set(expression.Name(attrTaskToken), expression.Value(token)), types.ReturnValueAllNew)
	if err != nil {
		if failed, _ := conditionFailed(err); failed {
			return nil, fmt.Errorf("ledger: set task token of operation %s: %w", id, record.ErrNotFound)
		}
		return nil, fmt.Errorf("ledger: set task token of operation %s: %w", id, err)
	}
	return decodeOp(out)
}

// ClearTaskToken removes the stored task token if it is still token.
func (s *Store) ClearTaskToken(ctx context.Context, tenant, id, token string) error {
	if err := checkOp(tenant, id); err != nil {
		return err
	}
	// The clear leaves its random id in token_cleared_by, so that a clear retried by the SDK
	// after its response was lost is recognised as this one: the caller won the wake.
	clear := s.NewID()
	k := key(opPK(tenant, id), skOperation)
	_, err := s.update(ctx, k, expression.Name(attrTaskToken).Equal(expression.Value(token)),
		expression.Remove(expression.Name(attrTaskToken)).Set(expression.Name(attrTokenClearedBy), expression.Value(clear)), "")
	if err != nil {
		failed, old := conditionFailed(err)
		if !failed {
			return fmt.Errorf("ledger: clear task token of operation %s: %w", id, err)
		}
		if item, rerr := s.oldOrRead(ctx, old, k); rerr == nil {
			var cur struct {
				ClearedBy string `dynamodbav:"token_cleared_by"`
			}
			if attributevalue.UnmarshalMap(item, &cur) == nil && cur.ClearedBy == clear {
				return nil
			}
		}
		return fmt.Errorf("ledger: clear task token of operation %s: %w", id, record.ErrTokenMismatch)
	}
	return nil
}

// ListOperations lists the tenant's operations, newest first (gsi2), as API views. The cursor is
// opaque (base64url of the last evaluated key) and is refused if it does not belong to the tenant.
func (s *Store) ListOperations(ctx context.Context, tenant string, o record.ListOptions) (record.Page[record.View], error) {
	if err := checkID("tenant", tenant); err != nil {
		return record.Page[record.View]{}, err
	}
	limit := clampLimit(o.Limit)
	start, err := decodeCursor(o.Cursor, func(k map[string]string) bool {
		return len(k) >= 2 && strings.HasPrefix(k[AttrPK], tenantPrefix(tenant)+"OP#") && k[AttrSK] == skOperation &&
			(k[attrGSI2PK] == "" || k[attrGSI2PK] == tenantGSI(tenant)) && onlyKeys(k, AttrPK, AttrSK, attrGSI2PK, attrGSI2SK)
	})
	if err != nil {
		return record.Page[record.View]{}, err
	}
	b := expression.NewBuilder().WithKeyCondition(expression.Key(attrGSI2PK).Equal(expression.Value(tenantGSI(tenant))))
	var filter []expression.ConditionBuilder
	if o.Status != "" {
		filter = append(filter, expression.Name(attrStatus).Equal(expression.Value(string(o.Status))))
	}
	if o.SellerID != "" {
		filter = append(filter, expression.Name(attrSellerID).Equal(expression.Value(o.SellerID)))
	}
	switch len(filter) {
	case 1:
		b = b.WithFilter(filter[0])
	case 2:
		b = b.WithFilter(filter[0].And(filter[1]))
	}
	e, err := build(b)
	if err != nil {
		return record.Page[record.View]{}, err
	}
	var page record.Page[record.View]
	for round := 0; round < maxListRounds; round++ {
		out, err := s.query(ctx, query{index: indexTenant, e: e, limit: limit - len(page.Items), start: start, backward: true})
		if err != nil {
			return record.Page[record.View]{}, fmt.Errorf("ledger: list operations of tenant %s: %w", tenant, err)
		}
		for _, item := range out.Items {
			op, err := decodeOp(item)
			if err != nil {
				return record.Page[record.View]{}, err
			}
			if op.Tenant != tenant { // defence in depth: the key already scopes it
				continue
			}
			page.Items = append(page.Items, op.View())
		}
		start = out.LastEvaluatedKey
		if len(start) == 0 || len(page.Items) >= limit {
			break
		}
	}
	return pageOf(page.Items, start)
}

func clampLimit(n int) int {
	switch {
	case n <= 0:
		return record.DefaultListLimit
	case n > record.MaxListLimit:
		return record.MaxListLimit
	}
	return n
}

func onlyKeys(k map[string]string, allowed ...string) bool {
	for name := range k {
		if !slices.Contains(allowed, name) {
			return false
		}
	}
	return true
}

// encodeCursor turns a LastEvaluatedKey (string attributes only) into an opaque cursor.
// pageOf is the page of items of a query that stopped at lek (none on the last page).
func pageOf[T any](items []T, lek map[string]types.AttributeValue) (record.Page[T], error) {
	page := record.Page[T]{Items: items}
	if len(lek) > 0 {
		c, err := encodeCursor(lek)
		if err != nil {
			return record.Page[T]{}, err
		}
		page.Cursor = c
	}
	return page, nil
}

func encodeCursor(lek map[string]types.AttributeValue) (string, error) {
	var m map[string]string
	if err := attributevalue.UnmarshalMap(lek, &m); err != nil {
		return "", fmt.Errorf("ledger: encode cursor: %w", err)
	}
	b, err := json.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("ledger: encode cursor: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// decodeCursor parses a cursor and checks it with valid; an empty cursor is the first page.
func decodeCursor(c string, valid func(map[string]string) bool) (map[string]types.AttributeValue, error) {
	if c == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", record.ErrInvalidCursor, err)
	}
	var m map[string]string
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%w: %w", record.ErrInvalidCursor, err)
	}
	if m[AttrPK] == "" || m[AttrSK] == "" || !valid(m) {
		return nil, record.ErrInvalidCursor
	}
	av, err := attributevalue.MarshalMap(m)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", record.ErrInvalidCursor, err)
	}
	return av, nil
}
