package reconcile

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aws/smithy-go"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/workflow"
)

// contextMarker is what every buyflow create_media_buy context carries ({"operation_id": ...}):
// the sweep asks sellers only for tasks whose context contains it.
const contextMarker = "operation_id"

// taskCreateMediaBuy is the only seller task buyflow follows (and registers webhooks for).
const taskCreateMediaBuy = "create_media_buy"

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
	ops     []*ledger.Operation
}

func opKey(op *ledger.Operation) string { return op.Tenant + "/" + op.ID }

// accountOf returns the media buy's account from the stored submit request.
func accountOf(op *ledger.Operation) (*adcp.AccountRef, string) {
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
func (s *Service) sweepSeller(ctx context.Context, r *run, seller string, ops []*ledger.Operation, prog Progress, fence int64) (complete bool, err error) {
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
		slices.SortFunc(g.ops, func(a, b *ledger.Operation) int { return cmp.Compare(opKey(a), opKey(b)) })
		groups = append(groups, g)
	}
	slices.SortFunc(groups, func(a, b *group) int { return cmp.Compare(a.key, b.key) })

	start, resume := 0, Progress{}
	if prog.Phase != "" {
		if i := slices.IndexFunc(groups, func(g *group) bool { return g.key == prog.Account }); i >= 0 {
			start, resume = i, prog
			s.log.InfoContext(ctx, "resuming seller", "seller", seller, "phase", prog.Phase)
		}
	}
	for i := start; i < len(groups); i++ {
		g := groups[i]
		from := Progress{}
		if i == start {
			from = resume
		}
		stop, err := s.sweepGroup(ctx, r, seller, g, known, from)
		if err != nil {
			return false, err
		}
		if stop != nil {
			stop.Seller, stop.Account, stop.Fence, stop.LastPass = seller, g.key, fence, prog.LastPass
			return false, s.putProgress(ctx, *stop)
		}
	}
	return true, s.putProgress(ctx, Progress{Seller: seller, Fence: fence, LastPass: s.now()})
}

func (s *Service) putProgress(ctx context.Context, p Progress) error {
	err := s.cfg.Progress.PutProgress(ctx, p)
	if errors.Is(err, ErrStaleFence) {
		s.log.WarnContext(ctx, "reconcile progress not stored: a newer lease holder wrote it", "seller", p.Seller)
		return nil
	}
	return err
}

