package create

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/dispatch"
	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/sellertask"
	"github.com/buyflow/buyflow/internal/stage"
	"github.com/buyflow/buyflow/internal/webhookroute"
	"github.com/buyflow/buyflow/internal/workflow"
)

// Service is the create function's use case: create and cancel. It is safe for concurrent use.
type Service struct {
	stage.Stage
	callerURI     string
	publicBaseURL string
	routes        *webhookroute.Secret
	rand          func() float64
}

// New returns the create stage. callerURI is the caller of the re-check of a lapsed approval
// before spend; seller webhooks go to <publicBaseURL>/v1/webhooks/adcp/<operation id>, with
// the operation's route when o.Routes is set.
func New(l stage.Ledger, a stage.AdCP, callerURI, publicBaseURL string, o stage.Options) *Service {
	return &Service{Stage: stage.New(l, a, o), callerURI: callerURI, publicBaseURL: strings.TrimRight(publicBaseURL, "/"),
		routes: o.Routes, rand: stage.OrMathRand(o.Rand)}
}

// Handle handles the create function's payload: actions create and cancel.
func (s *Service) Handle(ctx context.Context, raw json.RawMessage) (any, error) {
	return dispatch.Table{
		workflow.ActionCreate: dispatch.Of(s.CreateMediaBuy),
		workflow.ActionCancel: dispatch.Of(s.Cancel),
	}.Handle(ctx, raw)
}

