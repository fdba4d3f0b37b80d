package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/buyflow/buyflow/internal/workflow"
)

// The event types of an operation's timeline: finance's contract, so every writer names its
// events from this one list.
const (
	// Written by the ledger itself.
	EventCreated    = "created"    // the operation was created (submit)
	EventTransition = "transition" // a status change without a more specific type
	EventUpdate     = "update"     // fields changed without a status change
	EventDecision   = "decision"   // an approver's decision (approve)

	// The governance stage.
	EventGovernanceCheck = "governance_check" // detail: verdict, decision, conditions; read by the approval page
	EventOutcomeReport   = "outcome_report"   // report_plan_outcome sent
	EventFailure         = "failure"          // the workflow's Catch recorded a failure
	EventLockReleased    = "lock_released"    // the business-key (PO number) lock was released

	// The create stage.
	EventSellerCall       = "seller_call"        // create_media_buy (or its resend) answered
	EventLapsedClaimCheck = "lapsed_claim_check" // get_media_buys asked whether a lapsed create or change was executed
	EventCancel           = "cancel"             // update_media_buy cancel (compensation)

	// Any stage that calls an agent.
	// EventAgentUnavailable records a call not sent because the agent's circuit breaker is
	// open: detail agent_id, role (seller or governance), since (the breaker opened),
	// retry_at; the buy waits and tries again. Read by the buy's projection.
	EventAgentUnavailable = "agent_unavailable"

	// The seller wait: the poll stage, the webhook receiver and the sweep.
	EventPoll    = "poll"    // a get_task_status answer or failure
	EventWebhook = "webhook" // a seller webhook (applied, stale or ignored)
	EventWake    = "wake"    // a parked AwaitSeller token was completed; detail.by says who

	// The reconciliation sweep.
	EventReconcile = "reconcile" // an update applied, a failure or a stuck mark by the sweep
	EventOrphan    = "orphan"    // a seller task no operation waits on (on the orphan pseudo-operation)

	// The approval step (notify, approve).
	EventApprovalRequested = "approval_requested" // detail: approval_id; read by the buy's projection and the governance stage
	EventApprovalExpired   = "approval_expired"
	EventApprovalRefused   = "approval_refused"
	// EventApprovalViewed records a GET of a validly signed link: who the link is for, from
	// where, with which user agent (a Slack unfurler or mail scanner shows up here), and what
	// the page said. It is audit only: it never changes the approval.
	EventApprovalViewed = "approval_viewed"

	// A change to a placed buy (modify), on the timeline of the buy it changes and of the change.
	EventModificationRequested       = "modification_requested"
	EventModificationGovernanceCheck = "modification_governance_check"
	EventModificationSellerCall      = "modification_seller_call" // update_media_buy answered
	EventModificationApplied         = "modification_applied"     // the seller's new revision recorded
	EventModificationEnded           = "modification_ended"       // rejected, failed or expired
	EventModificationOutcomeReport   = "modification_outcome_report"

	// The delivery read after each sweep: a new snapshot, spend against the approved budget.
	EventDelivery = "delivery"

	// A campaign's own timeline opens with its submit (shown by GET /v1/campaigns/{id}/events).
	EventCampaignSubmitted = "campaign_submitted"
)

