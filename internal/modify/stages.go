package modify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/breaker"
	"github.com/buyflow/buyflow/internal/money"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/stage"
	"github.com/buyflow/buyflow/internal/workflow"
)

// The actions of the modify function, as the state machine sends them.
const (
	ActionCheck  workflow.Action = "check_change" // CheckChange: governance, phase modification
	ActionUpdate workflow.Action = "update"       // UpdateMediaBuy: the seller call
	ActionApply  workflow.Action = "apply"        // ApplyChange: record the buy's new state, report
	ActionFail   workflow.Action = "fail_change"  // RecordChangeFailure: end the change, report failed
)

// The outcomes of a change, recorded on the buy's state and read by the state machine.
const (
	OutcomeApplied  = "applied"
	outcomeDenied   = "denied"
	outcomeRejected = "rejected"
	outcomeExpired  = "expired"
	// outcomeApprovalExpired: nobody decided on the change before its approval expired.
	outcomeApprovalExpired = "approval_expired"
	OutcomeFailed          = "failed"
)

// Check is CheckChange: the plan is fixed against the seller's current buy, then
// check_governance with phase "modification", tool update_media_buy and the exact arguments the
// seller will receive. The decision says what the state machine does next: proceed, ask a
// person (a budget increase over the policy's threshold, or conditions a person must judge),
// wait for an async review, or stop (denied: the buy stays as it was).
func (s *Service) Check(ctx context.Context, in workflow.StageInput) (workflow.GovernanceOutput, error) {
	r, err := s.load(ctx, in.Tenant, in.OperationID)
	if err != nil {
		return workflow.GovernanceOutput{}, err
	}
	p, err := s.plan(ctx, r)
	if wait, waitErr := s.unavailable(ctx, r, in.Config, adcp.RoleSeller, adcp.ToolGetMediaBuys, err); wait != nil || waitErr != nil {
		return workflow.GovernanceOutput{Decision: workflow.GovernanceAgentUnavailable, Unavailable: wait}, waitErr
	}
	if err != nil {
		return workflow.GovernanceOutput{}, err
	}
	payload, err := json.Marshal(p.Args)
	if err != nil {
		return workflow.GovernanceOutput{}, fmt.Errorf("modify: encode arguments: %w", err)
	}
	// Only a change that waited for a person can have been approved by one.
	afterApproval := r.op.Status == workflow.StatusAwaitingApproval
	if _, err := s.move(ctx, r, workflow.StatusCheckingGovernance, record.Patch{Actor: "system"}); err != nil {
		return workflow.GovernanceOutput{}, err
	}
	res, err := s.adcp.CheckGovernance(ctx, r.gov.AgentID, adcp.CheckGovernanceRequest{
		PlanID: r.gov.PlanID, Caller: s.cfg.CallerURI, Tool: adcp.ToolUpdateMediaBuy, Payload: payload,
		PurchaseType: "media_buy", Phase: "modification", ModificationSummary: record.Clip(p.Summary, 500),
		GovernanceContext: r.parent.GovernanceContext, Target: r.op.SellerID,
		ProposedCommitment: p.commitment(r.parent.Currency),
	})
	if wait, waitErr := s.unavailable(ctx, r, in.Config, adcp.RoleGovernance, adcp.ToolCheckGovernance, err); wait != nil || waitErr != nil {
		return workflow.GovernanceOutput{Decision: workflow.GovernanceAgentUnavailable, Unavailable: wait}, waitErr
	}
	if err != nil {
		return workflow.GovernanceOutput{}, stage.CallError("check_governance (modification)", err)
	}
	out := workflow.GovernanceOutput{CheckID: res.CheckID, ExpiresAt: res.ExpiresAt, Reason: res.Explanation}
	switch {
	case res.Pending:
		out.Decision = workflow.GovernancePending
		out.Wait = workflow.WaitState{IntervalSeconds: max(in.Config.PollInitialSeconds, 1)}
	case res.Verdict == adcp.VerdictApproved:
		out.Decision = workflow.GovernanceProceed
		after, _ := money.ParseDecimal(p.After, r.parent.Currency)
		before, _ := money.ParseDecimal(p.Before, r.parent.Currency)
		if need, why := s.policy.Needs(Planned{Before: before, After: after}); need {
			// A re-check after a slow approval does not ask again for what a person approved.
			approved := false
			if afterApproval {
				if approved, err = s.approvedByPerson(ctx, r); err != nil {
					return workflow.GovernanceOutput{}, err
				}
			}
			if !approved {
				out.Decision, out.Reason = workflow.GovernanceNeedsApproval, why
			}
		}
	case res.Verdict == adcp.VerdictConditions:
		// Conditions on a change are for a person to judge: buyflow does not rewrite the
		// buyer's change to meet them.
		out.Decision, out.Reason = workflow.GovernanceNeedsApproval, "governance set conditions on the change"
	case res.Verdict == adcp.VerdictDenied:
		out.Decision = workflow.GovernanceDenied
		if out.Reason == "" {
			out.Reason = "governance denied the change"
		}
	default:
		return workflow.GovernanceOutput{}, &workflow.TerminalError{Code: "unexpected_verdict", Reason: fmt.Sprintf("check_governance answered verdict %q", res.Verdict)}
	}
	s.event(ctx, r, record.Event{Type: record.EventModificationGovernanceCheck, Actor: "governance:" + r.gov.AgentID, Amount: p.After, Currency: r.parent.Currency, Reason: record.Clip(out.Reason, 500),
		Detail: record.EventDetail(map[string]any{"change_id": r.op.ID, "kind": r.change.Kind, "verdict": res.Verdict, "pending": res.Pending, "check_id": res.CheckID,
			"decision": out.Decision, "budget_before": p.Before, "budget_after": p.After, "unlisted": p.Unlisted})})
	if res.CheckID != "" && !res.Pending {
		ch := record.Patch{GovernanceCheckID: &res.CheckID, Actor: "governance:" + r.gov.AgentID}
		if res.GovernanceContext != "" {
			ch.GovernanceContext = &res.GovernanceContext
		}
		if t, err := time.Parse(time.RFC3339, res.ExpiresAt); err == nil {
			ch.GovernanceExpiresAt = &t
		}
		next := workflow.StatusCreating
		switch out.Decision {
		case workflow.GovernanceNeedsApproval:
			// What the approver is shown is stored before the workflow asks for them.
			if err := s.storeReview(ctx, r, p, res); err != nil {
				return workflow.GovernanceOutput{}, err
			}
			next = workflow.StatusAwaitingApproval
			ch.Reason = &out.Reason
		case workflow.GovernanceDenied:
			// Denied: the change ends here, nothing is sent; RecordChangeFailure frees the buy.
			next = workflow.StatusRejected
			ch.Reason = &out.Reason
		}
		if _, err := s.move(ctx, r, next, ch); err != nil {
			return workflow.GovernanceOutput{}, err
		}
	}
	return out, nil
}