// CreateMediaBuy is the CreateMediaBuy stage: create_media_buy with the frozen bytes stored write-ahead (the
// governance-checked payload plus plan_id, governance_context, push_notification_config and
// our context echo). A retry sends the stored key and bytes; a lapsed claim is reconciled
// with get_media_buys first. The output is the first SellerOutput of the wait loop:
// completed (terminal), submitted, working or input_required.
func (s *Service) CreateMediaBuy(ctx context.Context, in workflow.StageInput) (workflow.SellerOutput, error) {
	if err := in.Config.Validate(); err != nil {
		return workflow.SellerOutput{}, err
	}
	op, req, err := s.LoadRequest(ctx, in.Tenant, in.OperationID)
	if err != nil {
		return workflow.SellerOutput{}, err
	}
	now := s.Now()
	switch op.Status {
	case workflow.StatusAwaitingApproval, workflow.StatusCheckingGovernance, workflow.StatusCreating:
	case workflow.StatusRequested:
		return workflow.SellerOutput{}, &workflow.TerminalError{Code: "not_checked", Reason: fmt.Sprintf("operation %s was never checked by governance; nothing is sent", op.ID)}
	default:
		// Already placed (a retry after the seller's answer was recorded) or ended.
		return s.recorded(op, in.Config, now), nil
	}
	if op.GovernanceCheckID == "" {
		return workflow.SellerOutput{}, &workflow.TerminalError{Code: "not_checked", Reason: fmt.Sprintf("operation %s has no governance check; nothing is sent", op.ID)}
	}
	if !op.GovernanceExpiresAt.IsZero() && !now.Before(op.GovernanceExpiresAt) {
		checked, err := s.recheck(ctx, op, req)
		if wait, waitErr := s.Unavailable(ctx, op, in.Config, adcp.RoleGovernance, adcp.ToolCheckGovernance, err); wait != nil || waitErr != nil {
			return workflow.SellerOutput{Status: op.Status, Unavailable: wait}, waitErr
		}
		if err != nil {
			return workflow.SellerOutput{}, err
		}
		op = checked
	}
	if op, _, err = s.Move(ctx, op, workflow.StatusCreating, record.Patch{Actor: stage.ActorSystem}); err != nil {
		return workflow.SellerOutput{}, err
	}
	if op.Status != workflow.StatusCreating {
		return s.recorded(op, in.Config, now), nil
	}

	token, err := s.PushToken(ctx, op)
	if err != nil {
		return workflow.SellerOutput{}, err
	}
	intent, err := s.FixIntent(ctx, op, stage.IntentCreate, adcp.ToolCreateMediaBuy, func() (adcp.Intent, error) {
		return s.createIntent(ctx, op, req, token, now)
	})
	if wait, waitErr := s.Unavailable(ctx, op, in.Config, adcp.RoleSeller, adcp.ToolGetAdCPCapabilities, err); wait != nil || waitErr != nil {
		return workflow.SellerOutput{Status: op.Status, Unavailable: wait}, waitErr
	}
	if err != nil {
		return workflow.SellerOutput{}, err
	}
	if intent.Resend() {
		// A lapsed claim: an earlier attempt may have reached the seller. Look before resending.
		out, done, err := s.reconcile(ctx, op, req, in.Config, token, now)
		if wait, waitErr := s.Unavailable(ctx, op, in.Config, adcp.RoleSeller, adcp.ToolGetMediaBuys, err); wait != nil || waitErr != nil {
			return workflow.SellerOutput{Status: op.Status, Unavailable: wait}, waitErr
		}
		if err != nil || done {
			return out, err
		}
	}

	res, err := s.AdCP.CreateMediaBuy(ctx, req.SellerID, intent.Intent)
	s.ReleaseUnsent(ctx, op, intent, err)
	if wait, waitErr := s.Unavailable(ctx, op, in.Config, adcp.RoleSeller, adcp.ToolCreateMediaBuy, err); wait != nil || waitErr != nil {
		return workflow.SellerOutput{Status: op.Status, Unavailable: wait}, waitErr
	}
	if err != nil {
		s.CountAdcpError(err)
		s.Event(ctx, op, record.Event{Type: record.EventSellerCall, Actor: stage.SellerActor(req.SellerID), Reason: record.Clip(err.Error(), 500),
			Detail: record.EventDetail(map[string]any{"tool": adcp.ToolCreateMediaBuy, "attempt": intent.Attempt, "error_code": adcp.ErrorCode(err), "decision": adcp.Decide(err).String()})})
		s.Log.WarnContext(ctx, "create_media_buy failed", "operationId", op.ID, "attempt", intent.Attempt, "code", adcp.ErrorCode(err), "decision", adcp.Decide(err).String())
		if wait := stage.RetryAfterWait(req.SellerID, err, intent.Created, s.Now()); wait != nil {
			return workflow.SellerOutput{Status: op.Status, Unavailable: wait}, nil
		}
		return workflow.SellerOutput{}, stage.CallError("create_media_buy", err)
	}
	s.Event(ctx, op, record.Event{Type: record.EventSellerCall, Actor: stage.SellerActor(req.SellerID),
		Detail: record.EventDetail(map[string]any{"tool": adcp.ToolCreateMediaBuy, "attempt": intent.Attempt, "shape": res.Shape, "status": res.Status,
			"task_id": res.TaskID, "media_buy_id": res.MediaBuyID, "replayed": res.Replayed})})
	return s.recordCreate(ctx, op, req, res, in.Config, token, now)
}

