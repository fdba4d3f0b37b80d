package governance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/dispatch"
	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/stage"
	"github.com/buyflow/buyflow/internal/workflow"
)

// Policy says whether a buy's budget (a decimal string in currency) alone needs a person, and
// why; approvalpolicy.Policy satisfies it.
type Policy interface {
	Needs(budget, currency string) (bool, string)
}

// Service is the governance function's use case: check, report and fail. It is safe for
// concurrent use.
type Service struct {
	stage.Stage
	policy             Policy
	callerURI          string
	maxConditionRounds int
}

// New returns the governance stage. callerURI is the caller sent with check_governance
// (BUYFLOW_CALLER_URI); policy may be nil when no budget threshold applies.
func New(l stage.Ledger, a stage.AdCP, policy Policy, callerURI string, o stage.Options) *Service {
	rounds := o.MaxConditionRounds
	if rounds <= 0 {
		rounds = 3
	}
	return &Service{Stage: stage.New(l, a, o), policy: policy, callerURI: callerURI, maxConditionRounds: rounds}
}

// Handle handles the governance function's payload: actions check, report and fail.
func (s *Service) Handle(ctx context.Context, raw json.RawMessage) (any, error) {
	return dispatch.Table{
		workflow.ActionCheck:  dispatch.Of(s.Check),
		workflow.ActionReport: dispatch.Of(s.Report),
		workflow.ActionFail:   dispatch.Of(s.Fail),
	}.Handle(ctx, raw)
}

// reasonGovernanceConditions is the reason of a needs_approval decision caused by governance
// conditions a machine cannot apply (or that did not converge within the rounds allowed).
const reasonGovernanceConditions = "governance_conditions"

// reviewRecord is what an async governance review keeps between "check" rounds.
type reviewRecord struct {
	TaskID  string          `json:"task_id"`
	Payload json.RawMessage `json:"payload"`
	Round   int             `json:"round"`
}

// Check is CheckGovernance: check_governance with the exact create_media_buy arguments that
// will be sent, applying machine-actionable conditions (at most MaxConditionRounds checks).
// Output decisions: proceed (approved; the operation moves to creating with check_id,
// governance_context and expires_at), needs_approval (policy threshold, require_approval, or
// conditions a person must judge; the operation moves to awaiting_approval), denied (the
// operation is rejected; nothing was spent), pending (async review; wait Wait.IntervalSeconds
// and call Check again). An unreachable agent is a TransientError.
func (s *Service) Check(ctx context.Context, in workflow.StageInput) (workflow.GovernanceOutput, error) {
	if err := in.Config.Validate(); err != nil {
		return workflow.GovernanceOutput{}, err
	}
	op, req, err := s.LoadRequest(ctx, in.Tenant, in.OperationID)
	if err != nil {
		return workflow.GovernanceOutput{}, err
	}
	if out, answered, err := answeredBefore(op); answered {
		return out, err
	}
	afterApproval := false
	if op.Status != workflow.StatusRequested {
		if afterApproval, err = s.approvalRequested(ctx, op); err != nil {
			return workflow.GovernanceOutput{}, err
		}
	}
	if op.Status == workflow.StatusAwaitingApproval && !afterApproval {
		// This stage's own needs_approval answer, retried before any approval was requested.
		return workflow.GovernanceOutput{Decision: workflow.GovernanceNeedsApproval, CheckID: op.GovernanceCheckID,
			ExpiresAt: stage.RFC3339(op.GovernanceExpiresAt), Reason: op.Reason}, nil
	}
	if op, err = s.startChecking(ctx, op, afterApproval); err != nil {
		return workflow.GovernanceOutput{}, err
	}
	r, pending, err := s.resume(ctx, op, req, in.Config)
	if wait, waitErr := s.Unavailable(ctx, op, in.Config, adcp.RoleGovernance, adcp.ToolGetTaskStatus, err); wait != nil || waitErr != nil {
		return workflow.GovernanceOutput{Decision: workflow.GovernanceAgentUnavailable, Unavailable: wait}, waitErr
	}
	if err != nil {
		return workflow.GovernanceOutput{}, err
	}
	if pending {
		return s.pending(in.Config), nil
	}
	return s.decide(ctx, op, req, r, afterApproval, in.Config)
}

