package reconcile

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/smithy-go"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/workflow"
)

// contextMarker is what every buyflow create_media_buy context carries ({"operation_id": ...}):
// the sweep asks sellers only for tasks whose context contains it.
const contextMarker = "operation_id"

// The seller tasks buyflow follows (and registers webhooks for): a buy's create, and the
// update of a change to a placed buy.
const (
	taskCreateMediaBuy = "create_media_buy"
	taskUpdateMediaBuy = "update_media_buy"
)

// pendingTaskStatuses are the AdCP task statuses the listing asks for.
var pendingTaskStatuses = []string{string(adcp.StatusSubmitted), string(adcp.StatusWorking), string(adcp.StatusInputRequired)}

// listRequest is list_tasks' request with the filters the sweep uses.
type listRequest struct {
	Account    *adcp.AccountRef `json:"account,omitempty"`
	Filters    listFilters      `json:"filters"`
	Sort       listSort         `json:"sort"`
	Pagination adcp.Pagination  `json:"pagination"`
}

type listFilters struct {
	Statuses        []string `json:"statuses"`
	TaskTypes       []string `json:"task_types"`
	ContextContains string   `json:"context_contains"`
}

type listSort struct {
	Field     string `json:"field"`
	Direction string `json:"direction"`
}

// listedTask is one list_tasks entry; Context is read when a seller includes it (the schema
// allows additional properties), to name the operation of an orphan.
type listedTask struct {
	adcp.TaskSummary
	Context json.RawMessage `json:"context,omitempty"`
}

type listPage struct {
	Tasks   []listedTask
	HasMore bool
	Cursor  string
}

// group is the seller's operations of one account.
type group struct {
	key     string // compact JSON of the account ref, "" for none
	account *adcp.AccountRef
	ops     []*record.Operation
}

func opKey(op *record.Operation) string { return op.Tenant + "/" + op.ID }

// accountOf returns the media buy's account from the stored submit request.
func accountOf(op *record.Operation) (*adcp.AccountRef, string) {
	var req struct {
		MediaBuy struct {
			Account *adcp.AccountRef `json:"account"`
		} `json:"media_buy"`
	}
	if json.Unmarshal(op.Request, &req) != nil || req.MediaBuy.Account == nil {
		return nil, ""
	}
	b, err := json.Marshal(req.MediaBuy.Account)
	if err != nil {
		return nil, ""
	}
	return req.MediaBuy.Account, string(b)
}

// sweepSeller runs (or resumes) one seller's pass under the lease fence. complete is false
// when the budget stopped it; the progress then says where to resume.
func (s *Service) sweepSeller(ctx context.Context, r *shard, seller string, ops []*record.Operation, prog record.SweepProgress, fence int64) (complete bool, err error) {
	known := map[string]bool{}
	byKey := map[string]*group{}
	for _, op := range ops {
		if op.SellerTaskID != "" {
			known[op.SellerTaskID] = true
		}
		acct, key := accountOf(op)
		g, ok := byKey[key]
		if !ok {
			g = &group{key: key, account: acct}
			byKey[key] = g
		}
		g.ops = append(g.ops, op)
	}
	groups := make([]*group, 0, len(byKey))
	for _, g := range byKey {
		slices.SortFunc(g.ops, func(a, b *record.Operation) int { return cmp.Compare(opKey(a), opKey(b)) })
		groups = append(groups, g)
	}
	slices.SortFunc(groups, func(a, b *group) int { return cmp.Compare(a.key, b.key) })

	budget := newPollBudget(s.cfg.PollConcurrency, s.cfg.PollRate, s.now, r.deadline)
	ps := &sellerPass{seller: seller, budget: budget, lastPass: prog.LastPass}
	start, resume := 0, record.SweepProgress{}
	if prog.Phase != "" {
		if i := slices.IndexFunc(groups, func(g *group) bool { return g.key == prog.Account }); i >= 0 {
			start, resume = i, prog
			s.log.InfoContext(ctx, "resuming seller", "seller", seller, "phase", prog.Phase)
		}
	}
	for i := start; i < len(groups); i++ {
		g := groups[i]
		from := record.SweepProgress{}
		if i == start {
			from = resume
		}
		stop, err := s.sweepGroup(ctx, r, ps, g, known, from)
		if err != nil {
			return false, err
		}
		if stop != nil {
			stop.Seller, stop.Account, stop.Fence, stop.LastPass = seller, g.key, fence, prog.LastPass
			if until, past := budget.pausedPastRun(); past {
				stop.NotBefore = until
			}
			return false, s.putProgress(ctx, *stop)
		}
	}
	return true, s.putProgress(ctx, record.SweepProgress{Seller: seller, Fence: fence, LastPass: s.now()})
}