// recheck runs check_governance again, with the payload that was checked, when the approval
// lapsed between the check and the create. The state machine re-checks after an approval that
// outlived the token (RouteApproval), but an approval decided just before the expiry reaches
// here after it; a lapsed approval is no approval. Only an operation that has not started to
// create (awaiting_approval, checking_governance) can take a new check; anything but a fresh
// "approved" keeps the gate closed.
func (s *Service) recheck(ctx context.Context, op *record.Operation, req *stage.Request) (*record.Operation, error) {
	lapsed := &workflow.TerminalError{Code: "governance_expired",
		Reason: fmt.Sprintf("the governance approval %s expired at %s before the buy was placed", op.GovernanceCheckID, stage.RFC3339(op.GovernanceExpiresAt))}
	if op.Status != workflow.StatusAwaitingApproval && op.Status != workflow.StatusCheckingGovernance {
		return nil, lapsed
	}
	payload, err := s.checkedPayload(ctx, op, req)
	if err != nil {
		return nil, err
	}
	res, err := s.AdCP.CheckGovernance(ctx, req.Governance.AgentID, adcp.CheckGovernanceRequest{
		PlanID: req.Governance.PlanID, Caller: s.callerURI, Tool: adcp.ToolCreateMediaBuy, Payload: payload, PurchaseType: "media_buy",
		Target: req.SellerID,
	})
	if errors.As(err, new(*adcp.UnavailableError)) {
		return nil, err // not sent: the caller waits for the governance agent's breaker
	}
	if err != nil {
		s.CountAdcpError(err)
		return nil, stage.CallError("check_governance (re-check before spend)", err)
	}
	s.Event(ctx, op, record.Event{Type: record.EventGovernanceCheck, Actor: stage.GovernanceActor(req.Governance.AgentID),
		Detail: record.EventDetail(map[string]any{"recheck": true, "verdict": res.Verdict, "pending": res.Pending, "check_id": res.CheckID})})
	if res.Pending || res.Verdict != adcp.VerdictApproved {
		if res.Verdict == adcp.VerdictDenied && !res.Pending {
			s.Metrics.Count(metrics.GovernanceDenied, nil, 1)
		}
		lapsed.Code = "governance_recheck_not_approved"
		lapsed.Reason += fmt.Sprintf("; the re-check answered %q", res.Verdict)
		if res.Pending {
			lapsed.Reason += " (review pending)"
		}
		return nil, lapsed
	}
	if _, err := s.Settle(ctx, op, req, res, payload, workflow.StatusCreating, workflow.GovernanceProceed, ""); err != nil {
		return nil, err
	}
	return s.Load(ctx, op.Tenant, op.ID)
}

// createIntent builds the create_media_buy intent from the governance-checked payload.
func (s *Service) createIntent(ctx context.Context, op *record.Operation, req *stage.Request, token string, now time.Time) (adcp.Intent, error) {
	payload, err := s.checkedPayload(ctx, op, req)
	if err != nil {
		return adcp.Intent{}, err
	}
	m, err := stage.DecodeObject(payload)
	if err != nil {
		return adcp.Intent{}, &workflow.TerminalError{Code: "bad_checked_payload", Reason: err.Error()}
	}
	if op.GovernanceContext != "" {
		m["governance_context"] = op.GovernanceContext
	}
	if s.publicBaseURL == "" {
		return adcp.Intent{}, &workflow.TerminalError{Code: "no_public_base_url", Reason: "the webhook URL cannot be built: no public base URL configured"}
	}
	url, err := s.routes.WebhookURL(ctx, s.publicBaseURL, op.ID, record.OperationOwner{Tenant: op.Tenant, SellerID: op.SellerID})
	if err != nil {
		// The URL without a route works: the receiver finds the owner in the ledger.
		s.Log.WarnContext(ctx, "seller webhook URL registered without its route", "operationId", op.ID, "err", err)
	}
	m["push_notification_config"] = adcp.PushNotificationConfig{URL: url, OperationID: op.ID, Token: token}
	// A seller that pushes delivery reports gets the buy's reporting_webhook: the same URL and
	// token. AdCP 3.x requires its legacy authentication; its Bearer credential is that token
	// (64 hex characters, already the operation's secret, stored only hashed), so the webhook
	// receiver checks it against the operation without a shared secret crossing the wire.
	// Capabilities not readable now fail the intent as BuildIntent would (it chooses the
	// version from the same capabilities): reading them a second time there would spend the
	// function's time twice at a seller that hangs, past its timeout.
	caps, err := s.AdCP.Capabilities(ctx, req.SellerID)
	if err != nil {
		return adcp.Intent{}, stage.IntentError(err)
	}
	if caps.PushesDelivery() {
		m["reporting_webhook"] = adcp.ReportingWebhook{URL: url, Token: token, ReportingFrequency: "daily",
			Authentication: adcp.WebhookAuthentication{Schemes: []string{"Bearer"}, Credentials: token}}
	}
	return stage.BuildIntent(ctx, s.AdCP, req.SellerID, adcp.ToolCreateMediaBuy, m, now)
}