// Update is UpdateMediaBuy: update_media_buy with the governance-checked arguments, the seller
// idempotency key and the frozen bytes written ahead (every retry sends the same), our webhook
// for an async answer. The output starts the wait loop the buy's own create uses: a webhook,
// the sweep or a poll completes it.
func (s *Service) Update(ctx context.Context, in workflow.StageInput) (workflow.SellerOutput, error) {
	if err := in.Config.Validate(); err != nil {
		return workflow.SellerOutput{}, err
	}
	r, err := s.load(ctx, in.Tenant, in.OperationID)
	if err != nil {
		return workflow.SellerOutput{}, err
	}
	now := s.now()
	switch r.op.Status {
	case workflow.StatusCheckingGovernance, workflow.StatusAwaitingApproval, workflow.StatusCreating:
	default:
		// Already answered (a retry after the answer was recorded), or ended.
		return s.waitOutput(r.op, in.Config, now), nil
	}
	if r.op.GovernanceCheckID == "" {
		return workflow.SellerOutput{}, &workflow.TerminalError{Code: "not_checked", Reason: fmt.Sprintf("change %s has no governance check; nothing is sent", r.op.ID)}
	}
	p, err := s.plan(ctx, r)
	if err != nil {
		return workflow.SellerOutput{}, err
	}
	if _, err := s.move(ctx, r, workflow.StatusCreating, record.Patch{Actor: "system"}); err != nil {
		return workflow.SellerOutput{}, err
	}
	token, err := s.fixed(ctx, r, intentToken, func() ([]byte, error) {
		t, err := s.cfg.NewToken()
		return []byte(t), err
	})
	if err != nil {
		return workflow.SellerOutput{}, err
	}
	intent, err := stage.FixIntent(ctx, s.ledger, sentIntent(r, intentUpdate, adcp.ToolUpdateMediaBuy), func() (adcp.Intent, error) {
		args := p.Args
		args.GovernanceContext = r.op.GovernanceContext
		if s.cfg.PublicBaseURL == "" {
			return adcp.Intent{}, &workflow.TerminalError{Code: "no_public_base_url", Reason: "the webhook URL cannot be built: no public base URL configured"}
		}
		url, err := s.cfg.Routes.WebhookURL(ctx, s.cfg.PublicBaseURL, r.op.ID, record.OperationOwner{Tenant: r.op.Tenant, SellerID: r.op.SellerID})
		if err != nil {
			// The URL without a route works: the receiver finds the owner in the ledger.
			s.log.WarnContext(ctx, "seller webhook URL registered without its route", "operationId", r.op.ID, "err", err)
		}
		args.PushNotificationConfig = &adcp.PushNotificationConfig{URL: url, OperationID: r.op.ID, Token: string(token)}
		in, err := stage.BuildIntent(ctx, s.adcp, r.op.SellerID, adcp.ToolUpdateMediaBuy, args, now)
		if err != nil {
			return adcp.Intent{}, &workflow.TerminalError{Code: "bad_intent", Reason: err.Error()}
		}
		return in, nil
	})
	if err != nil {
		return workflow.SellerOutput{}, err // a ledger failure is a TransientError (workflow.TaskError)
	}
	if intent.Resend() {
		// An earlier attempt may have reached the seller: look before resending, as a create
		// does. A resend the seller's replay window does not cover is refused by the client.
		res, err := s.appliedAtTheSeller(ctx, r, p)
		if wait, waitErr := s.unavailable(ctx, r, in.Config, adcp.RoleSeller, adcp.ToolGetMediaBuys, err); wait != nil || waitErr != nil {
			return workflow.SellerOutput{Status: r.op.Status, Unavailable: wait}, waitErr
		}
		if res != nil {
			return s.recordAnswer(ctx, r, p, res, token, in.Config, now)
		}
	}
	res, err := s.adcp.UpdateMediaBuy(ctx, r.seller, intent.Intent)
	stage.ReleaseUnsent(ctx, s.ledger, s.log, r.op.ID, intent, err)
	if wait, waitErr := s.unavailable(ctx, r, in.Config, adcp.RoleSeller, adcp.ToolUpdateMediaBuy, err); wait != nil || waitErr != nil {
		return workflow.SellerOutput{Status: r.op.Status, Unavailable: wait}, waitErr
	}
	if err != nil {
		s.event(ctx, r, record.Event{Type: record.EventModificationSellerCall, Actor: "seller:" + r.seller, Reason: record.Clip(err.Error(), 500),
			Detail: record.EventDetail(map[string]any{"change_id": r.op.ID, "tool": adcp.ToolUpdateMediaBuy, "attempt": intent.Attempt, "error_code": adcp.ErrorCode(err), "decision": adcp.Decide(err).String()})})
		if wait := stage.RetryAfterWait(r.seller, err, intent.Created, s.now()); wait != nil {
			return workflow.SellerOutput{Status: r.op.Status, Unavailable: wait}, nil
		}
		return workflow.SellerOutput{}, stage.CallError("update_media_buy", err)
	}
	s.event(ctx, r, record.Event{Type: record.EventModificationSellerCall, Actor: "seller:" + r.seller, Amount: p.After, Currency: r.parent.Currency,
		Detail: record.EventDetail(map[string]any{"change_id": r.op.ID, "tool": adcp.ToolUpdateMediaBuy, "attempt": intent.Attempt, "shape": res.Shape, "status": res.Status,
			"task_id": res.TaskID, "revision": res.Revision, "media_buy_status": res.MediaBuyStatus, "replayed": res.Replayed})})
	return s.recordAnswer(ctx, r, p, res, token, in.Config, now)
}