func (s *Service) putProgress(ctx context.Context, p record.SweepProgress) error {
	err := s.cfg.Ledger.PutProgress(ctx, p)
	if errors.Is(err, record.ErrStaleFence) {
		s.log.WarnContext(ctx, "reconcile progress not stored: a newer lease holder wrote it", "seller", p.Seller)
		return nil
	}
	return err
}

// sweepGroup lists the group's pending tasks at the seller and compares. A non-nil stop is
// where the time budget (or a seller's retry_after reaching past the run) stopped it.
func (s *Service) sweepGroup(ctx context.Context, r *shard, ps *sellerPass, g *group, known map[string]bool, from record.SweepProgress) (*record.SweepProgress, error) {
	seller := ps.seller
	seen := map[string]listedTask{}
	if from.Phase != record.PhaseCompare {
		cursor := from.ListCursor
		for {
			if r.out(s.now()) {
				return &record.SweepProgress{Phase: record.PhaseList, ListCursor: cursor}, nil
			}
			page, err := s.list(ctx, seller, g.account, cursor)
			var ae *adcp.Error
			if errors.As(err, &ae) && ae.Code == adcp.CodeToolNotOffered {
				// A seller without list_tasks / tasks/list (some 3.0 peers, the official SDK's):
				// no orphan detection, and every pending task is read directly.
				s.log.InfoContext(ctx, "seller offers no task listing; reading each pending task", "seller", seller)
				break
			}
			if errors.As(err, &ae) && ae.RetryAfter > 0 {
				r.rec.Count(metrics.AdcpErrors, metrics.Dims{"Code": adcp.MetricCode(err)}, 1)
				ps.budget.pause(ae.RetryAfter)
				s.log.WarnContext(ctx, "seller asked to retry the listing later", "seller", seller, "retryAfter", ae.RetryAfter)
				return &record.SweepProgress{Phase: record.PhaseList, ListCursor: cursor}, nil
			}
			if err != nil {
				r.rec.Count(metrics.AdcpErrors, metrics.Dims{"Code": adcp.MetricCode(err)}, 1)
				return nil, fmt.Errorf("list tasks at %s: %w", seller, err)
			}
			for _, t := range page.Tasks {
				seen[t.TaskID] = t
				if !known[t.TaskID] {
					s.orphan(ctx, r, seller, t)
				}
			}
			if !page.HasMore || page.Cursor == "" {
				break
			}
			cursor = page.Cursor
		}
	}
	todo := make([]*record.Operation, 0, len(g.ops))
	for _, op := range g.ops {
		if from.Phase == record.PhaseCompare && opKey(op) <= from.AfterOp {
			continue
		}
		if slices.Contains(s.cfg.Statuses, op.Status) {
			todo = append(todo, op)
		}
	}
	// PollConcurrency operations at a time, so that the stored cursor (the last operation of
	// an unbroken prefix) never skips one that was not compared.
	for first := 0; first < len(todo); first += s.cfg.PollConcurrency {
		batch := todo[first:min(first+s.cfg.PollConcurrency, len(todo))]
		if r.out(s.now()) {
			return &record.SweepProgress{Phase: record.PhaseCompare, AfterOp: lastBefore(g.ops, batch[0])}, nil
		}
		done := make([]bool, len(batch))
		var wg sync.WaitGroup
		for i, op := range batch {
			wg.Go(func() { done[i] = s.compare(ctx, r, ps, g.account, op, seen) })
		}
		wg.Wait()
		if i := slices.Index(done, false); i >= 0 {
			return &record.SweepProgress{Phase: record.PhaseCompare, AfterOp: lastBefore(g.ops, batch[i])}, nil
		}
	}
	return nil, nil
}

