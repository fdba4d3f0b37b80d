package sellertask

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/workflow"
)

// LostTaskGrace is how long an operation keeps waiting on a task its seller answers
// REFERENCE_NOT_FOUND for, counted from the first such answer since the operation last
// changed, unless the run configuration sets another (lost_task_grace_seconds, Deps.Grace). A
// seller's records may lag (a replica, a process that reloads after a restart), and failing a
// buy on one answer abandons an order the seller may have placed upstream. It is the one grace
// of every path that reads a task's status (the poll stage and the sweep, both given the run
// configuration's), so that a lost task ends the same way whoever saw it first.
const LostTaskGrace = workflow.DefaultLostTaskGrace

// codeTaskNotFound is the AdCP error code get_task_status / tasks/get answer for a task the
// seller does not know (for this principal).
const codeTaskNotFound = "REFERENCE_NOT_FOUND"

// TaskLost reports whether err is the seller's answer that it does not know the task.
func TaskLost(err error) bool { return adcp.ErrorCode(err) == codeTaskNotFound }

// timeline reads an operation's events in time order; *ledger.Store satisfies it.
type timeline interface {
	ListEvents(ctx context.Context, tenant, opID string, limit int, cursor string) (record.Page[record.Event], error)
}

// Lost is one answer REFERENCE_NOT_FOUND for an operation's task, as a reader of the task's
// status got it.
type Lost struct {
	// Seller is the seller agent's id.
	Seller string
	// Actor and EventType label the event of the first answer (the reader's own: poll,
	// reconcile); Actor also labels the failing transition.
	Actor, EventType string
}

// LostOutcome is what RecordLost did.
type LostOutcome int

// The outcomes of RecordLost.
const (
	// LostWaiting: within the grace; the operation keeps waiting on its cadence.
	LostWaiting LostOutcome = iota + 1
	// LostFailed: past the grace; the operation moved to failed with the finding (an
	// EventLostTask transition, LostSellerTasks counted). The caller wakes the workflow.
	LostFailed
	// LostStale: past the grace, but the ledger already holds a newer status; nothing was
	// written.
	LostStale
)

// LostRecorded is the result of RecordLost.
type LostRecorded struct {
	// Op is the operation as it now is.
	Op *record.Operation
	// Outcome says what was done.
	Outcome LostOutcome
	// Since is the first REFERENCE_NOT_FOUND since the operation last changed.
	Since time.Time
}

// RecordLost handles a REFERENCE_NOT_FOUND answer for op's task the same way on every path.
// The grace runs from the first such answer since the operation last changed (not from the
// change itself: a buy can wait days in a seller's review before the seller restarts), which
// is kept on the timeline: the first answer leaves an event (l.EventType) whose detail carries
// lost_since. Within LostTaskGrace nothing else happens. Past it the operation fails with a
// finding for a person (lostFinding: seller, PO number, what may exist, what to check) as the
// reason of an EventLostTask transition, and LostSellerTasks is counted (by Seller and with no
// dimension) when deps.Metrics is set.
//
// deps.Timeline is required. An event the ledger does not take only lengthens the wait (the
// next answer counts as the first again); a timeline it cannot read, and a failed move, are
// returned.
func RecordLost(ctx context.Context, deps Deps, op *record.Operation, l Lost) (LostRecorded, error) {
	now, grace := deps.now(), deps.grace()
	since, err := lostSince(ctx, deps.Timeline, op)
	if err != nil {
		return LostRecorded{Op: op}, err
	}
	if since.IsZero() {
		since = now
		ev := record.Event{Type: l.EventType, Actor: l.Actor,
			Reason: record.Clip(fmt.Sprintf("the seller %s answered %s for task %s; its records may lag, so the buy waits until %s before it ends",
				l.Seller, codeTaskNotFound, op.SellerTaskID, since.Add(grace).Format(time.RFC3339)), 1000),
			Detail: record.EventDetail(map[string]any{"task_id": op.SellerTaskID, "error_code": codeTaskNotFound,
				// To the nanosecond: read back as the grace's start, a time cut to the second
				// would end the grace up to a second early.
				"lost_since": since.Format(time.RFC3339Nano), "grace_until": since.Add(grace).Format(time.RFC3339Nano)})}
		if err := deps.Ledger.AppendEvent(ctx, op.Tenant, op.ID, ev); err != nil {
			deps.log().WarnContext(ctx, "first lost-task answer not recorded; the grace starts again", "operationId", op.ID, "err", err)
		}
	}
	if now.Sub(since) < grace {
		deps.log().WarnContext(ctx, "seller does not know the task; waiting the grace", "operationId", op.ID, "seller", l.Seller,
			"lostSince", since, "graceUntil", since.Add(grace))
		return LostRecorded{Op: op, Outcome: LostWaiting, Since: since}, nil
	}
	reason, detail := lostFinding(op, l.Seller, since, now, grace)
	code := codeTaskNotFound
	cur, moved, err := Move(ctx, deps, op, workflow.StatusFailed, record.Patch{Reason: &reason, ErrorCode: &code,
		Actor: l.Actor, EventType: record.EventLostTask, Detail: record.EventDetail(detail)})
	if err != nil {
		return LostRecorded{Op: op, Since: since}, fmt.Errorf("sellertask: fail the lost task of %s: %w", op.ID, err)
	}
	if !moved {
		return LostRecorded{Op: cur, Outcome: LostStale, Since: since}, nil
	}
	if deps.Metrics != nil {
		deps.Metrics.Count(metrics.LostSellerTasks, metrics.Dims{"Seller": l.Seller}, 1)
		deps.Metrics.Count(metrics.LostSellerTasks, nil, 1)
	}
	deps.log().ErrorContext(ctx, "operation failed: the seller lost its task; an order may exist there", "operationId", op.ID,
		"tenant", op.Tenant, "seller", l.Seller, "poNumber", op.PONumber, "taskId", op.SellerTaskID, "lostSince", since)
	return LostRecorded{Op: cur, Outcome: LostFailed, Since: since}, nil
}

