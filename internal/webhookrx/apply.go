package webhookrx

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/sfn"
	"github.com/buyflow/buyflow/internal/stages"
	"github.com/buyflow/buyflow/internal/workflow"
)

// EventWebhook is the event type of every webhook the receiver records (applied, stale or
// ignored).
const EventWebhook = "webhook"

// taskCreateMediaBuy is the only task buyflow registers a push_notification_config for.
const taskCreateMediaBuy = "create_media_buy"

// contentionRetries bounds the retries of a transition that lost a transaction race.
const contentionRetries = 4

// tokenMatches compares the echoed token's hash with the stored one in constant time. An
// operation without a stored hash never gave a token out, so nothing matches it.
func tokenMatches(token, storedHash string) bool {
	if token == "" || storedHash == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(ledger.HashToken(token)), []byte(storedHash)) == 1
}

// apply records d on op, forward only. A status the ledger refuses (older than, or equal to,
// what it holds) is stale; a delivery about another task is ignored; both leave an event. The
// returned operation is the one after the transition (with the parked task token, if any).
func (s *Service) apply(ctx context.Context, op *ledger.Operation, d *Delivery) (Outcome, *ledger.Operation, error) {
	actor := "seller:" + op.SellerID
	ev := map[string]any{"task_id": d.TaskID, "task_type": d.TaskType, "seller_status": d.Status,
		"idempotency_key": d.IdempotencyKey, "timestamp": d.Timestamp.Format(time.RFC3339Nano)}
	if d.NotificationID != "" {
		ev["notification_id"] = d.NotificationID
	}
	to, known := workflow.FromTaskStatus(d.Status)
	var why string
	switch {
	case d.TaskType != taskCreateMediaBuy:
		why = "not a create_media_buy task"
	case op.SellerTaskID != "" && d.TaskID != op.SellerTaskID:
		why = "another task than the operation's (" + truncate(op.SellerTaskID, 255) + ")"
	case !known:
		why = "a task status without lifecycle meaning"
	}
	if why != "" {
		s.event(ctx, op, ledger.Event{Type: EventWebhook, Actor: actor, Reason: "ignored: " + why, Detail: detail(ev)})
		return OutcomeIgnored, op, nil
	}

	ch := ledger.Changes{Actor: actor, EventType: EventWebhook}
	if op.SellerTaskID == "" {
		ch.SellerTaskID = &d.TaskID
	}
	switch to {
	case workflow.StatusCompleted:
		mb, derr := adcp.DecodeMediaBuy(d.Result)
		switch {
		case derr != nil && mb != nil && mb.Shape == adcp.ShapeError:
			to = workflow.StatusFailed
			r := truncate("the seller completed the task with an error: "+derr.Error(), 1000)
			ch.Reason = &r
		case derr == nil && mb.MediaBuyID != "":
			ch.MediaBuyID = &mb.MediaBuyID
			ev["media_buy_id"] = mb.MediaBuyID
		default:
			r := "the seller completed the task without a readable media buy in its result"
			ch.Reason = &r
		}
	case workflow.StatusFailed, workflow.StatusRejected, workflow.StatusCanceled:
		r := "the seller ended the task " + d.Status
		if d.Message != "" {
			r += ": " + d.Message
		}
		r = truncate(r, 1000)
		ch.Reason = &r
	case workflow.StatusInputRequired:
		if d.Message != "" {
			r := truncate(d.Message, 1000)
			ch.Reason = &r
		}
	}
	ch.Detail = detail(ev)

	cur, moved, err := s.moveVia(ctx, op, to, ch)
	if err != nil {
		return OutcomeError, nil, err
	}
	if !moved {
		ev["current_status"] = cur.Status
		s.event(ctx, cur, ledger.Event{Type: EventWebhook, Actor: actor, From: cur.Status, To: to,
			Reason: "stale: the ledger already holds " + string(cur.Status), Detail: detail(ev)})
		return OutcomeStale, cur, nil
	}
	return OutcomeApplied, cur, nil
}