// checkRound is where a check stands: the payload being checked, its round, the agent's
// answer to it (nil until asked) and how many async reviews the operation's version had.
type checkRound struct {
	payload []byte
	n       int
	res     *adcp.GovernanceResult
	reviews int
}

// answeredBefore answers a check of an operation governance already let through (a retry:
// proceed again) or that ended (nothing to check). answered is false while governance may
// still check the operation.
func answeredBefore(op *record.Operation) (out workflow.GovernanceOutput, answered bool, err error) {
	switch op.Status {
	case workflow.StatusCreating, workflow.StatusSubmitted, workflow.StatusWorking, workflow.StatusInputRequired:
		// A retry after this stage already let the buy through.
		return workflow.GovernanceOutput{Decision: workflow.GovernanceProceed, CheckID: op.GovernanceCheckID, ExpiresAt: stage.RFC3339(op.GovernanceExpiresAt)}, true, nil
	case workflow.StatusRequested, workflow.StatusCheckingGovernance, workflow.StatusAwaitingApproval:
		return workflow.GovernanceOutput{}, false, nil
	}
	return workflow.GovernanceOutput{}, true, &workflow.TerminalError{Code: "operation_ended", Reason: fmt.Sprintf("operation %s is %s; nothing to check", op.ID, op.Status)}
}

// startChecking moves op to checking_governance, recording whether this is the re-check
// after an approval.
func (s *Service) startChecking(ctx context.Context, op *record.Operation, afterApproval bool) (*record.Operation, error) {
	cur, _, err := s.Move(ctx, op, workflow.StatusCheckingGovernance, record.Patch{Actor: stage.ActorSystem,
		Detail: record.EventDetail(map[string]any{"after_approval": afterApproval})})
	if err != nil {
		return nil, err
	}
	if cur.Status != workflow.StatusCheckingGovernance {
		return nil, &workflow.TerminalError{Code: "operation_moved", Reason: fmt.Sprintf("operation %s is %s; not checking governance", op.ID, cur.Status)}
	}
	return cur, nil
}

// resume picks the check up where it stands: a pending async review is expired past the
// run's deadline, else polled (pending while it has no answer); without one, the first round
// starts from the buyer's payload.
func (s *Service) resume(ctx context.Context, op *record.Operation, req *stage.Request, cfg workflow.RunConfig) (r checkRound, pending bool, err error) {
	review, reviews, since, err := s.pendingReview(ctx, op)
	if err != nil {
		return checkRound{}, false, err
	}
	if review == nil {
		payload, err := stage.BasePayload(op, req)
		return checkRound{payload: payload, reviews: reviews}, false, err
	}
	if err := s.expireReview(ctx, op, since, cfg); err != nil {
		return checkRound{}, false, err
	}
	res, err := s.pollReview(ctx, op, req, review)
	if err != nil {
		return checkRound{}, false, err
	}
	return checkRound{payload: review.Payload, n: review.Round, res: res, reviews: reviews}, res == nil, nil
}

// expireReview ends the buy when the async review that started at since outlived the run's
// deadline: a DeadlineExceededError, after the operation moved to expired.
func (s *Service) expireReview(ctx context.Context, op *record.Operation, since time.Time, cfg workflow.RunConfig) error {
	deadline := since.Add(time.Duration(cfg.DeadlineSeconds) * time.Second)
	if s.Now().Before(deadline) {
		return nil
	}
	reason := fmt.Sprintf("the governance review started at %s did not finish by %s", stage.RFC3339(since), stage.RFC3339(deadline))
	_, moved, err := s.Move(ctx, op, workflow.StatusExpired, record.Patch{Reason: &reason, Actor: stage.ActorSystem, EventType: record.EventGovernanceCheck})
	if err != nil {
		return err
	}
	if moved {
		s.Metrics.Count(metrics.Timeouts, metrics.Dims{"Kind": metrics.TimeoutGovernanceReview}, 1)
	}
	return &workflow.DeadlineExceededError{OperationID: op.ID, Deadline: stage.RFC3339(deadline)}
}