// recordAnswer records the seller's answer to the change's update forward-only and returns
// the first wait output. A success whose answer contradicts the change ends the change failed
// (seller_contradicted) with the finding as its reason and the state the seller reported,
// which ApplyChange records instead of the plan.
func (s *Service) recordAnswer(ctx context.Context, r *run, p *frozenPlan, res *adcp.MediaBuyResult, token []byte, cfg workflow.RunConfig, now time.Time) (workflow.SellerOutput, error) {
	var to workflow.Status
	var finding string
	var reported state
	switch res.Shape {
	case adcp.ShapeSuccess:
		to = workflow.StatusCompleted
		if finding, reported = contradiction(r.change, p, res, r.seller, r.parent.MediaBuyID, r.parent.Currency); finding != "" {
			to = workflow.StatusFailed
		}
	case adcp.ShapeSubmitted:
		to = workflow.StatusSubmitted
	case adcp.ShapeInterim:
		st, ok := workflow.FromTaskStatus(string(res.Status))
		if !ok {
			return workflow.SellerOutput{}, &workflow.TerminalError{Code: "unexpected_status", Reason: fmt.Sprintf("update_media_buy answered status %q", res.Status)}
		}
		to = st
	default:
		return workflow.SellerOutput{}, &workflow.TerminalError{Code: "unexpected_shape", Reason: fmt.Sprintf("update_media_buy answer shape %q", res.Shape)}
	}
	hash := record.HashToken(string(token))
	deadline := now.Add(time.Duration(cfg.DeadlineSeconds) * time.Second)
	ch := record.Patch{WebhookTokenHash: &hash, Deadline: &deadline, Actor: "seller:" + r.seller, EventType: record.EventModificationSellerCall,
		Detail: record.EventDetail(map[string]any{"tool": adcp.ToolUpdateMediaBuy, "task_id": res.TaskID, "revision": res.Revision})}
	if res.TaskID != "" {
		ch.SellerTaskID = &res.TaskID
	}
	mbID := r.parent.MediaBuyID
	ch.MediaBuyID = &mbID
	if to == workflow.StatusInputRequired && res.Message != "" {
		m := record.Clip(res.Message, 1000)
		ch.Reason = &m
	}
	if finding != "" {
		f, code, st := record.Clip(finding, 1000), codeContradicted, string(reported)
		ch.Reason, ch.ErrorCode, ch.SellerState = &f, &code, &st
		ch.Detail = record.EventDetail(map[string]any{"tool": adcp.ToolUpdateMediaBuy, "task_id": res.TaskID, "revision": res.Revision,
			"contradicted": true, "media_buy_status": res.MediaBuyStatus, "planned_state": p.State})
		s.log.WarnContext(ctx, "the seller's success answer contradicts the change", "operationId", r.parent.ID, "changeId", r.op.ID, "mediaBuyStatus", res.MediaBuyStatus)
	}
	cur, err := s.move(ctx, r, to, ch)
	if err != nil {
		return workflow.SellerOutput{}, err
	}
	return s.waitOutput(cur, cfg, now), nil
}

