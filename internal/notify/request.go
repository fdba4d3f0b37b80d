package notify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/buyflow/buyflow/internal/approvalpolicy"
	"github.com/buyflow/buyflow/internal/dispatch"
	"github.com/buyflow/buyflow/internal/record"

	"github.com/buyflow/buyflow/internal/approval"
	"github.com/buyflow/buyflow/internal/approvalcore"
	"github.com/buyflow/buyflow/internal/money"
	"github.com/buyflow/buyflow/internal/slack"
	"github.com/buyflow/buyflow/internal/workflow"
)

// Service is the notify Lambda's use case: Request and Expire (Handle dispatches the payload).
// It is safe for concurrent use.
type Service struct{ *approval.Base }

// New checks cfg and returns the notify stage: it needs the Slack client, the public
// base URL and a policy with approvers on top of what both Lambdas need.
func New(cfg approval.Config) (*Service, error) {
	errs := cfg.Problems()
	if cfg.Slack == nil {
		errs = append(errs, errors.New("no Slack client"))
	}
	if cfg.BaseURL == "" {
		errs = append(errs, errors.New("no public base URL"))
	}
	if len(cfg.Policy.Approvers) == 0 {
		errs = append(errs, errors.New("no approvers in the policy"))
	}
	s, err := approval.NewBase(cfg, errs)
	if err != nil {
		return nil, err
	}
	return &Service{s}, nil
}

// Handle is the notify Lambda's handler: action "request" runs Request (output {}), "expire"
// runs Expire (output workflow.ApprovalExpiry). A failure is logged with its operation.
func (s *Service) Handle(ctx context.Context, raw json.RawMessage) (any, error) {
	return dispatch.Table{
		workflow.ActionRequest: dispatch.Of(func(ctx context.Context, in workflow.CallbackInput) (struct{}, error) {
			err := s.Request(ctx, in)
			if err != nil {
				s.Log.ErrorContext(ctx, "approval request failed", "operationId", in.OperationID, "err", err)
			}
			return struct{}{}, err
		}),
		workflow.ActionExpire: dispatch.Of(func(ctx context.Context, in workflow.StageInput) (workflow.ApprovalExpiry, error) {
			out, err := s.Expire(ctx, in)
			if err != nil {
				s.Log.ErrorContext(ctx, "approval expiry failed", "operationId", in.OperationID, "err", err)
			}
			return out, err
		}),
	}.Handle(ctx, raw)
}

// actorSystem is the actor of events the workflow causes; actorTimeout decides expiries.
const (
	actorSystem  = "system"
	actorTimeout = "system:timeout"
)

// Request runs the notify stage's "request" action (RequestApproval, a waitForTaskToken task):
// it stores the approval with the task token in the ledger, moves the operation to
// awaiting_approval, posts the Slack request with one signed link per approver and records
// the request on the timeline. The task stays parked; the approve Lambda completes it.
//
// A retry with the same task token converges on the same approval (its id derives from the
// token) and posts to Slack only if no message was recorded yet. The round after an expiry
// that escalated goes to the policy's escalation approvers.
func (s *Service) Request(ctx context.Context, in workflow.CallbackInput) error {
	if err := checkRequest(in); err != nil {
		return err
	}
	if in.CampaignID != "" {
		return s.requestCampaign(ctx, in)
	}
	op, err := s.Operation(ctx, in.Tenant, in.OperationID)
	if err != nil {
		return err
	}
	if op.Status.Terminal() {
		return &workflow.TerminalError{Code: "operation_ended", Reason: fmt.Sprintf("operation %s is already %s; no approval is requested", op.ID, op.Status)}
	}
	id := approval.ApprovalID(in.TaskToken)
	rd, known, err := s.roundOf(ctx, in.Tenant, in.OperationID, id)
	if err != nil {
		return err
	}
	approvers, escalateTo := s.approversFor(rd, op.Requester)
	if len(approvers) == 0 {
		return &workflow.TerminalError{Code: "no_approver", Reason: "no approver other than the requester is configured"}
	}
	// A person approves the exact amount that is bought; one the page cannot show exactly is
	// never put before them.
	amount, err := s.amount(ctx, op)
	if err != nil {
		return err
	}
	if _, err := money.ParseDecimal(amount, op.Currency); err != nil {
		return &workflow.TerminalError{Code: "invalid_amount", Reason: fmt.Sprintf("the buy's amount %q %s cannot be shown exactly: %v", amount, op.Currency, err)}
	}
	now := s.Now()
	a, err := s.storeApproval(ctx, in, op, record.Approval{ID: id, Approvers: approvers, EscalationApprovers: escalateTo,
		Amount: amount, ExpiresAt: now.Add(s.timeout(rd, in.Config))})
	if err != nil {
		return err
	}
	if !known {
		err := s.Cfg.Ledger.AppendEvent(ctx, in.Tenant, in.OperationID, record.Event{
			Type: record.EventApprovalRequested, Actor: actorSystem, Amount: a.Amount, Currency: a.Currency, Reason: a.Reason,
			Detail: approval.EventDetail{ApprovalID: id, Round: rd.Round, Escalation: rd.Escalation, Approvers: a.Approvers}.Raw(),
		})
		if err != nil {
			return fmt.Errorf("notify: record request of approval %s: %w", id, err)
		}
	}
	if err := s.awaitApproval(ctx, op, id); err != nil {
		return err
	}
	if len(a.SlackMessages) == 0 && a.Status == record.ApprovalPending && now.Before(a.ExpiresAt) {
		if err := s.post(ctx, a, op); err != nil {
			return err
		}
	}
	s.Log.InfoContext(ctx, "approval requested", "operationId", in.OperationID, "approvalId", id,
		"round", rd.Round, "escalation", rd.Escalation, "approvers", len(a.Approvers), "expiresAt", a.ExpiresAt)
	return nil
}

