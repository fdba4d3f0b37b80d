package reconcile

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/sellertask"
	"github.com/buyflow/buyflow/internal/sfn"
	"github.com/buyflow/buyflow/internal/workflow"
)

// pollAndApply polls the operation's task directly and records what the seller says, forward
// only, waking the workflow when it must act. A task the seller does not know fails the
// operation once the lost-task grace (the run configuration's) passed since the seller first
// said so. It returns the operation as it now is (op itself when nothing changed or on error).
func (s *Service) pollAndApply(ctx context.Context, r *shard, seller string, account *adcp.AccountRef, op *record.Operation) (*record.Operation, error) {
	ts, err := s.cfg.AdCP.GetTaskStatus(ctx, seller, adcp.GetTaskStatusRequest{TaskID: op.SellerTaskID, Account: account, IncludeResult: true})
	switch {
	case sellertask.TaskLost(err):
		return s.lost(ctx, r, seller, op)
	case err != nil:
		r.rec.Count(metrics.AdcpErrors, metrics.Dims{"Code": adcp.MetricCode(err)}, 1)
		return op, fmt.Errorf("get_task_status %s at %s: %w", op.SellerTaskID, seller, err)
	}
	return s.apply(ctx, r, seller, op, ts)
}

// apply records a polled task status the way the webhook and the poll stage do
// (sellertask.RecordStatus: same mapping, same forward-only moves; a repeat is no news), with
// event type "reconcile", and wakes the workflow (sellertask.Wake) when it must act.
func (s *Service) apply(ctx context.Context, r *shard, seller string, op *record.Operation, ts *adcp.TaskStatusResult) (*record.Operation, error) {
	u := sellertask.UpdateFrom(ts)
	u.TaskID, u.Actor, u.EventType, u.SkipRepeat, u.Take = op.SellerTaskID, "seller:"+seller, record.EventReconcile, true, true
	u.Detail = map[string]any{"task_id": op.SellerTaskID, "seller_status": ts.Status, "source": "reconcile"}
	rec, err := sellertask.RecordStatus(ctx, s.taskDeps(r), op, u)
	if err != nil {
		return op, err
	}
	if rec.Outcome != sellertask.Applied {
		return rec.Op, nil
	}
	cur := rec.Op
	r.finding(KindLostUpdate)
	s.log.WarnContext(ctx, "seller update recorded by reconciliation (a webhook was lost or late)", "operationId", op.ID,
		"seller", seller, "from", op.Status, "to", cur.Status)
	s.wake(ctx, cur, rec.Token)
	return cur, nil
}

// lost handles a task the seller does not know the way the poll stage does
// (sellertask.RecordLost: the grace from the first such answer, then a failure with the
// lost-task finding), and wakes the workflow once the operation failed, so that it records the
// failure (report failed) and ends.
func (s *Service) lost(ctx context.Context, r *shard, seller string, op *record.Operation) (*record.Operation, error) {
	rec, err := sellertask.RecordLost(ctx, s.taskDeps(r), op, sellertask.Lost{Seller: seller, Actor: actor, EventType: record.EventReconcile})
	if err != nil {
		return op, err
	}
	if rec.Outcome != sellertask.LostFailed {
		return rec.Op, nil
	}
	r.finding(KindUnknownTask)
	s.wake(ctx, rec.Op, "")
	return rec.Op, nil
}

// taskDeps is what the shared task-update code needs from the sweep: SellerTaskDuration goes to
// the run's recorder (none when r is nil), and a wake leaves a wake event by the sweep.
func (s *Service) taskDeps(r *shard) sellertask.Deps {
	d := sellertask.Deps{Ledger: s.cfg.Ledger, Tasks: s.cfg.Tasks, Timeline: s.cfg.Ledger, Grace: s.cfg.RunConfig.LostTaskGrace(),
		WakeActor: actor, WakeBy: "reconcile", Now: s.now, Log: s.log}
	if r != nil {
		d.Metrics = r.rec
	}
	return d
}

// wake completes the parked AwaitSeller token when the operation needs the state machine
// (sellertask.Wake, as the webhook does): taken, when the update's own write took it, else the
// stored one. A failure is logged: the ledger holds the truth and the wait's own timeout polls
// it.
func (s *Service) wake(ctx context.Context, op *record.Operation, taken string) {
	woken, err := sellertask.Wake(ctx, s.taskDeps(nil), op, taken, workflow.WaitState{}, s.cfg.RunConfig, s.now())
	switch {
	case err != nil:
		s.log.WarnContext(ctx, "workflow not woken", "operationId", op.ID, "err", err)
	case woken:
		s.log.InfoContext(ctx, "workflow woken by reconciliation", "operationId", op.ID, "status", op.Status)
	}
}