// appliedAtTheSeller reads the buy at the seller before a resend of the change's update and
// returns the update's success when the seller already applied it: the buy is past the
// revision the plan was made against (no other change is in flight on it) with the planned
// packages and state. Nil, nil when it cannot tell (a seller that does not list the buy never
// tells): the resend decides. An error is only the seller's open breaker (nothing was read).
func (s *Service) appliedAtTheSeller(ctx context.Context, r *run, p *frozenPlan) (*adcp.MediaBuyResult, error) {
	b, err := s.current(ctx, r)
	if breaker.Unavailable(err) != nil {
		return nil, err
	}
	applied := err == nil && !b.Unlisted && b.Revision > p.Revision && b.State == p.State && len(b.Packages) == len(p.Packages)
	for i := 0; applied && i < len(b.Packages); i++ {
		pk := b.Packages[i]
		applied = slices.Contains(p.Packages, record.PackageBudget{PackageID: pk.ID, Budget: pk.decimal()})
	}
	detail := map[string]any{"change_id": r.op.ID, "tool": adcp.ToolGetMediaBuys, "applied": applied, "planned_revision": p.Revision}
	switch {
	case err != nil:
		detail["error_code"] = adcp.ErrorCode(err)
	case b.Unlisted:
		detail["listed"] = false
	default:
		detail["revision"] = b.Revision
	}
	s.event(ctx, r, record.Event{Type: record.EventLapsedClaimCheck, Actor: "seller:" + r.seller, Detail: record.EventDetail(detail)})
	if !applied {
		return nil, nil
	}
	return &adcp.MediaBuyResult{Shape: adcp.ShapeSuccess, Status: adcp.StatusCompleted, MediaBuyID: r.parent.MediaBuyID, Revision: b.Revision}, nil
}

