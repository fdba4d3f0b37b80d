package reconcile

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sfnapi "github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/sfn"
	"github.com/buyflow/buyflow/internal/stages"
	"github.com/buyflow/buyflow/internal/workflow"
)

// codeNotFound is the AdCP error code get_task_status answers for a task the seller does not
// know (for this principal).
const codeNotFound = "REFERENCE_NOT_FOUND"

// contentionRetries bounds the retries of a transition that lost a transaction race.
const contentionRetries = 4

// pollAndApply polls the operation's task directly and records what the seller says, forward
// only, waking the workflow when it must act. A task the seller does not know fails the
// operation once it waited longer than Grace. It returns the operation as it now is (op itself
// when nothing changed or on error).
func (s *Service) pollAndApply(ctx context.Context, r *run, seller string, account *adcp.AccountRef, op *ledger.Operation) (*ledger.Operation, error) {
	ts, err := s.cfg.AdCP.GetTaskStatus(ctx, seller, adcp.GetTaskStatusRequest{TaskID: op.SellerTaskID, Account: account, IncludeResult: true})
	var ae *adcp.Error
	switch {
	case errors.As(err, &ae) && ae.Code == codeNotFound:
		if s.now().Sub(op.UpdatedAt) < s.cfg.Grace {
			return op, nil
		}
		return s.failUnknown(ctx, r, seller, op)
	case err != nil:
		r.rec.Count(metrics.AdcpErrors, metrics.Dims{"Code": errorCode(err)}, 1)
		return op, fmt.Errorf("get_task_status %s at %s: %w", op.SellerTaskID, seller, err)
	}
	return s.apply(ctx, r, seller, op, ts)
}

// apply records a polled task status the way the webhook and the poll stage do (same mapping,
// same forward-only moves, same wake), with event type "reconcile".
func (s *Service) apply(ctx context.Context, r *run, seller string, op *ledger.Operation, ts *adcp.TaskStatusResult) (*ledger.Operation, error) {
	to, ok := workflow.FromTaskStatus(string(ts.Status))
	if !ok || to == op.Status {
		return op, nil
	}
	ev := map[string]any{"task_id": op.SellerTaskID, "seller_status": ts.Status, "source": "reconcile"}
	ch := ledger.Changes{Actor: "seller:" + seller, EventType: EventReconcile}
	switch to {
	case workflow.StatusCompleted:
		mb, derr := adcp.DecodeMediaBuy(ts.Result)
		switch {
		case derr != nil && mb != nil && mb.Shape == adcp.ShapeError:
			to = workflow.StatusFailed
			reason := truncate("the seller completed the task with an error: "+derr.Error(), 1000)
			ch.Reason = &reason
		case derr == nil && mb.MediaBuyID != "":
			ch.MediaBuyID = &mb.MediaBuyID
			ev["media_buy_id"] = mb.MediaBuyID
		default:
			reason := "the seller completed the task without a readable media buy in its result"
			ch.Reason = &reason
		}
	case workflow.StatusFailed, workflow.StatusRejected, workflow.StatusCanceled:
		reason := "the seller ended the task " + string(ts.Status)
		if f := ts.Failure(); f != nil {
			reason += ": " + f.Error()
		}
		reason = truncate(reason, 1000)
		ch.Reason = &reason
	}
	ch.Detail = detail(ev)
	cur, moved, err := s.moveVia(ctx, op, to, ch)
	if err != nil {
		return op, err
	}
	if !moved {
		return cur, nil
	}
	r.finding(KindLostUpdate)
	if to.Terminal() {
		if created, perr := time.Parse(time.RFC3339, ts.CreatedAt); perr == nil {
			r.rec.Duration(metrics.SellerTaskDuration, metrics.Dims{"Status": string(ts.Status)}, s.now().Sub(created))
		}
	}
	s.log.WarnContext(ctx, "seller update recorded by reconciliation (a webhook was lost or late)", "operationId", op.ID,
		"seller", seller, "from", op.Status, "to", cur.Status)
	s.wake(ctx, cur)
	return cur, nil
}

// failUnknown fails an operation whose task the seller does not know, and wakes the workflow
// so that it records the failure (report failed) and ends.
func (s *Service) failUnknown(ctx context.Context, r *run, seller string, op *ledger.Operation) (*ledger.Operation, error) {
	reason := truncate(fmt.Sprintf("the seller %s does not know task %s (not in list_tasks, get_task_status answered %s) after waiting %s; nothing was adopted or canceled",
		seller, op.SellerTaskID, codeNotFound, s.now().Sub(op.UpdatedAt).Round(time.Minute)), 1000)
	ch := ledger.Changes{Reason: &reason, Actor: Actor, EventType: EventReconcile,
		Detail: detail(map[string]any{"task_id": op.SellerTaskID, "finding": KindUnknownTask})}
	cur, moved, err := s.move(ctx, op, workflow.StatusFailed, ch)
	if err != nil {
		return op, err
	}
	if !moved {
		return cur, nil
	}
	r.finding(KindUnknownTask)
	s.log.ErrorContext(ctx, "operation failed: the seller does not know its task", "operationId", op.ID, "seller", seller)
	s.wake(ctx, cur)
	return cur, nil
}