// checkedPayload returns the payload the governance check approved (conditions applied).
func (s *Service) checkedPayload(ctx context.Context, op *record.Operation, req *stage.Request) ([]byte, error) {
	li, err := s.Ledger.GetIntent(ctx, op.Tenant, op.ID, stage.IntentCheckPrefix+op.GovernanceCheckID)
	switch {
	case err == nil:
		return li.Request, nil
	case errors.Is(err, record.ErrNotFound):
		return stage.BasePayload(op, req)
	default:
		return nil, fmt.Errorf("create: read checked payload of %s: %w", op.ID, err)
	}
}

// reconcile looks for a media buy the seller created for this operation (our echoed
// context.operation_id) before a resend. done means nothing is to be sent: the buy exists and
// is recorded, or another actor (the seller's webhook, the sweep) moved the operation past
// creating meanwhile. Each check is recorded only while the operation is still creating, so
// the timeline never shows one after the status it was asking about was gone.
func (s *Service) reconcile(ctx context.Context, op *record.Operation, req *stage.Request, cfg workflow.RunConfig, token string, now time.Time) (workflow.SellerOutput, bool, error) {
	got, err := s.AdCP.GetMediaBuys(ctx, req.SellerID, adcp.GetMediaBuysRequest{Account: req.Account()})
	if errors.As(err, new(*adcp.UnavailableError)) {
		return workflow.SellerOutput{}, false, err // not sent: the caller waits for the seller's breaker
	}
	if err != nil {
		s.CountAdcpError(err)
		// A seller that cannot list falls back on its idempotency replay (same key, same bytes).
		if s.checked(ctx, op, req, record.Event{Reason: record.Clip(err.Error(), 300),
			Detail: record.EventDetail(map[string]any{"found": false, "error_code": adcp.ErrorCode(err)})}) {
			return s.movedOn(ctx, op, cfg, now)
		}
		if adcp.Decide(err) == adcp.DecisionRetry {
			return workflow.SellerOutput{}, false, stage.CallError("get_media_buys", err)
		}
		return workflow.SellerOutput{}, false, nil
	}
	for _, mb := range got.MediaBuys {
		var c struct {
			OperationID string `json:"operation_id"`
		}
		if len(mb.Context) == 0 || json.Unmarshal(mb.Context, &c) != nil || c.OperationID != op.ID {
			continue
		}
		if s.checked(ctx, op, req, record.Event{Detail: record.EventDetail(map[string]any{"found": true, "media_buy_id": mb.MediaBuyID, "status": mb.Status})}) {
			return s.movedOn(ctx, op, cfg, now)
		}
		res := &adcp.MediaBuyResult{Shape: adcp.ShapeSuccess, Status: adcp.StatusCompleted, MediaBuyID: mb.MediaBuyID, MediaBuyStatus: mb.Status}
		out, err := s.recordCreate(ctx, op, req, res, cfg, token, now)
		return out, true, err
	}
	if s.checked(ctx, op, req, record.Event{Detail: record.EventDetail(map[string]any{"found": false})}) {
		return s.movedOn(ctx, op, cfg, now)
	}
	return workflow.SellerOutput{}, false, nil
}

// checked records a lapsed-claim check while the operation is still creating; true means
// another actor moved it on first and nothing was recorded.
func (s *Service) checked(ctx context.Context, op *record.Operation, req *stage.Request, ev record.Event) (moved bool) {
	ev.Type, ev.Actor = record.EventLapsedClaimCheck, stage.SellerActor(req.SellerID)
	return s.EventWhile(ctx, op, workflow.StatusCreating, ev)
}

// movedOn is the output for an operation another actor moved past creating during the check.
func (s *Service) movedOn(ctx context.Context, op *record.Operation, cfg workflow.RunConfig, now time.Time) (workflow.SellerOutput, bool, error) {
	cur, err := s.Load(ctx, op.Tenant, op.ID)
	if err != nil {
		return workflow.SellerOutput{}, true, err
	}
	return s.recorded(cur, cfg, now), true, nil
}