// decide runs check_governance rounds until a verdict settles the check: approved, denied,
// conditions a person must judge (or that did not converge within maxConditionRounds), or an
// async review to wait for. Machine-actionable conditions are applied and checked again.
func (s *Service) decide(ctx context.Context, op *record.Operation, req *stage.Request, r checkRound, afterApproval bool, cfg workflow.RunConfig) (workflow.GovernanceOutput, error) {
	for {
		if r.res == nil {
			r.n++
			res, err := s.ask(ctx, op, req, r.payload, r.n)
			if wait, waitErr := s.Unavailable(ctx, op, cfg, adcp.RoleGovernance, adcp.ToolCheckGovernance, err); wait != nil || waitErr != nil {
				return workflow.GovernanceOutput{Decision: workflow.GovernanceAgentUnavailable, Unavailable: wait}, waitErr
			}
			if err != nil {
				return workflow.GovernanceOutput{}, err
			}
			r.res = res
		}
		res := r.res
		if res.Pending {
			return s.awaitReview(ctx, op, r, cfg)
		}
		switch res.Verdict {
		case adcp.VerdictApproved:
			return s.approved(ctx, op, req, res, r.payload, afterApproval)
		case adcp.VerdictDenied:
			return s.denied(ctx, op, req, res)
		case adcp.VerdictConditions:
			if !actionable(res.Conditions) || r.n >= s.maxConditionRounds {
				return s.needsApproval(ctx, op, req, res, r.payload, conditionsReason(res, r.n))
			}
			next, err := applyConditions(r.payload, res.Conditions)
			if err != nil {
				return s.needsApproval(ctx, op, req, res, r.payload, conditionsReason(res, r.n)+"; "+err.Error())
			}
			r.payload, r.res = next, nil
		default:
			return workflow.GovernanceOutput{}, &workflow.TerminalError{Code: "unknown_verdict", Reason: fmt.Sprintf("check_governance verdict %q", res.Verdict)}
		}
	}
}

// actionable reports whether a machine can apply every condition: each names the value the
// field must take.
func actionable(conds []adcp.Condition) bool {
	for _, c := range conds {
		if len(bytes.TrimSpace(c.RequiredValue)) == 0 {
			return false
		}
	}
	return len(conds) > 0
}

// ask sends round n of check_governance with payload and records the answer (or the failure)
// on the timeline.
func (s *Service) ask(ctx context.Context, op *record.Operation, req *stage.Request, payload []byte, n int) (*adcp.GovernanceResult, error) {
	res, err := s.AdCP.CheckGovernance(ctx, req.Governance.AgentID, adcp.CheckGovernanceRequest{
		PlanID: req.Governance.PlanID, Caller: s.callerURI, Tool: adcp.ToolCreateMediaBuy,
		Payload: payload, PurchaseType: "media_buy", Target: req.SellerID,
	})
	if errors.As(err, new(*adcp.UnavailableError)) {
		return nil, err // not sent: the caller waits for the agent's breaker
	}
	if err != nil {
		s.CountAdcpError(err)
		s.Event(ctx, op, record.Event{Type: record.EventGovernanceCheck, Actor: stage.GovernanceActor(req.Governance.AgentID),
			Reason: record.Clip(err.Error(), 500), Detail: record.EventDetail(map[string]any{"round": n, "error_code": adcp.ErrorCode(err)})})
		s.Log.WarnContext(ctx, "check_governance failed", "operationId", op.ID, "round", n, "code", adcp.ErrorCode(err), "decision", adcp.Decide(err).String())
		return nil, stage.CallError("check_governance", err)
	}
	s.Event(ctx, op, record.Event{Type: record.EventGovernanceCheck, Actor: stage.GovernanceActor(req.Governance.AgentID),
		Detail: record.EventDetail(map[string]any{"round": n, "verdict": res.Verdict, "pending": res.Pending,
			"check_id": res.CheckID, "conditions": len(res.Conditions), "findings": len(res.Findings)})})
	return res, nil
}