// move transitions op to to, forward only; a refused transition returns the current operation
// and moved=false. A transaction race is retried.
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
				return op, false, ctx.Err()
			case <-time.After(time.Duration(attempt+1) * 10 * time.Millisecond):
			}
		default:
			return op, false, fmt.Errorf("move operation %s to %s: %w", op.ID, to, err)
		}
	}
}

// moveVia takes the legal step through working for a completion the table does not allow
// directly (awaiting_approval → completed), as the webhook and the poll stage do.
func (s *Service) moveVia(ctx context.Context, op *ledger.Operation, to workflow.Status, ch ledger.Changes) (*ledger.Operation, bool, error) {
	if to == workflow.StatusCompleted && !workflow.CanMove(op.Status, to) && op.Status != workflow.StatusWorking &&
		workflow.CanMove(op.Status, workflow.StatusWorking) && workflow.CanMove(workflow.StatusWorking, to) {
		mid, _, err := s.move(ctx, op, workflow.StatusWorking, ledger.Changes{Actor: ch.Actor, EventType: ch.EventType, Detail: ch.Detail})
		if err != nil {
			return op, false, err
		}
		op = mid
	}
	return s.move(ctx, op, to, ch)
}

// wake completes the parked AwaitSeller token when the operation needs the state machine
// (stages.WakeOutput, as the webhook does). Clearing the token first makes one waker win.
func (s *Service) wake(ctx context.Context, op *ledger.Operation) {
	out := stages.WakeOutput(op, workflow.WaitState{}, s.cfg.RunConfig, s.now())
	if !out.NeedsDecision() || op.TaskToken == "" {
		return
	}
	switch err := s.cfg.Ledger.ClearTaskToken(ctx, op.Tenant, op.ID, op.TaskToken); {
	case errors.Is(err, ledger.ErrTokenMismatch):
		return // someone else completed or replaced the wait
	case err != nil:
		s.log.WarnContext(ctx, "task token not cleared", "operationId", op.ID, "err", err)
	}
	err := s.cfg.Tasks.Succeed(ctx, op.TaskToken, out)
	switch {
	case errors.Is(err, sfn.ErrTaskGone):
		s.log.InfoContext(ctx, "wait already completed", "operationId", op.ID)
		return
	case err != nil:
		// The ledger holds the truth; the wait's own timeout polls it.
		s.log.WarnContext(ctx, "workflow not woken", "operationId", op.ID, "err", err)
		return
	}
	if err := s.cfg.Ledger.AppendEvent(ctx, op.Tenant, op.ID, ledger.Event{Type: stages.EventWake, Actor: Actor,
		Detail: detail(map[string]any{"by": "reconcile", "status": out.Status})}); err != nil {
		s.log.WarnContext(ctx, "wake event not recorded", "operationId", op.ID, "err", err)
	}
	s.log.InfoContext(ctx, "workflow woken by reconciliation", "operationId", op.ID, "status", out.Status)
}

// mark records a reason on a stuck operation (ledger.UpdateFields: reason + an "update" event)
// unless it already carries that reason. The version check makes it lose to any concurrent
// change, which the next sweep looks at again.
func (s *Service) mark(ctx context.Context, op *ledger.Operation, kind, reason string, extra map[string]any) {
	reason = truncate(reason, 1000)
	s.log.ErrorContext(ctx, "operation stuck", "operationId", op.ID, "tenant", op.Tenant, "kind", kind, "status", op.Status)
	if op.Reason == reason {
		return
	}
	d := map[string]any{"finding": kind}
	for k, v := range extra {
		d[k] = v
	}
	_, err := s.cfg.Ledger.UpdateFields(ctx, op.Tenant, op.ID, op.Version, ledger.Changes{Reason: &reason, Actor: Actor,
		EventType: EventReconcile, Detail: detail(d)})
	var te *ledger.TransitionError
	if err != nil && !errors.As(err, &te) {
		s.log.WarnContext(ctx, "stuck operation not marked", "operationId", op.ID, "err", err)
	}
}

