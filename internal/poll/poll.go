package poll

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/sellertask"
	"github.com/buyflow/buyflow/internal/sfn"
	"github.com/buyflow/buyflow/internal/stage"
	"github.com/buyflow/buyflow/internal/workflow"
)

// tasks completes a parked Step Functions task token; *sfn.Client satisfies it. A token that
// is already gone is an error matching sfn.ErrTaskGone.
type tasks = sellertask.Tasks

// Service is the poll function's use case: park and poll. It is safe for concurrent use.
type Service struct {
	stage.Stage
	tasks tasks
	rand  func() float64
}

// New returns the poll stage; tasks completes the parked AwaitSeller token.
func New(l stage.Ledger, a stage.AdCP, tasks tasks, o stage.Options) *Service {
	return &Service{Stage: stage.New(l, a, o), tasks: tasks, rand: stage.OrMathRand(o.Rand)}
}

// Park is AwaitSeller (waitForTaskToken): when the last seller result already needs a
// decision it completes the token at once with it; otherwise it stores the token on the
// operation, then completes it itself when the ledger already holds a newer status that needs
// a decision (a webhook landed before the park) or the deadline passed. A token that is
// already gone is not an error: whoever completed it had the ledger's truth.
func (s *Service) Park(ctx context.Context, in workflow.CallbackInput) error {
	if in.TaskToken == "" {
		return &workflow.InvalidInputError{Field: "task_token", Reason: "required"}
	}
	if in.Seller != nil && in.Seller.NeedsDecision() {
		return s.complete(ctx, in.OperationID, in.TaskToken, *in.Seller, "decision pending")
	}
	if err := in.Config.Validate(); err != nil {
		return err
	}
	if in.Tenant == "" || in.OperationID == "" {
		return &workflow.InvalidInputError{Field: "operation_id", Reason: "operation_id and tenant are required"}
	}
	op, err := s.Ledger.SetTaskToken(ctx, in.Tenant, in.OperationID, in.TaskToken)
	if errors.Is(err, record.ErrNotFound) {
		return &workflow.NotFoundError{OperationID: in.OperationID}
	}
	if err != nil {
		return fmt.Errorf("poll: park task token of %s: %w", in.OperationID, err)
	}
	var known workflow.Status
	if in.Seller != nil {
		known = in.Seller.Status
	}
	out := sellertask.WakeOutput(op, in.Wait, in.Config, s.Now())
	if !out.NeedsDecision() || (op.Status == known && !out.DeadlineExceeded) {
		s.Log.InfoContext(ctx, "parked", "operationId", op.ID, "status", op.Status, "intervalSeconds", in.Wait.IntervalSeconds, "round", in.Wait.Round)
		return nil
	}
	if err := s.Ledger.ClearTaskToken(ctx, op.Tenant, op.ID, in.TaskToken); err != nil && !errors.Is(err, record.ErrTokenMismatch) {
		s.Log.WarnContext(ctx, "task token not cleared", "operationId", op.ID, "err", err)
	}
	s.Event(ctx, op, record.Event{Type: record.EventWake, Actor: stage.ActorSystem,
		Detail: record.EventDetail(map[string]any{"by": "park", "status": out.Status, "known": known, "deadline_exceeded": out.DeadlineExceeded})})
	return s.complete(ctx, op.ID, in.TaskToken, out, "ledger already newer")
}

func (s *Service) complete(ctx context.Context, opID, token string, out workflow.SellerOutput, why string) error {
	err := s.tasks.Succeed(ctx, token, out)
	switch {
	case errors.Is(err, sfn.ErrTaskGone):
		s.Log.InfoContext(ctx, "wait already completed", "operationId", opID, "why", why)
		return nil
	case err != nil:
		return &workflow.TransientError{Reason: fmt.Sprintf("complete the wait of %s: %v", opID, err)}
	}
	s.Log.InfoContext(ctx, "wait completed by park", "operationId", opID, "status", out.Status, "why", why)
	return nil
}

// PollSeller is the PollSeller stage: get_task_status / tasks/get for the seller task (fresh key per poll),
// recorded forward only, and the next step of the loop: terminal, input_required, the deadline,
// the end of this execution's loop budget (continue as new under a deterministic name), or the
// next safety-net interval (workflow.WaitState.Advance). A poll the seller answers with a
// transient error counts as "no news" and waits another interval, and so does a task it does
// not know (REFERENCE_NOT_FOUND) within the lost-task grace (the run configuration's), past which the operation fails
// with a lost-task finding; one it refuses for good is a TerminalError.
func (s *Service) PollSeller(ctx context.Context, in workflow.PollInput) (workflow.SellerOutput, error) {
	if err := in.Config.Validate(); err != nil {
		return workflow.SellerOutput{}, err
	}
	op, err := s.Load(ctx, in.Tenant, in.OperationID)
	if err != nil {
		return workflow.SellerOutput{}, err
	}
	wait := in.Wait
	if wait == (workflow.WaitState{}) {
		wait = sellertask.WakeOutput(op, wait, in.Config, s.Now()).Next
	}
	if !op.Status.Terminal() {
		if op, err = s.pollSeller(ctx, op, in.Config); err != nil {
			return workflow.SellerOutput{}, err
		}
	}
	now := s.Now()
	out := sellertask.WakeOutput(op, wait, in.Config, now)
	if out.NeedsDecision() {
		return out, nil
	}
	out.Next = wait.Advance(in.Config, now, s.SweepUp(ctx, in.Config), s.rand)
	if out.Next.Round >= in.Config.LoopBudget {
		out.ContinueAsNew = true
		out.NextGeneration = in.Generation + 1
		out.NextExecutionName = workflow.ExecutionName(op.ID, in.Generation+1)
		out.Next.Round = 0
		s.Log.InfoContext(ctx, "loop budget spent", "operationId", op.ID, "nextExecution", out.NextExecutionName)
	}
	return out, nil
}