// awaitReview remembers the async review the agent started (its task, the payload and round
// it reviews) under the next review intent of the operation's version, and answers pending.
func (s *Service) awaitReview(ctx context.Context, op *record.Operation, r checkRound, cfg workflow.RunConfig) (workflow.GovernanceOutput, error) {
	rec, _ := json.Marshal(reviewRecord{TaskID: r.res.TaskID, Payload: r.payload, Round: r.n})
	_, _, err := s.Ledger.PutIntent(ctx, record.Intent{Tenant: op.Tenant, OperationID: op.ID,
		Task: reviewName(op.Version, r.reviews+1), IdempotencyKey: r.res.TaskID, Request: rec, CreatedAt: s.Now()})
	if err != nil {
		return workflow.GovernanceOutput{}, fmt.Errorf("governance: store governance review of %s: %w", op.ID, err)
	}
	s.Log.InfoContext(ctx, "governance review pending", "operationId", op.ID, "round", r.n)
	return s.pending(cfg), nil
}

func (s *Service) pending(cfg workflow.RunConfig) workflow.GovernanceOutput {
	return workflow.GovernanceOutput{Decision: workflow.GovernancePending,
		Wait: workflow.WaitState{IntervalSeconds: cfg.PollInitialSeconds}}
}

func reviewName(version int64, n int) string {
	return fmt.Sprintf("%s%d#%d", stage.IntentReviewPrefix, version, n)
}

// pendingReview returns the latest async review recorded at the operation's current version,
// how many there are and when the first one started, or nil.
func (s *Service) pendingReview(ctx context.Context, op *record.Operation) (last *reviewRecord, n int, since time.Time, err error) {
	for i := 1; i <= s.maxConditionRounds+1; i++ {
		li, err := s.Ledger.GetIntent(ctx, op.Tenant, op.ID, reviewName(op.Version, i))
		if errors.Is(err, record.ErrNotFound) {
			break
		}
		if err != nil {
			return nil, 0, time.Time{}, fmt.Errorf("governance: read governance review of %s: %w", op.ID, err)
		}
		var rec reviewRecord
		if err := json.Unmarshal(li.Request, &rec); err != nil {
			return nil, 0, time.Time{}, fmt.Errorf("governance: decode governance review of %s: %w", op.ID, err)
		}
		if i == 1 {
			since = li.CreatedAt
		}
		last, n = &rec, i
	}
	return last, n, since, nil
}

// pollReview polls the async review; nil means still pending. A review task that ended
// without a verdict keeps the gate closed.
func (s *Service) pollReview(ctx context.Context, op *record.Operation, req *stage.Request, rv *reviewRecord) (*adcp.GovernanceResult, error) {
	ts, err := s.AdCP.GetTaskStatus(ctx, req.Governance.AgentID, adcp.GetTaskStatusRequest{TaskID: rv.TaskID, IncludeResult: true})
	if errors.As(err, new(*adcp.UnavailableError)) {
		return nil, err // not sent: the caller waits for the agent's breaker
	}
	if err != nil {
		s.CountAdcpError(err)
		return nil, stage.CallError("governance review status", err)
	}
	s.Event(ctx, op, record.Event{Type: record.EventGovernanceCheck, Actor: stage.GovernanceActor(req.Governance.AgentID),
		Detail: record.EventDetail(map[string]any{"review_task_status": ts.Status})})
	if !ts.Status.Terminal() {
		return nil, nil
	}
	if ts.Status != adcp.StatusCompleted {
		reason := "governance review ended " + string(ts.Status)
		if f := ts.Failure(); f != nil {
			reason += ": " + record.Clip(f.Error(), 300)
		}
		return nil, &workflow.TerminalError{Code: "governance_review_" + string(ts.Status), Reason: reason}
	}
	res, err := adcp.DecodeGovernance(ts.Result)
	if err != nil {
		s.CountAdcpError(err)
		return nil, stage.CallError("governance review result", err)
	}
	if res.Pending {
		return nil, nil
	}
	return res, nil
}

// approvalRequested reports whether a person was asked to approve the operation after its last
// move into awaiting_approval: then a "check" while awaiting (or checking) is the re-check the
// state machine runs after that approval, not a retry of this stage's own needs_approval.
func (s *Service) approvalRequested(ctx context.Context, op *record.Operation) (bool, error) {
	requested := false
	cursor := ""
	for page := 0; page < 50; page++ {
		p, err := s.Ledger.ListEvents(ctx, op.Tenant, op.ID, record.MaxListLimit, cursor)
		if err != nil {
			return false, fmt.Errorf("governance: read timeline of %s: %w", op.ID, err)
		}
		for _, e := range p.Items {
			switch {
			case e.To == workflow.StatusAwaitingApproval:
				requested = false
			case e.Type == record.EventApprovalRequested:
				requested = true
			}
		}
		if p.Cursor == "" {
			return requested, nil
		}
		cursor = p.Cursor
	}
	return requested, nil
}