// amount is what the approver commits to: the buy's amount, or for a change to a placed buy
// the buy's budget once changed, as the change's record holds it.
func (s *Service) amount(ctx context.Context, op *record.Operation) (string, error) {
	if op.Kind != record.KindModification {
		return op.BudgetTotal, nil
	}
	p, err := s.Purchase(ctx, op)
	if err != nil {
		return "", err
	}
	return money.Amount{Minor: p.Change.After.Minor, Currency: p.Change.After.Currency}.Decimal(), nil
}

// checkRequest refuses a request input the state machine could not have meant.
func checkRequest(in workflow.CallbackInput) error {
	if err := checkSubject(in.OperationID, in.CampaignID, in.Tenant); err != nil {
		return err
	}
	if in.TaskToken == "" {
		return &workflow.InvalidInputError{Field: "task_token", Reason: "is required"}
	}
	if in.Config.ApprovalTimeoutSeconds <= 0 {
		return &workflow.InvalidInputError{Field: "config.approval_timeout_seconds", Reason: "must be a positive integer"}
	}
	return nil
}

// roundOf returns the round of approval id in the timeline of its subject (the operation, or
// the campaign); known is false for a new request, whose round follows the latest (an
// escalation when that one expired and escalated).
func (s *Service) roundOf(ctx context.Context, tenant, timeline, id string) (rd approval.Round, known bool, err error) {
	h, err := s.History(ctx, tenant, timeline)
	if err != nil {
		return approval.Round{}, false, err
	}
	rd, known = h.RoundOf(id)
	return rd, known, nil
}

// approversFor returns who is asked in round rd, and who is asked next if nobody decides in
// time (so the buyer's view can say so). The requester may not approve their own buy, so
// they get no link.
func (s *Service) approversFor(rd approval.Round, requester string) (approvers, escalateTo []string) {
	notRequester := func(a string) bool { return a == requester }
	group := s.Cfg.Policy.Approvers
	if rd.Escalation {
		group = s.Cfg.Policy.EscalationApprovers
	}
	approvers = slices.DeleteFunc(slices.Clone(group), notRequester)
	if !rd.Escalation && s.Cfg.Policy.OnTimeout == approvalpolicy.TimeoutEscalate {
		escalateTo = slices.DeleteFunc(slices.Clone(s.Cfg.Policy.EscalationApprovers), notRequester)
	}
	return approvers, escalateTo
}