// waitOutput is the wait loop's state for the change as the ledger holds it.
func (s *Service) waitOutput(op *record.Operation, cfg workflow.RunConfig, now time.Time) workflow.SellerOutput {
	// A change keeps the short net whatever the sweep's health: its wait is bounded by the
	// change's own deadline (12 h) and already fits its transition budget.
	w := workflow.StartWait(cfg, now, false, nil)
	if !op.Deadline.IsZero() {
		w.DeadlineUnix = op.Deadline.Unix()
	}
	out := workflow.SellerOutput{Status: op.Status, Terminal: op.Status.Terminal(), Next: w, Reason: op.Reason}
	if !out.Terminal && op.Status != workflow.StatusInputRequired && w.Expired(now) {
		out.DeadlineExceeded = true
	}
	return out
}

// fixed returns the bytes stored under task for the change, storing build's the first time:
// write-ahead, so a retry reuses them. It is for what is never sent as such (the push token);
// a call's intent is claimed by each attempt (sentIntent).
func (s *Service) fixed(ctx context.Context, r *run, task string, build func() ([]byte, error)) ([]byte, error) {
	b, err := build()
	if err != nil {
		return nil, err
	}
	got, _, err := s.ledger.PutIntent(ctx, record.Intent{Tenant: r.op.Tenant, OperationID: r.op.ID, Task: task,
		IdempotencyKey: task + "-" + r.op.ID, Request: b, CreatedAt: s.now()})
	if err != nil {
		return nil, &workflow.TransientError{Reason: fmt.Sprintf("store %s of %s: %v", task, r.op.ID, err)}
	}
	return got.Request, nil
}

// sentIntent names the change's intent name, which sends tool. The change's intents were once
// stored as the JSON of the whole adcp.Intent under the key legacyKey, with no claims; a
// change in flight across that deploy still holds one. Such a record is read as the intent it
// holds, and its claim (the first one counted) is a resend: the attempt that stored it sent
// it at once, so it may have reached the agent, and a second first send at an agent without a
// replay window could apply it twice. The safe side is the resend, which such an agent
// refuses, ending the change failed with nothing applied twice.
func sentIntent(r *run, name, tool string) stage.IntentRef {
	return stage.IntentRef{Tenant: r.op.Tenant, OperationID: r.op.ID, Name: name, Tool: tool,
		Decode: func(stored *record.Intent) (adcp.Intent, error) {
			if stored.IdempotencyKey != legacyKey(name, r.op.ID) {
				return stage.StoredIntent(tool, stored), nil
			}
			var in adcp.Intent
			if err := json.Unmarshal(stored.Request, &in); err != nil {
				return adcp.Intent{}, err
			}
			if in.Task != tool || in.Key == "" || len(in.Body) == 0 {
				return adcp.Intent{}, fmt.Errorf("the stored %s intent holds task %q with key %t and %d bytes", tool, in.Task, in.Key != "", len(in.Body))
			}
			return in, nil
		}}
}