// lostSince is the lost_since of the first REFERENCE_NOT_FOUND event written since op last
// changed, or zero. A change (a status the seller reported again, any other update) starts a
// new count: the seller knew the task then.
func lostSince(ctx context.Context, tl timeline, op *record.Operation) (time.Time, error) {
	if tl == nil {
		return time.Time{}, fmt.Errorf("sellertask: no timeline to read the lost task of %s from", op.ID)
	}
	cursor := ""
	for {
		page, err := tl.ListEvents(ctx, op.Tenant, op.ID, 100, cursor)
		if err != nil {
			return time.Time{}, fmt.Errorf("sellertask: read the timeline of %s: %w", op.ID, err)
		}
		for _, ev := range page.Items {
			if ev.At.Before(op.UpdatedAt) || len(ev.Detail) == 0 {
				continue
			}
			var d struct {
				ErrorCode string    `json:"error_code"`
				LostSince time.Time `json:"lost_since"`
			}
			if json.Unmarshal(ev.Detail, &d) == nil && d.ErrorCode == codeTaskNotFound && !d.LostSince.IsZero() {
				return d.LostSince, nil
			}
		}
		if page.Cursor == "" {
			return time.Time{}, nil
		}
		cursor = page.Cursor
	}
}

// lostFinding is the reason and event detail of an operation failed because its seller lost
// the task: what a person needs to find a possible order at the seller without reading code.
func lostFinding(op *record.Operation, seller string, since, now time.Time, grace time.Duration) (string, map[string]any) {
	po := op.PONumber
	if po == "" {
		po = "(none recorded)"
	}
	mayExist := "an order the seller created before it lost the task (for example once its people approved the IO); buyflow holds no media buy id for it, so nothing was canceled"
	if op.MediaBuyID != "" {
		mayExist = "media buy " + op.MediaBuyID + ", which buyflow did not cancel"
	}
	check := fmt.Sprintf("ask seller %s (or read its get_media_buys) whether an order for PO %s exists; if one does, cancel it at the seller or agree with the buyer and finance that it stands; if none does and the buy is still wanted, submit it again", seller, po)
	if op.Kind == record.KindModification {
		// A change's task: the buy exists; what is unknown is whether the seller applied it.
		mayExist = "media buy " + op.MediaBuyID + " with this change applied, though buyflow recorded no answer for it"
		check = fmt.Sprintf("read media buy %s at seller %s (get_media_buys) and compare it with buyflow's record of buy %s; if the change was applied, agree with the buyer and finance whether it stands, otherwise request it again if it is still wanted", op.MediaBuyID, seller, op.ParentID)
	}
	reason := record.Clip(fmt.Sprintf("lost seller task: the seller %s does not know task %s for PO %s (%s since %s, past the %s grace). The seller may hold %s. Check: %s.",
		seller, op.SellerTaskID, po, codeTaskNotFound, since.Format(time.RFC3339), graceWords(grace), mayExist, check), 1000)
	return reason, map[string]any{"finding": "lost_task", "kind": op.Kind, "parent_id": op.ParentID, "seller": seller, "po_number": op.PONumber, "task_id": op.SellerTaskID,
		"media_buy_id": op.MediaBuyID, "error_code": codeTaskNotFound, "lost_since": since.Format(time.RFC3339Nano),
		"waited_seconds": int64(now.Sub(since) / time.Second), "may_exist": mayExist, "check": check}
}

// graceWords is a grace as a person reads it: "10-minute", or "45-second" when it is not whole
// minutes.
func graceWords(d time.Duration) string {
	if d%time.Minute == 0 {
		return fmt.Sprintf("%d-minute", int(d/time.Minute))
	}
	return fmt.Sprintf("%d-second", int(d/time.Second))
}