// timeout is how long round rd waits for a decision: the run's approval timeout, or the
// policy's shorter escalation timeout for an escalation round.
func (s *Service) timeout(rd approval.Round, cfg workflow.RunConfig) time.Duration {
	timeout := time.Duration(cfg.ApprovalTimeoutSeconds) * time.Second
	if et := time.Duration(s.Cfg.Policy.EscalationTimeoutSeconds) * time.Second; rd.Escalation && et > 0 && et < timeout {
		timeout = et
	}
	return timeout
}

// storeApproval returns the approval of this task token, creating it once (a concurrent retry
// may create it first) with want's id, approvers, amount and expiry and the operation's
// requester and reason. An approval of that id for another operation or token is refused.
func (s *Service) storeApproval(ctx context.Context, in workflow.CallbackInput, op *record.Operation, want record.Approval) (*record.Approval, error) {
	code := s.reasonCode(in.Reason, op)
	want.Tenant, want.OperationID, want.TaskToken = in.Tenant, in.OperationID, in.TaskToken
	want.Requester, want.Currency = op.Requester, op.Currency
	want.Reason, want.ReasonText = string(code), reasonText(code, op)
	return s.createOnce(ctx, want)
}

// createOnce returns the approval want.ID, creating it as want the first time (a concurrent
// retry may create it first). One of that id for another subject or token is refused.
func (s *Service) createOnce(ctx context.Context, want record.Approval) (*record.Approval, error) {
	a, err := s.Cfg.Ledger.GetApproval(ctx, want.ID)
	switch {
	case errors.Is(err, record.ErrNotFound):
		a, err = s.Cfg.Ledger.CreateApproval(ctx, want)
		if errors.Is(err, record.ErrConflict) { // a concurrent retry created it first
			a, err = s.Cfg.Ledger.GetApproval(ctx, want.ID)
		}
		if err != nil {
			return nil, fmt.Errorf("notify: create approval %s: %w", want.ID, err)
		}
	case err != nil:
		return nil, fmt.Errorf("notify: read approval %s: %w", want.ID, err)
	}
	if a.Tenant != want.Tenant || a.OperationID != want.OperationID || a.CampaignID != want.CampaignID || a.TaskToken != want.TaskToken {
		return nil, &workflow.TerminalError{Code: "approval_mismatch", Reason: fmt.Sprintf("approval %s belongs to another subject", want.ID)}
	}
	return a, nil
}

// awaitApproval moves op to awaiting_approval when that move is legal from where it is.
// Already being there (a retry, an escalation round) is fine; an operation that ended meanwhile
// is a terminal error; any other status is left as it is and logged, since the approval itself
// is already stored and the workflow decides what happens next.
func (s *Service) awaitApproval(ctx context.Context, op *record.Operation, id string) error {
	if op.Status == workflow.StatusAwaitingApproval {
		return nil
	}
	if !workflow.CanMove(op.Status, workflow.StatusAwaitingApproval) {
		s.Log.WarnContext(ctx, "operation cannot move to awaiting_approval; left as it is", "operationId", op.ID, "status", op.Status)
		return nil
	}
	_, err := s.Cfg.Ledger.Transition(ctx, op.Tenant, op.ID, workflow.StatusAwaitingApproval, record.AnyVersion, record.Patch{
		Actor: actorSystem, Detail: approval.EventDetail{ApprovalID: id}.Raw(),
	})
	var te *record.TransitionError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &te) && te.Current != nil && te.Current.Status == workflow.StatusAwaitingApproval:
		return nil
	case errors.As(err, &te) && te.Current != nil && te.Current.Status.Terminal():
		return &workflow.TerminalError{Code: "operation_ended", Reason: fmt.Sprintf("operation %s is already %s; no approval is requested", op.ID, te.Current.Status)}
	case errors.As(err, &te) && te.Current != nil:
		s.Log.WarnContext(ctx, "operation moved elsewhere; left as it is", "operationId", op.ID, "status", te.Current.Status)
		return nil
	case errors.Is(err, record.ErrNotFound):
		return &workflow.NotFoundError{OperationID: op.ID}
	default:
		return fmt.Errorf("notify: move operation %s to awaiting_approval: %w", op.ID, err)
	}
}

// post sends a buy's request to Slack with what it buys.
func (s *Service) post(ctx context.Context, a *record.Approval, op *record.Operation) error {
	v, err := s.Review(ctx, a, op)
	if err != nil {
		return err
	}
	return s.postView(ctx, a, v)
}