// lastBefore is the key of the operation before op in ops ("" when op is the first).
func lastBefore(ops []*record.Operation, op *record.Operation) string {
	i := slices.Index(ops, op)
	if i <= 0 {
		return ""
	}
	return opKey(ops[i-1])
}

// list reads one page of the seller's pending create_media_buy and update_media_buy tasks
// carrying our context.
func (s *Service) list(ctx context.Context, seller string, account *adcp.AccountRef, cursor string) (*listPage, error) {
	tool, err := s.cfg.AdCP.ListTool(ctx, seller)
	if err != nil {
		return nil, err
	}
	req := listRequest{Account: account,
		Filters:    listFilters{Statuses: pendingTaskStatuses, TaskTypes: []string{taskCreateMediaBuy, taskUpdateMediaBuy}, ContextContains: contextMarker},
		Sort:       listSort{Field: "created_at", Direction: "asc"},
		Pagination: adcp.Pagination{MaxResults: s.cfg.PageSize, Cursor: cursor}}
	resp, err := s.cfg.AdCP.Call(ctx, seller, tool, req)
	if err != nil {
		return nil, err
	}
	if f := resp.Failure(); f != nil {
		return nil, f
	}
	var body struct {
		Tasks      []listedTask `json:"tasks"`
		Pagination struct {
			HasMore bool   `json:"has_more"`
			Cursor  string `json:"cursor"`
		} `json:"pagination"`
	}
	if err := json.Unmarshal(resp.Body, &body); err != nil {
		return nil, fmt.Errorf("decode %s answer: %w", tool, err)
	}
	return &listPage{Tasks: body.Tasks, HasMore: body.Pagination.HasMore, Cursor: body.Pagination.Cursor}, nil
}

// compare checks one operation against the listing (seen; empty for a seller without one),
// its execution and its deadline. The
// task is read directly (within the seller's budget) unless the listing shows it with the
// ledger's status: a task the listing of pending tasks leaves out has usually ended, and a
// seller without a listing is read task by task. compare returns false when the operation was
// not compared: the budget left no turn for the read in this run, or the seller answered it
// with a retry_after.
func (s *Service) compare(ctx context.Context, r *shard, ps *sellerPass, account *adcp.AccountRef, op *record.Operation, seen map[string]listedTask) bool {
	now := s.now()
	if op.SellerTaskID != "" {
		poll := true
		if t, found := seen[op.SellerTaskID]; found {
			st, ok := workflow.FromTaskStatus(t.Status)
			poll = ok && st != op.Status
		}
		if poll {
			cur, err := s.readWithin(ctx, r, ps, account, op)
			if errors.Is(err, errNoTurn) {
				return false
			}
			if err != nil {
				s.log.ErrorContext(ctx, "reconcile: operation not updated", "operationId", op.ID, "seller", ps.seller, "err", err)
				return true
			}
			if op = cur; op.Status.Terminal() || !slices.Contains(s.cfg.Statuses, op.Status) {
				return true
			}
		}
	}
	s.checkStuck(ctx, r, op, now, ps.lastPass)
	return true
}

// errNoTurn is readWithin's "the seller's budget left no turn in this run".
var errNoTurn = errors.New("reconcile: no turn left for the seller in this run")