// move transitions op to to, forward only; a refused transition returns the current operation
// and moved=false. A transaction race is retried: the condition is evaluated again.
func (s *Service) move(ctx context.Context, op *ledger.Operation, to workflow.Status, ch ledger.Changes) (*ledger.Operation, bool, error) {
	if op.Status == to {
		return op, false, nil
	}
	for attempt := 0; ; attempt++ {
		next, err := s.cfg.Ledger.Transition(ctx, op.Tenant, op.ID, to, ledger.AnyVersion, ch)
		var te *ledger.TransitionError
		switch {
		case err == nil:
			return next, true, nil
		case errors.As(err, &te) && te.Current != nil:
			return te.Current, false, nil
		case errors.Is(err, ledger.ErrContention) && attempt < contentionRetries:
			select {
			case <-ctx.Done():
				return nil, false, ctx.Err()
			case <-time.After(time.Duration(attempt+1) * 10 * time.Millisecond):
			}
		default:
			return nil, false, fmt.Errorf("webhookrx: move operation %s to %s: %w", op.ID, to, err)
		}
	}
}

// moveVia is move that, for a completion the table does not allow directly (awaiting_approval
// → completed after the seller's input-required was answered), takes the legal step through
// working first; the stages' poll does the same.
func (s *Service) moveVia(ctx context.Context, op *ledger.Operation, to workflow.Status, ch ledger.Changes) (*ledger.Operation, bool, error) {
	if to == workflow.StatusCompleted && !workflow.CanMove(op.Status, to) && op.Status != workflow.StatusWorking &&
		workflow.CanMove(op.Status, workflow.StatusWorking) && workflow.CanMove(workflow.StatusWorking, to) {
		mid, _, err := s.move(ctx, op, workflow.StatusWorking, ledger.Changes{Actor: ch.Actor, EventType: ch.EventType,
			SellerTaskID: ch.SellerTaskID, Detail: ch.Detail})
		if err != nil {
			return nil, false, err
		}
		op = mid
	}
	return s.move(ctx, op, to, ch)
}

// wake completes the parked AwaitSeller token when the update needs the state machine to act
// (stages.WakeOutput). Clearing the token first makes one waker win when a park, a poll or a
// second webhook race for it. A token that is gone is fine: the next park reads the ledger.
func (s *Service) wake(ctx context.Context, op *ledger.Operation) error {
	out := stages.WakeOutput(op, workflow.WaitState{}, s.cfg.RunConfig, s.now())
	if !out.NeedsDecision() || op.TaskToken == "" {
		return nil
	}
	switch err := s.cfg.Ledger.ClearTaskToken(ctx, op.Tenant, op.ID, op.TaskToken); {
	case errors.Is(err, ledger.ErrTokenMismatch):
		return nil // someone else completed or replaced the wait
	case err != nil:
		// Wake anyway: a double completion is answered "gone", a missed one costs a poll interval.
		s.log.WarnContext(ctx, "task token not cleared", "operationId", op.ID, "err", err)
	}
	err := s.cfg.Tasks.Succeed(ctx, op.TaskToken, out)
	switch {
	case errors.Is(err, sfn.ErrTaskGone):
		s.log.InfoContext(ctx, "wait already completed", "operationId", op.ID)
		return nil
	case err != nil:
		return fmt.Errorf("webhookrx: wake the wait of %s: %w", op.ID, err)
	}
	return nil
}

// event appends an audit event to the operation's timeline. A failure is logged, not
// returned: the receipt is already stored, so failing the delivery would not make the seller's
// retry record it either.
func (s *Service) event(ctx context.Context, op *ledger.Operation, ev ledger.Event) {
	if ev.Amount == "" && op.BudgetTotal != "" {
		ev.Amount, ev.Currency = op.BudgetTotal, op.Currency
	}
	if err := s.cfg.Ledger.AppendEvent(ctx, op.Tenant, op.ID, ev); err != nil {
		s.log.WarnContext(ctx, "webhook event not recorded", "operationId", op.ID, "err", err)
	}
}

func detail(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

// truncate bounds untrusted text before it goes into the ledger.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