// orphan records a listed task no pending operation waits on, once per OrphanRenotify: an
// event on the orphan pseudo-operation for a person to decide. Nothing else is done with it.
func (s *Service) orphan(ctx context.Context, r *run, seller string, t listedTask) {
	if t.TaskType != "" && t.TaskType != taskCreateMediaBuy {
		return
	}
	if created, err := time.Parse(time.RFC3339, t.CreatedAt); err == nil && s.now().Sub(created) < s.cfg.Grace {
		return // the create may not be recorded yet
	}
	r.finding(KindOrphan)
	var c struct {
		OperationID string `json:"operation_id"`
	}
	_ = json.Unmarshal(t.Context, &c) // optional: most sellers list no context
	sum := sha256.Sum256([]byte(seller + "\x00" + t.TaskID))
	_, err := s.cfg.Ledger.AcquireLock(ctx, "ORPHAN#"+hex.EncodeToString(sum[:]), r.id, s.cfg.OrphanRenotify)
	var held *ledger.LockHeldError
	switch {
	case errors.As(err, &held):
		return // recorded within OrphanRenotify
	case err != nil:
		s.log.WarnContext(ctx, "orphan dedupe failed; recording anyway", "seller", seller, "err", err)
	}
	s.log.WarnContext(ctx, "orphan seller task", "seller", seller, "taskId", t.TaskID, "taskStatus", t.Status,
		"operationId", c.OperationID, "createdAt", t.CreatedAt)
	ev := ledger.Event{Type: EventOrphan, Actor: "seller:" + seller,
		Reason: truncate(fmt.Sprintf("seller %s has a %s task %s (%s, created %s) carrying buyflow's context that no pending operation waits on; decide by hand (see the reconcile runbook)",
			seller, t.TaskType, t.TaskID, t.Status, t.CreatedAt), 1000),
		Detail: detail(map[string]any{"seller": seller, "task_id": t.TaskID, "task_type": t.TaskType, "status": t.Status,
			"created_at": t.CreatedAt, "updated_at": t.UpdatedAt, "operation_id": c.OperationID})}
	if err := s.cfg.Ledger.AppendEvent(ctx, OrphanTenant, OrphanOperation, ev); err != nil {
		s.log.ErrorContext(ctx, "orphan not recorded", "seller", seller, "taskId", t.TaskID, "err", err)
	}
}

// endedExecution describes the last execution of an operation that is no longer running.
type endedExecution struct {
	Name      string
	Status    string
	StoppedAt string
}

// executionEnded follows the operation's executions through their continue-as-new
// generations (workflow.ExecutionName) and returns the last one if it is not RUNNING, or nil.
func (s *Service) executionEnded(ctx context.Context, op *ledger.Operation) (*endedExecution, error) {
	if op.ExecutionName != workflow.ExecutionName(op.ID, 0) {
		// A name this package cannot follow: judge that one execution.
		return s.describe(ctx, op.ExecutionName)
	}
	var last *endedExecution
	for g := 0; g < s.cfg.MaxGenerations; g++ {
		name := workflow.ExecutionName(op.ID, g)
		out, err := s.cfg.Executions.DescribeExecution(ctx, &sfnapi.DescribeExecutionInput{ExecutionArn: aws.String(sfn.ExecutionARN(s.cfg.StateMachineARN, name))})
		var missing *sfntypes.ExecutionDoesNotExist
		switch {
		case errors.As(err, &missing) && g > 0:
			return last, nil // the chain ends with last
		case errors.As(err, &missing):
			return &endedExecution{Name: name, Status: "DOES_NOT_EXIST"}, nil // never started
		case err != nil:
			return nil, fmt.Errorf("describe execution %s: %w", name, err)
		case out.Status == sfntypes.ExecutionStatusRunning || out.Status == sfntypes.ExecutionStatusPendingRedrive:
			return nil, nil
		}
		last = &endedExecution{Name: name, Status: string(out.Status)}
		if out.StopDate != nil {
			last.StoppedAt = out.StopDate.UTC().Format(time.RFC3339)
		}
	}
	return last, nil
}

func (s *Service) describe(ctx context.Context, name string) (*endedExecution, error) {
	out, err := s.cfg.Executions.DescribeExecution(ctx, &sfnapi.DescribeExecutionInput{ExecutionArn: aws.String(sfn.ExecutionARN(s.cfg.StateMachineARN, name))})
	if err != nil {
		return nil, fmt.Errorf("describe execution %s: %w", name, err)
	}
	if out.Status == sfntypes.ExecutionStatusRunning || out.Status == sfntypes.ExecutionStatusPendingRedrive {
		return nil, nil
	}
	e := &endedExecution{Name: name, Status: string(out.Status)}
	if out.StopDate != nil {
		e.StoppedAt = out.StopDate.UTC().Format(time.RFC3339)
	}
	return e, nil
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
