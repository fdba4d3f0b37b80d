package webhook

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"time"

	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/sellertask"
	"github.com/buyflow/buyflow/internal/workflow"
)

// The tasks buyflow registers a push_notification_config for: a buy's create, and the update
// of a change to a placed buy (an operation of kind modification).
const (
	taskCreateMediaBuy = "create_media_buy"
	taskUpdateMediaBuy = "update_media_buy"
)

// tokenMatches compares the echoed token's hash with the stored one in constant time. An
// operation without a stored hash never gave a token out, so nothing matches it.
func tokenMatches(token, storedHash string) bool {
	if token == "" || storedHash == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(record.HashToken(token)), []byte(storedHash)) == 1
}

// apply records d on op, forward only (sellertask.RecordStatus). A status the ledger refuses
// (older than, or equal to, what it holds) is stale; a delivery about another task type, or
// with a status without lifecycle meaning, is ignored; both leave an event (the handler has
// refused one about another task of the same type). The returned operation is
// the one after the transition; token is the parked task token the transition took, when the
// status it reached needs the state machine (sellertask.Update.Take): the wake completes it.
func (s *Service) apply(ctx context.Context, op *record.Operation, d *Delivery) (o Outcome, cur *record.Operation, token string, err error) {
	actor := "seller:" + op.SellerID
	ev := deliveryFields(d)
	var why string
	want := taskCreateMediaBuy
	if op.Kind == record.KindModification {
		want = taskUpdateMediaBuy
	}
	if d.TaskType != want {
		why = "not a " + want + " task"
	}
	if why == "" {
		rec, err := sellertask.RecordStatus(ctx, s.taskDeps(), op, sellertask.Update{Status: d.Status, TaskID: d.TaskID,
			Result: d.Result, Message: d.Message, Actor: actor, EventType: record.EventWebhook, Detail: ev, Take: true})
		switch {
		case err != nil:
			return outcomeError, nil, "", fmt.Errorf("webhook: %w", err)
		case rec.Outcome == sellertask.Applied:
			return OutcomeApplied, rec.Op, rec.Token, nil
		case rec.Outcome == sellertask.Stale:
			// No From/To: the timeline's From/To mark moves of the buy, and this moved nothing
			// (finance and the status events would read completed → completed).
			cur := rec.Op
			ev["current_status"], ev["reported_status"] = cur.Status, rec.To
			s.event(ctx, cur, record.Event{Type: record.EventWebhook, Actor: actor,
				Reason: "stale: the ledger already holds " + string(cur.Status), Detail: record.EventDetail(ev)})
			return OutcomeStale, cur, "", nil
		}
		why = "a task status without lifecycle meaning" // sellertask.Unmapped
	}
	s.event(ctx, op, record.Event{Type: record.EventWebhook, Actor: actor, Reason: "ignored: " + why, Detail: record.EventDetail(ev)})
	return OutcomeIgnored, op, "", nil
}

// deliveryFields is what the timeline keeps of a delivery (never its token).
func deliveryFields(d *Delivery) map[string]any {
	ev := map[string]any{"task_id": d.TaskID, "task_type": d.TaskType, "seller_status": d.Status,
		"idempotency_key": d.IdempotencyKey, "timestamp": d.Timestamp.Format(time.RFC3339Nano)}
	if d.NotificationID != "" {
		ev["notification_id"] = d.NotificationID
	}
	// The seller's own words (an IO review under way, why it needs input) are often the only
	// thing that says what a long wait is for: kept on every delivery's event, bounded.
	if m := sellertask.Message(d.Message); m != "" {
		ev["message"] = m
	}
	return ev
}

func deliveryDetail(d *Delivery) json.RawMessage { return record.EventDetail(deliveryFields(d)) }

// wake completes the parked AwaitSeller token when the update needs the state machine to act
// (sellertask.Wake): the token the update's own write took, else the stored one, cleared first
// so that one waker wins; a gone token is fine. The webhook appends no wake event: its own
// event records the delivery.
func (s *Service) wake(ctx context.Context, op *record.Operation, taken string) error {
	if _, err := sellertask.Wake(ctx, s.taskDeps(), op, taken, workflow.WaitState{}, s.cfg.RunConfig, s.now()); err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	return nil
}

// taskDeps is what the shared task-update code needs from the receiver.
func (s *Service) taskDeps() sellertask.Deps {
	return sellertask.Deps{Ledger: s.cfg.Ledger, Tasks: s.cfg.Tasks, Metrics: s.cfg.Metrics, Now: s.now, Log: s.log}
}

// event appends an audit event to the operation's timeline. A failure is logged, not
// returned: the receipt is already stored, so failing the delivery would not make the seller's
// retry record it either.
func (s *Service) event(ctx context.Context, op *record.Operation, ev record.Event) {
	if ev.Amount == "" && op.BudgetTotal != "" {
		ev.Amount, ev.Currency = op.BudgetTotal, op.Currency
	}
	if err := s.cfg.Ledger.AppendEvent(ctx, op.Tenant, op.ID, ev); err != nil {
		s.log.WarnContext(ctx, "webhook event not recorded", "operationId", op.ID, "err", err)
	}
}