// mark records a reason on a stuck operation (ledger.UpdateFields: reason + an "update" event)
// unless it already carries that reason. The version check makes it lose to any concurrent
// change, which the next sweep looks at again.
func (s *Service) mark(ctx context.Context, op *record.Operation, kind, reason string, extra map[string]any) {
	reason = record.Clip(reason, 1000)
	s.log.ErrorContext(ctx, "operation stuck", "operationId", op.ID, "tenant", op.Tenant, "kind", kind, "status", op.Status)
	if op.Reason == reason {
		return
	}
	d := map[string]any{"finding": kind}
	for k, v := range extra {
		d[k] = v
	}
	_, err := s.cfg.Ledger.UpdateFields(ctx, op.Tenant, op.ID, op.Version, record.Patch{Reason: &reason, Actor: actor,
		EventType: record.EventReconcile, Detail: record.EventDetail(d)})
	var te *record.TransitionError
	if err != nil && !errors.As(err, &te) {
		s.log.WarnContext(ctx, "stuck operation not marked", "operationId", op.ID, "err", err)
	}
}

// orphan records a listed task no pending operation waits on, once per OrphanRenotify: an
// event on the orphan pseudo-operation for a person to decide. Nothing else is done with it.
func (s *Service) orphan(ctx context.Context, r *shard, seller string, t listedTask) {
	if t.TaskType != "" && t.TaskType != taskCreateMediaBuy {
		return
	}
	if created, err := time.Parse(time.RFC3339, t.CreatedAt); err == nil && s.now().Sub(created) < s.cfg.RunConfig.LostTaskGrace() {
		return // the create may not be recorded yet
	}
	r.finding(KindOrphan)
	var c struct {
		OperationID string `json:"operation_id"`
	}
	_ = json.Unmarshal(t.Context, &c) // optional: most sellers list no context
	sum := sha256.Sum256([]byte(seller + "\x00" + t.TaskID))
	_, err := s.cfg.Ledger.AcquireLock(ctx, "ORPHAN#"+hex.EncodeToString(sum[:]), r.id, s.cfg.OrphanRenotify)
	var held *record.LockHeldError
	switch {
	case errors.As(err, &held):
		return // recorded within OrphanRenotify
	case err != nil:
		s.log.WarnContext(ctx, "orphan dedupe failed; recording anyway", "seller", seller, "err", err)
	}
	s.log.WarnContext(ctx, "orphan seller task", "seller", seller, "taskId", t.TaskID, "taskStatus", t.Status,
		"operationId", c.OperationID, "createdAt", t.CreatedAt)
	ev := record.Event{Type: record.EventOrphan, Actor: "seller:" + seller,
		Reason: record.Clip(fmt.Sprintf("seller %s has a %s task %s (%s, created %s) carrying buyflow's context that no pending operation waits on; decide by hand (see the reconcile runbook)",
			seller, t.TaskType, t.TaskID, t.Status, t.CreatedAt), 1000),
		Detail: record.EventDetail(map[string]any{"seller": seller, "task_id": t.TaskID, "task_type": t.TaskType, "status": t.Status,
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
// generations (workflow.ExecutionName) and returns the last one if it is not running, or nil.
func (s *Service) executionEnded(ctx context.Context, op *record.Operation) (*endedExecution, error) {
	if op.ExecutionName != workflow.ExecutionName(op.ID, 0) {
		// A name this package cannot follow: judge that one execution.
		e, err := s.cfg.Executions.Describe(ctx, op.ExecutionName)
		if err != nil || e.Running() {
			return nil, err
		}
		return ended(e), nil
	}
	var last *endedExecution
	for g := 0; g < s.cfg.MaxGenerations; g++ {
		name := workflow.ExecutionName(op.ID, g)
		e, err := s.cfg.Executions.Describe(ctx, name)
		switch {
		case errors.Is(err, sfn.ErrNoExecution) && g > 0:
			return last, nil // the chain ends with last
		case errors.Is(err, sfn.ErrNoExecution):
			return &endedExecution{Name: name, Status: "DOES_NOT_EXIST"}, nil // never started
		case err != nil:
			return nil, err
		case e.Running():
			return nil, nil
		}
		last = ended(e)
	}
	return last, nil
}

func ended(e sfn.Execution) *endedExecution {
	out := &endedExecution{Name: e.Name, Status: e.Status}
	if !e.StoppedAt.IsZero() {
		out.StoppedAt = e.StoppedAt.Format(time.RFC3339)
	}
	return out
}