// postView sends the request v to Slack, one signed link per approver, and stores where it
// landed. Nothing posted at all is an error (the stage retries); a partial post is logged and
// kept.
func (s *Service) postView(ctx context.Context, a *record.Approval, v approvalcore.Approval) error {
	exp := s.LinkExpiry(a)
	reviews := make([]slack.Review, 0, len(a.Approvers))
	for _, who := range a.Approvers {
		link, err := s.Cfg.Signer.Sign(s.Cfg.BaseURL, a.ID, who, exp)
		if err != nil {
			return &workflow.TerminalError{Code: "link_signing_failed", Reason: fmt.Sprintf("approval %s: %v", a.ID, err)}
		}
		reviews = append(reviews, slack.Review{Approver: who, URL: link})
	}
	refs, err := slack.PostRequest(ctx, s.Cfg.Slack, v, reviews, s.Cfg.Delivery)
	if len(refs) == 0 {
		if err == nil {
			err = errors.New("nothing was posted")
		}
		return fmt.Errorf("notify: post approval %s to slack: %w", a.ID, err)
	}
	if err != nil {
		s.Log.WarnContext(ctx, "approval request reached only some approvers", "approvalId", a.ID, "posted", len(refs), "err", err)
	}
	stored := make([]record.SlackRef, len(refs))
	for i, r := range refs {
		stored[i] = record.SlackRef{Channel: r.Channel, TS: r.TS}
	}
	if err := s.Cfg.Ledger.SetSlackMessages(ctx, a.ID, stored); err != nil {
		return fmt.Errorf("notify: store slack messages of approval %s: %w", a.ID, err)
	}
	a.SlackMessages = stored
	return nil
}

// reasonCode maps the state machine's reason to the reason shown to approvers.
func (s *Service) reasonCode(reason string, op *record.Operation) approvalcore.ReasonCode {
	switch approvalcore.ReasonCode(reason) {
	case approvalcore.ReasonSellerInputRequired, approvalcore.ReasonPolicyThreshold, approvalcore.ReasonGovernanceConditions,
		approvalcore.ReasonChangeNeedsApproval:
		return approvalcore.ReasonCode(reason)
	}
	if needs, _ := s.Cfg.Policy.Needs(op.BudgetTotal, op.Currency); needs {
		return approvalcore.ReasonPolicyThreshold
	}
	if op.RequireApproval {
		return reasonBuyerRequested
	}
	return approvalcore.ReasonGovernanceConditions
}

// reasonText is what the approvers read under the reason: the operation's recorded reason
// when it carries the words of the party that asked (the seller's input-required message, the
// governance agent's conditions), frozen into the approval when it is requested.
func reasonText(code approvalcore.ReasonCode, op *record.Operation) string {
	switch code {
	case approvalcore.ReasonSellerInputRequired, approvalcore.ReasonGovernanceConditions, approvalcore.ReasonChangeNeedsApproval:
		return record.Clip(strings.TrimSpace(op.Reason), 500)
	}
	return ""
}

// reasonBuyerRequested is the reason code of an approval the buyer asked for in the submit
// request (require_approval); approvalcore.ReasonCode.Label has a generic sentence for it.
const reasonBuyerRequested approvalcore.ReasonCode = "buyer_requested"