// legacyKey is the key the change's intent name was stored under before its claims were
// counted (sentIntent).
func legacyKey(name, changeID string) string { return name + "-" + changeID }

// ChangeOutcome is the output of ApplyChange and RecordChangeFailure.
type ChangeOutcome = workflow.ChangeOutcome

// Apply is ApplyChange, after the seller's task ended: a completed update records the buy's
// new state forward-only (the seller's revision read back, the planned budget and state) and
// reports completed to governance; a failed, rejected or canceled one leaves the buy as it
// was, records the seller's reason and reports failed.
func (s *Service) Apply(ctx context.Context, in workflow.StageInput) (ChangeOutcome, error) {
	r, err := s.load(ctx, in.Tenant, in.OperationID)
	if err != nil {
		return ChangeOutcome{}, err
	}
	if r.op.Status != workflow.StatusCompleted {
		reason := r.op.Reason
		if reason == "" {
			reason = "the seller ended the update " + string(r.op.Status)
		}
		return s.end(ctx, r, OutcomeFailed, reason, r.op.ErrorCode)
	}
	var p frozenPlan
	if err := s.readFixed(ctx, r, intentPlan, &p); err != nil {
		return ChangeOutcome{}, err
	}
	// The seller's answer confirmed the change; its listing only tells the new revision. A
	// seller that does not list the buy, or cannot be read now, leaves buyflow's own count,
	// which no update sends (Plan), and the next change that finds the buy listed corrects.
	rev := p.Revision + 1
	got, err := s.listed(ctx, r)
	if err != nil {
		s.log.WarnContext(ctx, "the buy's revision was not read after its change", "operationId", r.parent.ID, "changeId", r.op.ID, "err", err)
	}
	if got != nil && got.Revision > 0 {
		rev = got.Revision
	}
	next := record.BuyState{Tenant: r.op.Tenant, OperationID: r.parent.ID, MediaBuyID: r.parent.MediaBuyID, Revision: rev, State: string(p.State),
		BudgetTotal: p.After, Currency: r.parent.Currency, Packages: p.Packages, EndTime: p.EndTime, LastReason: r.change.Reason}
	ev := record.Event{At: s.now(), Type: record.EventModificationApplied, Actor: "seller:" + r.seller, Amount: p.After, Currency: r.parent.Currency, Reason: p.Summary,
		Detail: record.EventDetail(map[string]any{"change_id": r.op.ID, "kind": r.change.Kind, "budget_before": p.Before, "budget_after": p.After, "revision": rev, "state": p.State})}
	st, err := s.ledger.ApplyChange(ctx, next, r.op.ID, ev)
	switch {
	case errors.Is(err, record.ErrStaleRevision):
		return ChangeOutcome{}, &workflow.TerminalError{Code: "stale_revision", Reason: fmt.Sprintf("the seller reports revision %d, below the recorded one", rev)}
	case err != nil:
		return ChangeOutcome{}, &workflow.TransientError{Reason: fmt.Sprintf("record change %s: %v", r.op.ID, err)}
	}
	if err := s.ledger.AppendEvent(ctx, r.op.Tenant, r.op.ID, ev); err != nil {
		s.log.WarnContext(ctx, "event not recorded", "operationId", r.op.ID, "err", err)
	}
	if err := s.follow(ctx, r, st); err != nil {
		return ChangeOutcome{}, err
	}
	s.report(ctx, r, &adcp.SellerResponse{SellerReference: r.parent.MediaBuyID, CommittedBudget: json.Number(p.After)}, nil)
	s.log.InfoContext(ctx, "change applied", "operationId", r.parent.ID, "changeId", r.op.ID, "kind", r.change.Kind, "revision", st.Revision)
	return ChangeOutcome{Outcome: OutcomeApplied, Revision: st.Revision, State: st.State, Reason: p.Summary}, nil
}