// pollSeller asks the seller about the operation's task and records the answer forward only
// (RecordTaskStatus); a repeat, an unmapped status and a refused move leave a poll event.
func (s *Service) pollSeller(ctx context.Context, op *record.Operation, cfg workflow.RunConfig) (*record.Operation, error) {
	req, err := stage.ParseRequest(op)
	if err != nil {
		return nil, err
	}
	if op.SellerTaskID == "" {
		return nil, &workflow.TerminalError{Code: "no_seller_task", Reason: fmt.Sprintf("operation %s (%s) has no seller task to poll", op.ID, op.Status)}
	}
	ts, err := s.AdCP.GetTaskStatus(ctx, req.SellerID, adcp.GetTaskStatusRequest{TaskID: op.SellerTaskID, Account: req.Account(), IncludeResult: true})
	if sellertask.TaskLost(err) {
		return s.lost(ctx, op, req.SellerID, cfg.LostTaskGrace())
	}
	if err != nil {
		s.Event(ctx, op, record.Event{Type: record.EventPoll, Actor: stage.SellerActor(req.SellerID), Reason: record.Clip(err.Error(), 300),
			Detail: record.EventDetail(map[string]any{"task_id": op.SellerTaskID, "error_code": adcp.ErrorCode(err), "decision": adcp.Decide(err).String()})})
		if adcp.Decide(err) == adcp.DecisionRetry {
			s.Log.WarnContext(ctx, "poll failed, backing off", "operationId", op.ID, "code", adcp.ErrorCode(err))
			return op, nil
		}
		return nil, stage.CallError("get_task_status", err)
	}
	actor := stage.SellerActor(req.SellerID)
	ev := map[string]any{"task_id": op.SellerTaskID, "seller_status": ts.Status}
	u := sellertask.UpdateFrom(ts)
	if m := sellertask.Message(u.Message); m != "" {
		ev["message"] = m // what the seller says the wait is for, on repeats too
	}
	u.TaskID, u.Actor, u.EventType, u.Detail, u.SkipRepeat = op.SellerTaskID, actor, record.EventPoll, ev, true
	rec, err := sellertask.RecordStatus(ctx, s.taskDeps(), op, u)
	if err != nil {
		return nil, stage.MoveError(op, err)
	}
	switch rec.Outcome {
	case sellertask.Unmapped, sellertask.Repeat:
		// Unknown statuses (auth-required, unknown) and repeats change nothing.
		s.Event(ctx, op, record.Event{Type: record.EventPoll, Actor: actor, Detail: record.EventDetail(ev)})
	case sellertask.Stale:
		s.Event(ctx, op, record.Event{Type: record.EventPoll, Actor: actor, Reason: "no change: the ledger already holds " + string(rec.Op.Status), Detail: record.EventDetail(ev)})
	}
	return rec.Op, nil
}

// lost handles a seller that does not know the operation's task as the sweep does
// (sellertask.RecordLost): within the grace the buy keeps waiting, on its cadence; past it the
// operation is failed with the finding, and the terminal status ends the loop (RecordFailure).
func (s *Service) lost(ctx context.Context, op *record.Operation, seller string, grace time.Duration) (*record.Operation, error) {
	deps := s.taskDeps()
	deps.Grace = grace
	rec, err := sellertask.RecordLost(ctx, deps, op, sellertask.Lost{Seller: seller, Actor: stage.SellerActor(seller), EventType: record.EventPoll})
	if err != nil {
		return nil, &workflow.TransientError{Reason: "poll: " + err.Error()}
	}
	return rec.Op, nil
}

// taskDeps is what the shared task-update code needs from the poll stage: the stage's ledger,
// no retry of a lost transaction race (MoveError makes it a TransientError the ASL retries).
func (s *Service) taskDeps() sellertask.Deps {
	return sellertask.Deps{Ledger: s.Ledger, Tasks: s.tasks, Timeline: s.Ledger, Metrics: s.Metrics, Now: s.Now, Log: s.Log}
}