func (s *Service) approved(ctx context.Context, op *record.Operation, req *stage.Request, res *adcp.GovernanceResult, payload []byte, afterApproval bool) (workflow.GovernanceOutput, error) {
	needs, why := false, ""
	if !afterApproval {
		switch {
		case req.RequireApproval:
			needs, why = true, "the request asks for a human approval"
		case s.policy != nil:
			needs, why = s.policy.Needs(op.BudgetTotal, op.Currency)
		}
	}
	to, decision := workflow.StatusCreating, workflow.GovernanceProceed
	if needs {
		to, decision = workflow.StatusAwaitingApproval, workflow.GovernanceNeedsApproval
	}
	return s.Settle(ctx, op, req, res, payload, to, decision, why)
}

func (s *Service) needsApproval(ctx context.Context, op *record.Operation, req *stage.Request, res *adcp.GovernanceResult, payload []byte, why string) (workflow.GovernanceOutput, error) {
	return s.Settle(ctx, op, req, res, payload, workflow.StatusAwaitingApproval, workflow.GovernanceNeedsApproval, why)
}

func (s *Service) denied(ctx context.Context, op *record.Operation, req *stage.Request, res *adcp.GovernanceResult) (workflow.GovernanceOutput, error) {
	reason := denialReason(res)
	_, moved, err := s.Move(ctx, op, workflow.StatusRejected, record.Patch{Reason: &reason, Actor: stage.GovernanceActor(req.Governance.AgentID),
		EventType: record.EventGovernanceCheck, Detail: record.EventDetail(map[string]any{"verdict": res.Verdict, "check_id": res.CheckID, "findings": res.Findings})})
	if err != nil {
		return workflow.GovernanceOutput{}, err
	}
	if moved {
		s.Metrics.Count(metrics.GovernanceDenied, nil, 1)
	}
	s.Log.InfoContext(ctx, "governance denied", "operationId", op.ID, "findings", len(res.Findings))
	return workflow.GovernanceOutput{Decision: workflow.GovernanceDenied, CheckID: res.CheckID, Reason: reason}, nil
}

// denialReason lists the findings in a sentence a person can read.
func denialReason(res *adcp.GovernanceResult) string {
	var b strings.Builder
	b.WriteString("governance denied the buy")
	if res.Explanation != "" {
		b.WriteString(": " + record.Clip(res.Explanation, 300))
	}
	for i, f := range res.Findings {
		if i == 5 {
			fmt.Fprintf(&b, "; and %d more findings", len(res.Findings)-i)
			break
		}
		fmt.Fprintf(&b, "; %s finding %s", f.Severity, f.CategoryID)
		if f.PolicyID != "" {
			fmt.Fprintf(&b, " (policy %s)", f.PolicyID)
		}
		if f.Explanation != "" {
			b.WriteString(": " + record.Clip(f.Explanation, 200))
		}
	}
	return record.Clip(b.String(), 1000)
}

func conditionsReason(res *adcp.GovernanceResult, round int) string {
	var parts []string
	for _, c := range res.Conditions {
		p := c.Field
		if len(c.RequiredValue) == 0 {
			p += " (needs a person)"
		}
		if c.Reason != "" {
			p += ": " + record.Clip(c.Reason, 200)
		}
		parts = append(parts, p)
	}
	return record.Clip(fmt.Sprintf("%s after %d round(s): %s", reasonGovernanceConditions, round, strings.Join(parts, "; ")), 1000)
}

// echoContext is the context object sent with our calls: the buyer's media_buy.context (if an
// object) plus operation_id.
func echoContext(op *record.Operation, req *stage.Request) json.RawMessage {
	m, err := stage.DecodeObject(req.MediaBuy)
	ctxObj := map[string]any{}
	if err == nil {
		if c, ok := m["context"].(map[string]any); ok {
			ctxObj = c
		}
	}
	ctxObj["operation_id"] = op.ID
	b, _ := json.Marshal(ctxObj) // a map of decoded JSON values always marshals
	return b
}