// recordCreate records the seller's answer forward-only and returns the first wait output.
func (s *Service) recordCreate(ctx context.Context, op *record.Operation, req *stage.Request, res *adcp.MediaBuyResult, cfg workflow.RunConfig, token string, now time.Time) (workflow.SellerOutput, error) {
	var to workflow.Status
	var reason string
	switch res.Shape {
	case adcp.ShapeSuccess:
		to = workflow.StatusCompleted
		if sellertask.EndedMediaBuy(res) {
			to, reason = workflow.StatusRejected, "the seller answered media buy "+res.MediaBuyID+" with status "+res.MediaBuyStatus
		}
	case adcp.ShapeSubmitted:
		to = workflow.StatusSubmitted
	case adcp.ShapeInterim:
		st, ok := workflow.FromTaskStatus(string(res.Status))
		if !ok {
			return workflow.SellerOutput{}, &workflow.TerminalError{Code: "unexpected_status", Reason: fmt.Sprintf("create_media_buy answered status %q", res.Status)}
		}
		to = st
	default:
		return workflow.SellerOutput{}, &workflow.TerminalError{Code: "unexpected_shape", Reason: fmt.Sprintf("create_media_buy answer shape %q", res.Shape)}
	}
	hash := record.HashToken(token)
	deadline := now.Add(time.Duration(cfg.DeadlineSeconds) * time.Second)
	ch := record.Patch{WebhookTokenHash: &hash, Deadline: &deadline, Actor: stage.SellerActor(req.SellerID), EventType: record.EventSellerCall,
		Detail: record.EventDetail(map[string]any{"tool": adcp.ToolCreateMediaBuy, "task_id": res.TaskID, "media_buy_id": res.MediaBuyID, "media_buy_status": res.MediaBuyStatus})}
	if res.TaskID != "" {
		ch.SellerTaskID = &res.TaskID
	}
	if res.MediaBuyID != "" {
		ch.MediaBuyID = &res.MediaBuyID
		ch.SellerPackages = sellertask.SellerPackages(res.Packages, op.Currency)
	}
	if to == workflow.StatusInputRequired && res.Message != "" {
		reason = res.Message
	}
	if reason != "" {
		r := record.Clip(reason, 1000)
		ch.Reason = &r
	}
	cur, _, err := s.Move(ctx, op, to, ch)
	if err != nil {
		return workflow.SellerOutput{}, err
	}
	s.Log.InfoContext(ctx, "media buy placed", "operationId", op.ID, "status", cur.Status, "shape", res.Shape)
	out := workflow.SellerOutput{Status: cur.Status, Terminal: cur.Status.Terminal(), Next: workflow.StartWait(cfg, now, s.SweepUp(ctx, cfg), s.rand), Reason: cur.Reason}
	return out, nil
}

// recorded is the output for an operation whose create was already recorded.
func (s *Service) recorded(op *record.Operation, cfg workflow.RunConfig, now time.Time) workflow.SellerOutput {
	return sellertask.WakeOutput(op, workflow.WaitState{}, cfg, now)
}