// follow moves the buy's own status and committed budget to what its state says after the
// change ended (completed, paused or canceled): the one status every reader, list filter,
// status event and finance's timeline go by. A buy that is no longer placed (a compensation
// canceled it meanwhile) is left as it is.
func (s *Service) follow(ctx context.Context, r *run, st *record.BuyState) error {
	if !r.parent.Status.Placed() {
		return nil
	}
	to := record.PlacedStatus(st.State)
	if to == r.parent.Status && st.BudgetTotal == r.parent.BudgetTotal {
		return nil
	}
	ch := record.Patch{Actor: "seller:" + r.seller, EventCurrency: r.parent.Currency,
		Detail: record.EventDetail(map[string]any{"change_id": r.op.ID, "kind": r.change.Kind, "state": st.State, "budget_total": st.BudgetTotal})}
	cur, err := s.ledger.FollowChange(ctx, r.op.Tenant, r.parent.ID, r.parent.Status, to, st.BudgetTotal, ch)
	if te, ok := errors.AsType[*record.TransitionError](err); ok && te.Current != nil && !te.Current.Status.Placed() {
		return nil
	}
	if err != nil {
		// Another write moved the buy between the read and this one: the step's retry reads it again.
		return &workflow.TransientError{Reason: fmt.Sprintf("record the status of buy %s after change %s: %v", r.parent.ID, r.op.ID, err)}
	}
	r.parent = cur
	return nil
}

// The failure names the state machine writes for a change, beside workflow's own.
const (
	failureRejected = "ApprovalRejectedError"
	failureTimeout  = "States.Timeout"
)

// Fail is RecordChangeFailure: the change ends without touching the buy (denied, rejected,
// expired or failed), the reason is recorded on the buy's state and both timelines, and
// governance hears failed when a check exists.
func (s *Service) Fail(ctx context.Context, in workflow.OutcomeInput) (ChangeOutcome, error) {
	r, err := s.load(ctx, in.Tenant, in.OperationID)
	if err != nil {
		return ChangeOutcome{}, err
	}
	outcome, reason, code := OutcomeFailed, "the change failed", ""
	if in.Failure != nil {
		// A Lambda task's failure arrives as its JSON envelope; the person reads its message.
		f := in.Failure.Readable()
		reason = record.Clip(f.Sentence(), 1000)
		code = workflow.TerminalErrorCode(f.Cause)
		switch f.Error {
		case workflow.FailureChangeDenied:
			outcome, reason = outcomeDenied, "governance denied the change"
		case failureRejected:
			// The cause names the approval, who rejected it, when, and their comment.
			outcome, reason = outcomeRejected, record.Clip("the approver rejected the change, which was not sent to the seller ("+f.Cause+")", 1000)
		case workflow.FailureChangeApprovalExpired:
			outcome, reason = outcomeApprovalExpired, "nobody approved the change before its approval expired; it was not sent to the seller"
		case workflow.FailureChangeDeadline, failureTimeout:
			outcome, reason = outcomeExpired, "the change did not finish before its deadline"
		}
	}
	// What a stage recorded on the change (governance's explanation, the seller's message, why
	// a person was asked) is the more precise reason.
	if r.op.Reason != "" {
		sep := ": "
		if outcome == outcomeRejected || outcome == outcomeApprovalExpired {
			sep = "; a person was asked because "
		}
		reason += sep + r.op.Reason
	}
	return s.end(ctx, r, outcome, reason, code)
}