// applyConditions sets each condition's field (a dot path into the payload, "a.b[0].c" or
// "a.b.0.c") to its required_value.
func applyConditions(payload []byte, conds []adcp.Condition) ([]byte, error) {
	m, err := stage.DecodeObject(payload)
	if err != nil {
		return nil, err
	}
	for _, c := range conds {
		dec := json.NewDecoder(bytes.NewReader(c.RequiredValue))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("condition %s: required_value: %w", c.Field, err)
		}
		if err := setPath(m, strings.TrimPrefix(c.Field, "payload."), v); err != nil {
			return nil, fmt.Errorf("condition %s: %w", c.Field, err)
		}
	}
	return json.Marshal(m)
}

func pathTokens(path string) []string {
	var out []string
	for _, seg := range strings.Split(path, ".") {
		for seg != "" {
			i := strings.IndexByte(seg, '[')
			if i < 0 {
				out = append(out, seg)
				break
			}
			if i > 0 {
				out = append(out, seg[:i])
			}
			j := strings.IndexByte(seg[i:], ']')
			if j < 0 {
				out = append(out, seg[i:])
				break
			}
			out = append(out, seg[i+1:i+j])
			seg = seg[i+j+1:]
		}
	}
	return out
}

func setPath(root map[string]any, path string, v any) error {
	toks := pathTokens(path)
	if len(toks) == 0 {
		return errors.New("empty field path")
	}
	var cur any = root
	for i, t := range toks {
		last := i == len(toks)-1
		switch c := cur.(type) {
		case map[string]any:
			if last {
				c[t] = v
				return nil
			}
			next, ok := c[t]
			if !ok {
				return fmt.Errorf("field path %q: %q not present", path, t)
			}
			cur = next
		case []any:
			n, err := strconv.Atoi(t)
			if err != nil || n < 0 || n >= len(c) {
				return fmt.Errorf("field path %q: index %q out of range", path, t)
			}
			if last {
				c[n] = v
				return nil
			}
			cur = c[n]
		default:
			return fmt.Errorf("field path %q: %q is not an object or array", path, t)
		}
	}
	return nil
}

// Report is ReportOutcome: report_plan_outcome "completed" with the seller's response, sent as
// an intent fixed once. CompensationRequired is true when the governance agent answers with
// critical findings (the buy must be undone). The business-key lock is released.
func (s *Service) Report(ctx context.Context, in workflow.OutcomeInput) (workflow.OutcomeOutput, error) {
	op, req, err := s.LoadRequest(ctx, in.Tenant, in.OperationID)
	if err != nil {
		return workflow.OutcomeOutput{}, err
	}
	// A change may pause or cancel the buy the moment it is placed, while this run still
	// reports: the buy was placed all the same (before ReportOutcome nothing else cancels it).
	if !op.Status.Placed() && (op.Status != workflow.StatusCanceled || op.MediaBuyID == "") {
		return workflow.OutcomeOutput{}, &workflow.TerminalError{Code: "not_completed", Reason: fmt.Sprintf("operation %s is %s; only a completed buy is reported completed", op.ID, op.Status)}
	}
	out := workflow.OutcomeOutput{}
	if op.GovernanceCheckID != "" {
		report, err := s.reportCompleted(ctx, op, req)
		if err != nil {
			return workflow.OutcomeOutput{}, err
		}
		out = undo(report)
	}
	if err := s.releaseLock(ctx, op); err != nil {
		return workflow.OutcomeOutput{}, err
	}
	s.Log.InfoContext(ctx, "outcome reported", "operationId", op.ID, "compensationRequired", out.CompensationRequired)
	return out, nil
}

// reportCompleted reports a completed buy with the seller's response (intent
// "report_plan_outcome#completed", fixed once whichever stage sends it).
func (s *Service) reportCompleted(ctx context.Context, op *record.Operation, req *stage.Request) (*adcp.OutcomeResult, error) {
	return s.report(ctx, op, req, "completed", func(r *adcp.ReportPlanOutcomeRequest) {
		sr := &adcp.SellerResponse{SellerReference: op.MediaBuyID}
		// The ledger's exact decimal, the amount that was approved and bought.
		sr.CommittedBudget = json.Number(op.BudgetTotal)
		r.SellerResponse = sr
	})
}