// Cancel is Compensate: update_media_buy {media_buy_id, canceled: true, cancellation_reason}
// as an intent fixed once; the cancellation is an audit event. A completed operation moves to
// canceled (the undo after governance findings: nothing follows it). Any other operation keeps
// its status: on those paths (deadline, an approval of the seller's input-required request
// rejected or expired) RecordFailure follows and records the status that says why (expired,
// rejected), with the cancel in the timeline.
func (s *Service) Cancel(ctx context.Context, in workflow.StageInput) (workflow.SellerOutput, error) {
	op, req, err := s.LoadRequest(ctx, in.Tenant, in.OperationID)
	if err != nil {
		return workflow.SellerOutput{}, err
	}
	reason := "canceled by buyflow"
	if in.Reason != "" {
		reason = record.Clip(in.Reason, 500)
	} else if op.Status.Placed() {
		reason = "governance findings required an undo"
	} else {
		reason = "the buyer's approver rejected the buy or the approval expired"
	}
	nothing := "no media buy at the seller to cancel"
	if op.MediaBuyID == "" && op.SellerTaskID != "" {
		// A buy still in the seller's hands (input-required): learn its id if it has one.
		ts, err := s.AdCP.GetTaskStatus(ctx, req.SellerID, adcp.GetTaskStatusRequest{TaskID: op.SellerTaskID, Account: req.Account(), IncludeResult: true})
		switch {
		case sellertask.TaskLost(err):
			// The seller forgot the task, not the order it may have placed for it: a person
			// must look, as after the grace of the poll and the sweep.
			s.CountAdcpError(err)
			nothing = record.Clip(fmt.Sprintf("seller %s no longer knows task %s, so buyflow has no media buy id to cancel; "+
				"an order for PO %s may still exist at the seller: ask the seller to find and cancel it", req.SellerID, op.SellerTaskID, op.PONumber), 1000)
		case err != nil:
			s.CountAdcpError(err) // best effort: the cancel goes on without the id
		case len(ts.Result) > 0:
			if mb, derr := adcp.DecodeMediaBuy(ts.Result); derr == nil && mb.MediaBuyID != "" {
				op.MediaBuyID = mb.MediaBuyID
			}
		}
	}
	if op.MediaBuyID == "" {
		s.Event(ctx, op, record.Event{Type: record.EventCancel, Actor: stage.ActorSystem, Reason: nothing})
		cur, err := s.endCanceled(ctx, op, reason)
		if err != nil {
			return workflow.SellerOutput{}, err
		}
		return workflow.SellerOutput{Status: cur.Status, Terminal: cur.Status.Terminal(), Reason: reason}, nil
	}
	intent, err := s.FixIntent(ctx, op, stage.IntentCancel, adcp.ToolUpdateMediaBuy, func() (adcp.Intent, error) {
		acct := req.Account()
		if acct == nil {
			acct = &adcp.AccountRef{}
		}
		return s.NewIntent(ctx, req.SellerID, adcp.ToolUpdateMediaBuy, adcp.UpdateMediaBuyRequest{Account: *acct, MediaBuyID: op.MediaBuyID,
			Canceled: true, CancellationReason: reason, GovernanceContext: op.GovernanceContext,
			Context: json.RawMessage(fmt.Sprintf(`{"operation_id":%q}`, op.ID))})
	})
	if err != nil {
		return workflow.SellerOutput{}, err
	}
	res, err := s.AdCP.UpdateMediaBuy(ctx, req.SellerID, intent.Intent)
	s.ReleaseUnsent(ctx, op, intent, err)
	if err != nil {
		s.CountAdcpError(err)
		s.Event(ctx, op, record.Event{Type: record.EventCancel, Actor: stage.SellerActor(req.SellerID), Reason: record.Clip(err.Error(), 500),
			Detail: record.EventDetail(map[string]any{"media_buy_id": op.MediaBuyID, "error_code": adcp.ErrorCode(err)})})
		return workflow.SellerOutput{}, stage.CallError("update_media_buy (cancel)", err)
	}
	s.Event(ctx, op, record.Event{Type: record.EventCancel, Actor: stage.SellerActor(req.SellerID), Reason: reason,
		Detail: record.EventDetail(map[string]any{"media_buy_id": op.MediaBuyID, "media_buy_status": res.MediaBuyStatus, "shape": res.Shape, "replayed": res.Replayed})})
	cur, err := s.endCanceled(ctx, op, reason)
	if err != nil {
		return workflow.SellerOutput{}, err
	}
	s.Log.InfoContext(ctx, "media buy canceled", "operationId", op.ID, "status", cur.Status)
	return workflow.SellerOutput{Status: cur.Status, Terminal: cur.Status.Terminal(), Reason: reason}, nil
}

func (s *Service) endCanceled(ctx context.Context, op *record.Operation, reason string) (*record.Operation, error) {
	if !op.Status.Placed() {
		return op, nil
	}
	cur, _, err := s.Move(ctx, op, workflow.StatusCanceled, record.Patch{Reason: &reason, Actor: stage.ActorSystem, EventType: record.EventCancel})
	return cur, err
}