// end closes a change that did not apply.
func (s *Service) end(ctx context.Context, r *run, outcome, reason, code string) (ChangeOutcome, error) {
	to := workflow.StatusFailed
	switch outcome {
	case outcomeRejected, outcomeDenied:
		to = workflow.StatusRejected
	case outcomeExpired, outcomeApprovalExpired:
		to = workflow.StatusExpired
	}
	if !r.op.Status.Terminal() {
		rs := record.Clip(reason, 1000)
		ch := record.Patch{Reason: &rs, Actor: "system"}
		if code != "" {
			ch.ErrorCode = &code
		}
		if _, err := s.move(ctx, r, to, ch); err != nil {
			return ChangeOutcome{}, err
		}
	}
	contradicted := code == codeContradicted
	if contradicted {
		outcome = record.OutcomeContradicted
	}
	detail := map[string]any{"change_id": r.op.ID, "kind": r.change.Kind, "outcome": outcome, "error_code": code}
	if contradicted && r.op.SellerState != "" {
		detail["seller_state"] = r.op.SellerState
	}
	ev := record.Event{At: s.now(), Type: record.EventModificationEnded, Actor: "system", Reason: record.Clip(reason, 1000), Detail: record.EventDetail(detail)}
	var st *record.BuyState
	var err error
	if contradicted {
		st, err = s.ledger.ContradictChange(ctx, r.op.Tenant, r.parent.ID, r.op.ID, r.op.SellerState, record.Clip(reason, 1000), ev)
	} else {
		st, err = s.ledger.EndChange(ctx, r.op.Tenant, r.parent.ID, r.op.ID, outcome, record.Clip(reason, 1000), ev)
	}
	if err != nil {
		return ChangeOutcome{}, &workflow.TransientError{Reason: fmt.Sprintf("end change %s: %v", r.op.ID, err)}
	}
	if err := s.ledger.AppendEvent(ctx, r.op.Tenant, r.op.ID, ev); err != nil {
		s.log.WarnContext(ctx, "event not recorded", "operationId", r.op.ID, "err", err)
	}
	if contradicted {
		// What the seller said of the buy is its status now, whatever the change asked.
		if err := s.follow(ctx, r, st); err != nil {
			return ChangeOutcome{}, err
		}
	}
	if r.op.GovernanceCheckID != "" {
		if code == "" {
			code = outcome
		}
		s.report(ctx, r, nil, &adcp.OutcomeError{Code: code, Message: record.Clip(reason, 500)})
	}
	return ChangeOutcome{Outcome: outcome, Reason: reason, Revision: st.Revision, State: st.State}, nil
}

// report sends report_plan_outcome for the change (an intent fixed once); a failure is an
// event, not an error: the buy's state is recorded either way.
func (s *Service) report(ctx context.Context, r *run, resp *adcp.SellerResponse, failure *adcp.OutcomeError) {
	if r.op.GovernanceCheckID == "" {
		return
	}
	outcome := "completed"
	if failure != nil {
		outcome = "failed"
	}
	in, err := stage.FixIntent(ctx, s.ledger, sentIntent(r, intentReport, adcp.ToolReportPlanOutcome), func() (adcp.Intent, error) {
		return stage.BuildIntent(ctx, s.adcp, r.gov.AgentID, adcp.ToolReportPlanOutcome, adcp.ReportPlanOutcomeRequest{PlanID: r.gov.PlanID, CheckID: r.op.GovernanceCheckID,
			PurchaseType: "media_buy", Outcome: outcome, SellerResponse: resp, Error: failure, GovernanceContext: r.op.GovernanceContext,
			Context: json.RawMessage(fmt.Sprintf(`{"operation_id":%q,"change_id":%q}`, r.parent.ID, r.op.ID))}, s.now())
	})
	var res *adcp.OutcomeResult
	if err == nil {
		res, err = s.adcp.ReportPlanOutcome(ctx, r.gov.AgentID, in.Intent)
		stage.ReleaseUnsent(ctx, s.ledger, s.log, r.op.ID, in, err)
	}
	ev := record.Event{Type: record.EventModificationOutcomeReport, Actor: "governance:" + r.gov.AgentID, Detail: record.EventDetail(map[string]any{"change_id": r.op.ID, "outcome": outcome})}
	if err != nil {
		ev.Reason = record.Clip(err.Error(), 500)
		s.log.WarnContext(ctx, "change outcome not reported", "operationId", r.parent.ID, "changeId", r.op.ID, "err", err)
	} else {
		ev.Detail = record.EventDetail(map[string]any{"change_id": r.op.ID, "outcome": outcome, "outcome_state": res.OutcomeState})
	}
	s.event(ctx, r, ev)
}

func (s *Service) readFixed(ctx context.Context, r *run, task string, v any) error {
	got, err := s.ledger.GetIntent(ctx, r.op.Tenant, r.op.ID, task)
	if err != nil {
		return &workflow.TerminalError{Code: "no_plan", Reason: fmt.Sprintf("change %s has no %s: %v", r.op.ID, task, err)}
	}
	return json.Unmarshal(got.Request, v)
}