// Expire runs the notify stage's "expire" action (ExpireApproval, after RequestApproval's
// States.Timeout): it marks the operation's latest approval expired in the ledger (pending →
// expired, conditionally), updates its Slack messages, records the expiry and says whether
// the workflow asks again (escalated: once, to the escalation approvers, when the policy says
// so) or gives up. An approval decided in a race with the timeout is reported as it is: the
// workflow had stopped waiting, so it gives up and says why.
func (s *Service) Expire(ctx context.Context, in workflow.StageInput) (workflow.ApprovalExpiry, error) {
	if err := checkSubject(in.OperationID, in.CampaignID, in.Tenant); err != nil {
		return workflow.ApprovalExpiry{}, err
	}
	// A campaign's approval rounds are on the campaign's timeline.
	timeline := in.OperationID
	if in.CampaignID != "" {
		timeline = in.CampaignID
	}
	h, err := s.History(ctx, in.Tenant, timeline)
	if err != nil {
		return workflow.ApprovalExpiry{}, err
	}
	last, ok := h.Latest()
	if !ok {
		return workflow.ApprovalExpiry{Reason: "no approval request was recorded for this operation"}, nil
	}
	a, err := s.Cfg.Ledger.Decide(ctx, last.ApprovalID, record.Decision{Outcome: record.ApprovalExpired, By: actorTimeout})
	var de *record.DecisionError
	fresh := err == nil
	switch {
	case err == nil:
		s.recordExpiry() // here, so a failure below and its retry count it once
	case errors.As(err, &de) && de.Current.Status == record.ApprovalExpired:
		a = de.Current // a retry of this action
	case errors.As(err, &de) && de.Current.Status != record.ApprovalPending:
		cur := de.Current
		reason := fmt.Sprintf("approval %s was %s by %s at %s, after the approval window closed; the workflow had stopped waiting, so nothing is bought",
			cur.ID, cur.Status, cur.Decider, approvalcore.FormatTime(cur.DecidedAt))
		if !last.Expired {
			s.AppendEvent(ctx, in.Tenant, timeline, record.Event{
				Type: record.EventApprovalExpired, Actor: actorTimeout, Amount: cur.Amount, Currency: cur.Currency, Reason: cur.Reason,
				Detail: approval.EventDetail{ApprovalID: cur.ID, Round: last.Round, Outcome: string(cur.Status), Note: "decided after the timeout"}.Raw(),
			})
		}
		return workflow.ApprovalExpiry{Reason: reason}, nil
	case errors.Is(err, record.ErrNotFound):
		return workflow.ApprovalExpiry{Reason: fmt.Sprintf("approval %s was never stored", last.ApprovalID)}, nil
	default:
		return workflow.ApprovalExpiry{}, fmt.Errorf("notify: expire approval %s: %w", last.ApprovalID, err)
	}

	escalate := s.Cfg.Policy.OnTimeout == approvalpolicy.TimeoutEscalate && !last.Escalation && len(s.Cfg.Policy.EscalationApprovers) > 0
	if last.Expired { // the event is already written: keep its answer
		escalate = last.Escalated
	} else {
		err := s.Cfg.Ledger.AppendEvent(ctx, in.Tenant, timeline, record.Event{
			Type: record.EventApprovalExpired, Actor: actorTimeout, Amount: a.Amount, Currency: a.Currency, Reason: a.Reason,
			Detail: approval.EventDetail{ApprovalID: a.ID, Round: last.Round, Escalation: last.Escalation, Escalated: escalate}.Raw(),
		})
		if err != nil {
			return workflow.ApprovalExpiry{}, fmt.Errorf("notify: record expiry of approval %s: %w", a.ID, err)
		}
	}
	if fresh {
		var op *record.Operation
		if in.OperationID != "" {
			if op, err = s.Cfg.Ledger.GetOperation(ctx, in.Tenant, in.OperationID); err != nil {
				op = nil // the status message is still worth sending without the seller
			}
		}
		s.UpdateSlack(ctx, a, op)
	}
	reason := "approval expired at " + approvalcore.FormatTime(a.ExpiresAt) + " with no decision"
	if escalate {
		reason += "; asking the escalation approvers"
	}
	s.Log.InfoContext(ctx, "approval expired", "operationId", in.OperationID, "campaignId", in.CampaignID, "approvalId", a.ID, "escalated", escalate)
	return workflow.ApprovalExpiry{Escalated: escalate, Reason: reason}, nil
}

// checkSubject checks the subject of an approval stage: exactly one of an operation and a
// campaign, and the tenant.
func checkSubject(opID, campaignID, tenant string) error {
	if opID != "" && campaignID != "" {
		return &workflow.InvalidInputError{Field: "campaign_id", Reason: "is exclusive with operation_id"}
	}
	if campaignID != "" {
		return checkStage(campaignID, tenant)
	}
	return checkStage(opID, tenant)
}

func checkStage(opID, tenant string) error {
	if opID == "" {
		return &workflow.InvalidInputError{Field: "operation_id", Reason: "is required"}
	}
	if tenant == "" {
		return &workflow.InvalidInputError{Field: "tenant", Reason: "is required"}
	}
	return nil
}