// undo says whether the governance answer requires the buy to be undone: findings with
// critical severity.
func undo(r *adcp.OutcomeResult) workflow.OutcomeOutput {
	var crit []string
	for _, f := range r.Findings {
		if f.Severity == "critical" {
			crit = append(crit, f.CategoryID+": "+record.Clip(f.Explanation, 200))
		}
	}
	if len(crit) == 0 {
		return workflow.OutcomeOutput{}
	}
	return workflow.OutcomeOutput{CompensationRequired: true, Reason: record.Clip("governance findings require an undo: "+strings.Join(crit, "; "), 1000)}
}

// report sends report_plan_outcome for outcome once (intent "report_plan_outcome#<outcome>").
func (s *Service) report(ctx context.Context, op *record.Operation, req *stage.Request, outcome string, fill func(*adcp.ReportPlanOutcomeRequest)) (*adcp.OutcomeResult, error) {
	in, err := s.FixIntent(ctx, op, stage.IntentReportPrefix+outcome, adcp.ToolReportPlanOutcome, func() (adcp.Intent, error) {
		r := adcp.ReportPlanOutcomeRequest{PlanID: req.Governance.PlanID, CheckID: op.GovernanceCheckID, PurchaseType: "media_buy",
			Outcome: outcome, GovernanceContext: op.GovernanceContext, Context: echoContext(op, req)}
		fill(&r)
		return s.NewIntent(ctx, req.Governance.AgentID, adcp.ToolReportPlanOutcome, r)
	})
	if err != nil {
		return nil, err
	}
	res, err := s.AdCP.ReportPlanOutcome(ctx, req.Governance.AgentID, in.Intent)
	s.ReleaseUnsent(ctx, op, in, err)
	if err != nil {
		s.CountAdcpError(err)
		s.Event(ctx, op, record.Event{Type: record.EventOutcomeReport, Actor: stage.GovernanceActor(req.Governance.AgentID),
			Reason: record.Clip(err.Error(), 500), Detail: record.EventDetail(map[string]any{"outcome": outcome, "error_code": adcp.ErrorCode(err)})})
		return nil, stage.CallError("report_plan_outcome", err)
	}
	s.Event(ctx, op, record.Event{Type: record.EventOutcomeReport, Actor: stage.GovernanceActor(req.Governance.AgentID),
		Detail: record.EventDetail(map[string]any{"outcome": outcome, "outcome_id": res.OutcomeID, "outcome_state": res.OutcomeState,
			"findings": res.Findings, "committed_budget": res.CommittedBudget, "replayed": res.Replayed})})
	return res, nil
}

// FailOutput is what RecordFailure returns; the state machine reads the OutcomeOutput part
// (FailureKind ends a buy the ledger records as completed as completed).
type FailOutput struct {
	workflow.OutcomeOutput
	Error    string `json:"error"`
	Reported bool   `json:"reported"`
}

// failureTimeout is the failure of a callback whose time ran out. In the MediaBuy state
// machine only RequestApproval's reaches RecordFailure (ExpireApproval gave up; FailureKind
// then ends the execution as ApprovalExpired), so a buy that fails on it expired waiting for a
// person: reasonApprovalExpired, beside the approval line that says when (GET, the CLI).
const (
	failureTimeout        = "States.Timeout"
	reasonApprovalExpired = "the approval expired with no decision, so the buy went no further"
)

// failureStatus maps a failure's Error name to the terminal status it records.
func failureStatus(name string) workflow.Status {
	switch name {
	case workflow.FailureGovernanceDenied, "ApprovalRejectedError":
		return workflow.StatusRejected
	case failureTimeout, "DeadlineExceededError":
		return workflow.StatusExpired
	case workflow.FailureCampaignCalledOff:
		return workflow.StatusCanceled
	}
	return workflow.StatusFailed
}