// readWithin reads op's task within the seller's budget (pollAndApply). A retry_after pauses
// the seller's reads and the read is tried again after it, if that is still within the run;
// otherwise errNoTurn: the operation was not compared, and a run that stops there resumes with
// it.
func (s *Service) readWithin(ctx context.Context, r *shard, ps *sellerPass, account *adcp.AccountRef, op *record.Operation) (*record.Operation, error) {
	for {
		if !ps.budget.acquire(ctx) {
			return op, errNoTurn
		}
		cur, err := s.pollAndApply(ctx, r, ps.seller, account, op)
		ps.budget.release()
		var ae *adcp.Error
		if !errors.As(err, &ae) || ae.RetryAfter <= 0 {
			return cur, err
		}
		ps.budget.pause(ae.RetryAfter)
		s.log.WarnContext(ctx, "seller asked to retry later", "seller", ps.seller, "retryAfter", ae.RetryAfter)
	}
}

// checkStuck marks an operation whose execution ended or whose deadline passed long ago.
// lastPass is when the seller's previous pass completed (zero: none).
func (s *Service) checkStuck(ctx context.Context, r *shard, op *record.Operation, now, lastPass time.Time) {
	if !op.Deadline.IsZero() && now.Sub(op.Deadline) >= s.cfg.DeadlineSlack {
		r.finding(KindDeadlinePassed)
		r.rec.Count(metrics.Timeouts, metrics.Dims{"Kind": metrics.TimeoutOperationDeadline}, 1)
		s.mark(ctx, op, KindDeadlinePassed, fmt.Sprintf("%sstill %s after its deadline %s; the workflow should have ended it (see the reconcile runbook)",
			markPrefix, op.Status, op.Deadline.Format(time.RFC3339)), nil)
		return
	}
	if s.cfg.Executions == nil || op.ExecutionName == "" || r.noDescribe.Load() ||
		!s.executionCheckDue(op, now, lastPass) {
		return
	}
	ended, err := s.executionEnded(ctx, op)
	var api smithy.APIError
	if errors.As(err, &api) && api.ErrorCode() == "AccessDeniedException" {
		// Operations are compared concurrently: the ones already describing get refused too,
		// but only the first says so.
		if r.noDescribe.CompareAndSwap(false, true) {
			s.log.ErrorContext(ctx, "DescribeExecution is not allowed: the execution check is off for this run (grant states:DescribeExecution on the state machine's executions)", "err", err)
		}
		return
	}
	if err != nil {
		s.log.WarnContext(ctx, "execution not described", "operationId", op.ID, "err", err)
		return
	}
	if ended == nil {
		return
	}
	r.finding(KindExecutionEnded)
	s.mark(ctx, op, KindExecutionEnded, fmt.Sprintf("%sthe workflow execution %s ended %s while the operation is still %s; redrive it or fail the operation (see the reconcile runbook)",
		markPrefix, ended.Name, ended.Status, op.Status), map[string]any{"execution": ended.Name, "execution_status": ended.Status, "stopped_at": ended.StoppedAt})
}

// executionCheckDue says whether this pass describes op's execution: once each StaleAfter of
// quiet (the pass that crosses a multiple of it since the seller's last pass), not on every
// run, so that DescribeExecution calls (throttled per account) grow with pending operations
// per StaleAfter, not per cadence. A marked operation (rare: it is stuck) is checked on every
// pass, so that its finding is counted while it lasts and the alarm stays up.
func (s *Service) executionCheckDue(op *record.Operation, now, lastPass time.Time) bool {
	if strings.HasPrefix(op.Reason, markPrefix) {
		return true
	}
	quiet := now.Sub(op.UpdatedAt)
	if quiet < s.cfg.StaleAfter {
		return false
	}
	if lastPass.IsZero() || !lastPass.After(op.UpdatedAt) || lastPass.After(now) {
		return true
	}
	return quiet/s.cfg.StaleAfter != lastPass.Sub(op.UpdatedAt)/s.cfg.StaleAfter
}

// sellerPass is one seller's pass of a run.
type sellerPass struct {
	seller   string
	budget   *pollBudget
	lastPass time.Time // when the seller's previous pass completed
}