// sweepGroup lists the group's pending tasks at the seller and compares. A non-nil stop is
// where the budget stopped it.
func (s *Service) sweepGroup(ctx context.Context, r *run, seller string, g *group, known map[string]bool, from Progress) (*Progress, error) {
	seen := map[string]listedTask{}
	listed := true
	if from.Phase != PhaseCompare {
		cursor := from.ListCursor
		for {
			if r.out(s.now()) {
				return &Progress{Phase: PhaseList, ListCursor: cursor}, nil
			}
			page, err := s.list(ctx, seller, g.account, cursor)
			var ae *adcp.Error
			if errors.As(err, &ae) && ae.Code == adcp.CodeToolNotOffered {
				// A seller without list_tasks / tasks/list (some 3.0 peers): no orphan detection,
				// and only operations quiet for StaleAfter are polled directly.
				s.log.WarnContext(ctx, "seller offers no task listing; polling stale operations directly", "seller", seller)
				listed = false
				break
			}
			if err != nil {
				r.rec.Count(metrics.AdcpErrors, metrics.Dims{"Code": errorCode(err)}, 1)
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
	for _, op := range g.ops {
		if from.Phase == PhaseCompare && opKey(op) <= from.AfterOp {
			continue
		}
		if !slices.Contains(s.cfg.Statuses, op.Status) {
			continue
		}
		if r.out(s.now()) {
			return &Progress{Phase: PhaseCompare, AfterOp: lastBefore(g.ops, op)}, nil
		}
		s.compare(ctx, r, seller, g.account, op, seen, listed)
	}
	return nil, nil
}

// lastBefore is the key of the operation before op in ops ("" when op is the first).
func lastBefore(ops []*ledger.Operation, op *ledger.Operation) string {
	i := slices.Index(ops, op)
	if i <= 0 {
		return ""
	}
	return opKey(ops[i-1])
}

// list reads one page of the seller's pending create_media_buy tasks carrying our context.
func (s *Service) list(ctx context.Context, seller string, account *adcp.AccountRef, cursor string) (*listPage, error) {
	tool, err := s.cfg.AdCP.ListTool(ctx, seller)
	if err != nil {
		return nil, err
	}
	req := listRequest{Account: account,
		Filters:    listFilters{Statuses: pendingTaskStatuses, TaskTypes: []string{taskCreateMediaBuy}, ContextContains: contextMarker},
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

// compare checks one operation against the listing, its execution and its deadline.
// listed is false when the seller offers no listing: seen is then empty.
func (s *Service) compare(ctx context.Context, r *run, seller string, account *adcp.AccountRef, op *ledger.Operation, seen map[string]listedTask, listed bool) {
	now := s.now()
	if op.SellerTaskID != "" {
		t, found := seen[op.SellerTaskID]
		poll := false
		switch {
		case found:
			st, ok := workflow.FromTaskStatus(t.Status)
			poll = ok && st != op.Status
		case listed:
			poll = now.Sub(op.UpdatedAt) >= s.cfg.Grace
		default:
			poll = now.Sub(op.UpdatedAt) >= s.cfg.StaleAfter
		}
		if poll {
			var err error
			if op, err = s.pollAndApply(ctx, r, seller, account, op); err != nil {
				s.log.ErrorContext(ctx, "reconcile: operation not updated", "operationId", op.ID, "seller", seller, "err", err)
				return
			}
			if op.Status.Terminal() || !slices.Contains(s.cfg.Statuses, op.Status) {
				return
			}
		}
	}
	s.checkStuck(ctx, r, op, now)
}

// checkStuck marks an operation whose execution ended or whose deadline passed long ago.
func (s *Service) checkStuck(ctx context.Context, r *run, op *ledger.Operation, now time.Time) {
	if !op.Deadline.IsZero() && now.Sub(op.Deadline) >= s.cfg.DeadlineSlack {
		r.finding(KindDeadlinePassed)
		r.rec.Count(metrics.Timeouts, metrics.Dims{"Kind": "operation_deadline"}, 1)
		s.mark(ctx, op, KindDeadlinePassed, fmt.Sprintf("%sstill %s after its deadline %s; the workflow should have ended it (see the reconcile runbook)",
			markPrefix, op.Status, op.Deadline.Format(time.RFC3339)), nil)
		return
	}
	marked := len(op.Reason) >= len(markPrefix) && op.Reason[:len(markPrefix)] == markPrefix
	if s.cfg.Executions == nil || s.cfg.StateMachineARN == "" || op.ExecutionName == "" || r.noDescribe ||
		(now.Sub(op.UpdatedAt) < s.cfg.StaleAfter && !marked) {
		return
	}
	ended, err := s.executionEnded(ctx, op)
	var api smithy.APIError
	if errors.As(err, &api) && api.ErrorCode() == "AccessDeniedException" {
		s.log.ErrorContext(ctx, "DescribeExecution is not allowed: the execution check is off for this run (grant states:DescribeExecution on the state machine's executions)", "err", err)
		r.noDescribe = true
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

// errorCode names an AdCP failure for the AdcpErrors Code dimension (bounded: the AdCP code,
// else the error kind, else "other").
func errorCode(err error) string {
	var ae *adcp.Error
	switch {
	case errors.As(err, &ae) && ae.Code != "":
		return ae.Code
	case errors.As(err, &ae):
		return string(ae.Kind)
	case errors.Is(err, adcp.ErrUnknownAgent):
		return "unknown_agent"
	}
	return "other"
}