// EventDetail encodes v as an event's Detail; a value that does not encode leaves no detail
// (the event is a record of a step that already happened and must not fail it).
func EventDetail(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

// Clip bounds untrusted text (a seller's message, an error) to at most n bytes before it goes
// into an event, a reason or an output, cutting at a character boundary and marking the cut
// with "…".
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// Event is one entry of an operation's append-only audit timeline.
type Event struct {
	At   time.Time `dynamodbav:"at" json:"at"`
	Type string    `dynamodbav:"type" json:"type"`
	// Actor is who caused the event (a principal, "seller:<id>", "approver:<id>", "system").
	Actor string          `dynamodbav:"actor,omitempty" json:"actor,omitempty"`
	From  workflow.Status `dynamodbav:"from,omitempty" json:"from,omitempty"`
	To    workflow.Status `dynamodbav:"to,omitempty" json:"to,omitempty"`
	// Version is the operation version the event produced, when known.
	Version  int64  `dynamodbav:"version,omitempty" json:"version,omitempty"`
	Amount   string `dynamodbav:"amount,omitempty" json:"amount,omitempty"`
	Currency string `dynamodbav:"currency,omitempty" json:"currency,omitempty"`
	Reason   string `dynamodbav:"reason,omitempty" json:"reason,omitempty"`
	// Detail is free-form JSON (call arguments summary, webhook task id, decision comment...).
	Detail json.RawMessage `dynamodbav:"detail,omitempty" json:"detail,omitempty"`
}

type eventItem struct {
	PK          string `dynamodbav:"pk"`
	SK          string `dynamodbav:"sk"`
	Tenant      string `dynamodbav:"tenant"`
	OperationID string `dynamodbav:"operation_id"`
	Event
}

// eventSK is "EV#<fixed-width RFC 3339 UTC>#<process sequence>-<random>": time order first; for
// events of one process in the same nanosecond, write order; the random part keeps keys of
// different processes apart.
func (s *Store) eventSK(at time.Time) string {
	return fmt.Sprintf("%s%s#%012d-%s", skEventPfx, fmtTime(at), s.seq.Add(1), s.NewID())
}

// eventPut builds the conditional Put of one event (attribute_not_exists: never overwritten).
func (s *Store) eventPut(tenant, opID string, ev Event) (types.TransactWriteItem, error) {
	in, err := s.eventInput(tenant, opID, ev)
	if err != nil {
		return types.TransactWriteItem{}, err
	}
	return types.TransactWriteItem{Put: &types.Put{
		TableName: in.TableName, Item: in.Item, ConditionExpression: in.ConditionExpression,
		ExpressionAttributeNames: in.ExpressionAttributeNames, ExpressionAttributeValues: in.ExpressionAttributeValues,
	}}, nil
}

func (s *Store) eventInput(tenant, opID string, ev Event) (*dynamodb.PutItemInput, error) {
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
	e, err := build(expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name(AttrPK))))
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
func (s *Store) AppendEvent(ctx context.Context, tenant, opID string, ev Event) error {
	if err := checkID("tenant", tenant); err != nil {
		return err
	}
	if err := checkID("operation id", opID); err != nil {
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
func (s *Store) AppendEventWhile(ctx context.Context, tenant, opID string, status workflow.Status, ev Event) error {
	if err := checkID("tenant", tenant); err != nil {
		return err
	}
	if err := checkID("operation id", opID); err != nil {
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
		if _, gerr := s.getItem(ctx, k); errors.Is(gerr, ErrNotFound) {
			return ErrNotFound
		}
		return fmt.Errorf("ledger: append %s event to operation %s: not %s: %w", ev.Type, opID, status, ErrConflict)
	case contention:
		return fmt.Errorf("ledger: append %s event to operation %s: %w", ev.Type, opID, ErrContention)
	}
	return fmt.Errorf("ledger: append %s event to operation %s: %w", ev.Type, opID, err)
}

// ListEvents returns the timeline of the tenant's operation opID in time order, one page at a
// time. An operation of another tenant (or none) is ErrNotFound. A campaign's own timeline (its
// approval's events) is kept as an operation's under the campaign id (campaign and operation
// ids never collide), so opID may name the tenant's campaign.
func (s *Store) ListEvents(ctx context.Context, tenant, opID string, limit int, cursor string) (Page[Event], error) {
	if _, err := s.GetOperation(ctx, tenant, opID); errors.Is(err, ErrNotFound) {
		if _, cerr := s.GetCampaign(ctx, tenant, opID); cerr != nil {
			return Page[Event]{}, fmt.Errorf("ledger: list events: %w", err)
		}
	} else if err != nil {
		return Page[Event]{}, fmt.Errorf("ledger: list events: %w", err)
	}
	pk := opPK(tenant, opID)
	start, err := decodeCursor(cursor, func(k map[string]string) bool {
		return k[AttrPK] == pk && strings.HasPrefix(k[AttrSK], skEventPfx) && onlyKeys(k, AttrPK, AttrSK)
	})
	if err != nil {
		return Page[Event]{}, err
	}
	kc := expression.Key(AttrPK).Equal(expression.Value(pk)).And(expression.Key(AttrSK).BeginsWith(skEventPfx))
	e, err := build(expression.NewBuilder().WithKeyCondition(kc))
	if err != nil {
		return Page[Event]{}, err
	}
	out, err := s.api.Query(ctx, &dynamodb.QueryInput{
		TableName: aws.String(s.table), KeyConditionExpression: e.KeyCondition(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		Limit: aws.Int32(int32(clampLimit(limit))), ExclusiveStartKey: start, ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return Page[Event]{}, fmt.Errorf("ledger: list events of operation %s: %w", opID, err)
	}
	var page Page[Event]
	for _, item := range out.Items {
		var it eventItem
		if err := attributevalue.UnmarshalMap(item, &it); err != nil {
			return Page[Event]{}, fmt.Errorf("ledger: decode event of operation %s: %w", opID, err)
		}
		page.Items = append(page.Items, it.Event)
	}
	if len(out.LastEvaluatedKey) > 0 {
		if page.Cursor, err = encodeCursor(out.LastEvaluatedKey); err != nil {
			return Page[Event]{}, err
		}
	}
	return page, nil
}