// Fail is RecordFailure: record the reason on the operation (forward only), report "failed" to
// governance when a check exists, and release the business-key lock.
//
// An operation that already ended keeps its status and gets no event after its terminal one
// (the failure is logged). One the ledger records as completed (the seller completed the buy
// and a webhook, a poll or the sweep saw it, while a step failed, e.g. a crashed create) is
// reported completed, with the same fixed intent as ReportOutcome, so governance learns of the
// buy exactly once; the output's Status tells the state machine to end it as completed.
func (s *Service) Fail(ctx context.Context, in workflow.OutcomeInput) (FailOutput, error) {
	op, err := s.Load(ctx, in.Tenant, in.OperationID)
	if err != nil {
		return FailOutput{}, err
	}
	f := workflow.StepError{Error: "Unknown"}
	if in.Failure != nil && in.Failure.Error != "" {
		f = in.Failure.Readable()
	}
	reason := record.Clip(f.Sentence(), 1000)
	if f.Error == failureTimeout {
		reason = reasonApprovalExpired
	}
	if !op.Status.Terminal() {
		ev := record.EventDetail(map[string]any{"error": f.Error})
		if op, _, err = s.Move(ctx, op, failureStatus(f.Error), record.Patch{Reason: &reason, Actor: stage.ActorSystem, EventType: record.EventFailure, Detail: ev}); err != nil {
			return FailOutput{}, err
		}
	} else {
		s.Log.WarnContext(ctx, "failure after the operation ended", "operationId", op.ID, "status", op.Status, "error", f.Error, "reason", reason)
	}
	out := FailOutput{OutcomeOutput: workflow.OutcomeOutput{Status: op.Status}, Error: f.Error}
	if op.GovernanceCheckID != "" {
		req, err := stage.ParseRequest(op)
		if err != nil {
			return FailOutput{}, err
		}
		var report *adcp.OutcomeResult
		if op.Status.Placed() {
			report, err = s.reportCompleted(ctx, op, req)
		} else {
			code := failureCode(op, f)
			if len(code) > 64 {
				code = code[:64]
			}
			report, err = s.report(ctx, op, req, "failed", func(r *adcp.ReportPlanOutcomeRequest) {
				r.Error = &adcp.OutcomeError{Code: code, Message: record.Clip(reason, 1000)}
			})
		}
		var te *workflow.TransientError
		switch {
		case errors.As(err, &te):
			return FailOutput{}, err
		case err != nil:
			// A report the governance agent refuses for good must not hide the failure itself.
			s.Log.WarnContext(ctx, "outcome not reported", "operationId", op.ID, "status", op.Status, "err", err)
		default:
			out.Reported = true
			if op.Status.Placed() {
				u := undo(report)
				out.CompensationRequired, out.Reason = u.CompensationRequired, u.Reason
			}
		}
	}
	if err := s.releaseLock(ctx, op); err != nil {
		return FailOutput{}, err
	}
	s.Log.InfoContext(ctx, "failure recorded", "operationId", op.ID, "status", op.Status, "error", f.Error, "reported", out.Reported)
	return out, nil
}

// failureCode is the code of a failed buy's report to governance: the seller's AdCP code
// when the seller ended the task (recorded on the operation) or refused a call (the
// TerminalError's code in the Catch's cause), else the failure's name.
func failureCode(op *record.Operation, f workflow.StepError) string {
	if op.ErrorCode != "" {
		return op.ErrorCode
	}
	if code := workflow.TerminalErrorCode(f.Cause); code != "" {
		return code
	}
	return f.Error
}

// releaseLock ends the business-key lock submit took with owner = operation id. The lease's
// fence is not stored on the operation, so the lock is re-acquired by the same owner (which
// succeeds only while the lock is ours or free) and released at once; a lock held by another
// operation is left alone.
func (s *Service) releaseLock(ctx context.Context, op *record.Operation) error {
	if op.PONumber == "" || op.SellerID == "" {
		return nil
	}
	name := record.BusinessKeyLock(op.Tenant, op.SellerID, op.PONumber)
	lease, err := s.Ledger.AcquireLock(ctx, name, op.ID, time.Minute)
	var held *record.LockHeldError
	switch {
	case errors.As(err, &held):
		return nil
	case err != nil:
		return fmt.Errorf("governance: take business-key lock of %s to release it: %w", op.ID, err)
	}
	if err := s.Ledger.ReleaseLock(ctx, lease); err != nil && !errors.Is(err, record.ErrLeaseLost) {
		return fmt.Errorf("governance: release business-key lock of %s: %w", op.ID, err)
	}
	s.Event(ctx, op, record.Event{Type: record.EventLockReleased, Actor: stage.ActorSystem})
	return nil
}
