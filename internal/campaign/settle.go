package campaign

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/dispatch"
	"github.com/buyflow/buyflow/internal/money"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/stage"
	"github.com/buyflow/buyflow/internal/workflow"
)

// The campaign function's actions (statemachine/campaign.asl.json).
const (
	// ActionLeg reads one leg's status (a leg whose media buy continued as a new execution).
	ActionLeg = "leg"
	// ActionSettle derives the campaign's outcome and, under all_or_nothing, the legs to cancel.
	ActionSettle = "settle"
	// ActionSyncPlans pushes the campaign's plan to its governance agent (sync_plans).
	ActionSyncPlans = "sync_plans"
	// ActionClose fails the legs that never started, after the plan could not be pushed.
	ActionClose = "close"
	// ActionFail records that a step of the Campaign execution itself failed after its retries.
	ActionFail = "fail"
)

// TaskInput is the campaign function's payload.
type TaskInput struct {
	Action      string `json:"action"`
	Tenant      string `json:"tenant"`
	CampaignID  string `json:"campaign_id,omitempty"`
	OperationID string `json:"operation_id,omitempty"`
	// Failure is why the legs are closed (ActionClose) or the campaign failed (ActionFail): the
	// Catch of the step that failed; for ActionRelease, why the campaign's approval did not
	// approve.
	Failure *workflow.StepError `json:"failure,omitempty"`
	// LegsPlaced is ActionFail's: whether the step failed after the legs were handed to their
	// own executions (PlaceLegs or later), which then record each leg's end themselves.
	LegsPlaced bool `json:"legs_placed,omitempty"`
	// Legs, Checks and Approval are ActionRelease's (see ReleaseInput).
	Legs     []LegInput               `json:"legs,omitempty"`
	Checks   []LegCheck               `json:"checks,omitempty"`
	Approval *workflow.ApprovalOutput `json:"approval,omitempty"`
}

// PlanSynced answers ActionSyncPlans.
type PlanSynced struct {
	PlanID   string `json:"plan_id"`
	Status   string `json:"status"`
	Replayed bool   `json:"replayed"`
}

// Closed answers ActionClose: the legs failed before they started.
type Closed struct {
	Closed []string `json:"closed"`
}

// LegStatus answers ActionLeg.
type LegStatus struct {
	Status   workflow.Status `json:"status"`
	Terminal bool            `json:"terminal"`
}

// Settled answers ActionSettle: the campaign's status, what it committed, and the legs to
// cancel (all_or_nothing with a leg that did not complete).
type Settled struct {
	Status     Status         `json:"status"`
	Committed  string         `json:"committed"`
	Currency   string         `json:"currency"`
	Compensate []compensation `json:"compensate"`
}

// compensation names one placed leg to cancel and why.
type compensation struct {
	OperationID string `json:"operation_id"`
	Reason      string `json:"reason"`
}

// Facts is what the campaign function reads (the campaign and its legs' operations) and what
// it writes: the claims of the campaign's plan push and the campaign's final status.
type Facts interface {
	// Claims counts the pushes of the campaign's plan (stage.ClaimStored).
	stage.Claims
	GetCampaign(ctx context.Context, tenant, id string) (*record.Campaign, error)
	GetOperation(ctx context.Context, tenant, id string) (*record.Operation, error)
	SettleCampaign(ctx context.Context, tenant, id, outcome, committed string) error
	FailCampaign(ctx context.Context, tenant, id, committed, reason string) error
	GetApproval(ctx context.Context, id string) (*record.Approval, error)
	Transition(ctx context.Context, tenant, id string, to workflow.Status, expectedVersion int64, ch record.Patch) (*record.Operation, error)
	AcquireLock(ctx context.Context, name, owner string, ttl time.Duration) (record.Lease, error)
	ReleaseLock(ctx context.Context, l record.Lease) error
}

// planSyncer sends a sync_plans intent to a governance agent in the AdCP version it speaks
// (internal/adcp's client).
type planSyncer interface {
	Speaks(ctx context.Context, agentID string) (string, error)
	SyncPlans(ctx context.Context, agentID string, in adcp.Intent) (*adcp.SyncPlansResult, error)
}

// threshold is the approval policy's gate on a campaign's total (approvalpolicy.Policy).
type threshold interface {
	NeedsCampaign(total money.Amount) (bool, string)
}

// Settler serves the campaign state machine's Lambda tasks. Every leg's facts are written by its
// own media buy's stages and the cancels by the create function; the Settler writes only the
// campaign's final status.
type Settler struct {
	facts     Facts
	agents    planSyncer
	threshold threshold
	now       func() time.Time
	log       *slog.Logger
}

// NewSettler returns the campaign function's handler; agents pushes plans, threshold is the
// approval policy the release holds the campaign's total to.
func NewSettler(f Facts, agents planSyncer, threshold threshold) *Settler {
	return &Settler{facts: f, agents: agents, threshold: threshold, now: time.Now, log: slog.Default()}
}

// Handle serves one task payload: actions leg, settle, sync_plans, close, release and fail.
func (s *Settler) Handle(ctx context.Context, raw json.RawMessage) (any, error) {
	return dispatch.Table{
		ActionLeg: dispatch.StrictOf(func(ctx context.Context, in TaskInput) (LegStatus, error) {
			op, err := s.operation(ctx, in.Tenant, in.OperationID)
			if err != nil {
				return LegStatus{}, err
			}
			return LegStatus{Status: op.Status, Terminal: op.Status.Terminal()}, nil
		}),
		ActionSettle: dispatch.StrictOf(func(ctx context.Context, in TaskInput) (Settled, error) {
			return s.Settle(ctx, in.Tenant, in.CampaignID)
		}),
		ActionSyncPlans: dispatch.StrictOf(func(ctx context.Context, in TaskInput) (PlanSynced, error) {
			return s.SyncPlans(ctx, in.Tenant, in.CampaignID)
		}),
		ActionClose: dispatch.StrictOf(func(ctx context.Context, in TaskInput) (Closed, error) {
			return s.Close(ctx, in.Tenant, in.CampaignID, in.Failure)
		}),
		ActionRelease: dispatch.StrictOf(func(ctx context.Context, in TaskInput) (Released, error) {
			return s.Release(ctx, in.Tenant, in.CampaignID, releaseInput{Legs: in.Legs, Checks: in.Checks, Approval: in.Approval, Failure: in.Failure})
		}),
		ActionFail: dispatch.StrictOf(func(ctx context.Context, in TaskInput) (FailureRecorded, error) {
			return s.Fail(ctx, in.Tenant, in.CampaignID, in.Failure, in.LegsPlaced)
		}),
	}.Handle(ctx, raw)
}

func (s *Settler) operation(ctx context.Context, tenant, id string) (*record.Operation, error) {
	op, err := s.facts.GetOperation(ctx, tenant, id)
	if errors.Is(err, record.ErrNotFound) {
		return nil, &workflow.NotFoundError{OperationID: id}
	}
	if err != nil {
		return nil, &workflow.TransientError{Reason: "read operation " + id + ": " + err.Error()}
	}
	return op, nil
}

func (s *Settler) campaign(ctx context.Context, tenant, id string) (*record.Campaign, error) {
	rec, err := s.facts.GetCampaign(ctx, tenant, id)
	if errors.Is(err, record.ErrNotFound) {
		return nil, &workflow.TerminalError{Code: "campaign_not_found", Reason: "no campaign " + id + " for tenant " + tenant}
	}
	if err != nil {
		return nil, &workflow.TransientError{Reason: "read campaign " + id + ": " + err.Error()}
	}
	return rec, nil
}

// SyncPlans sends the campaign's frozen sync_plans request (the same key and bytes on every
// attempt) to its governance agent. Each attempt claims the plan first: after one that may
// have sent it, the push is a resend, which an agent without a replay window refuses; a push
// that provably sent nothing is released, so the next is a first send again. A plan the agent
// does not accept is a TerminalError: the legs must not be checked against a plan the agent
// does not hold.
func (s *Settler) SyncPlans(ctx context.Context, tenant, id string) (PlanSynced, error) {
	rec, err := s.campaign(ctx, tenant, id)
	if err != nil {
		return PlanSynced{}, err
	}
	if len(rec.PlanIntent) == 0 {
		return PlanSynced{}, &workflow.TerminalError{Code: "no_plan", Reason: "campaign " + id + " carries no plan to push"}
	}
	// The plan was fixed at submit, before any agent was asked, in 3.1: it is sent in the version
	// the governance agent speaks (a 3.2-only agent refuses a 3.1 request), asked before the
	// claim so that a failure to ask sends nothing. The agent's version comes from its record, so
	// a resend repeats the first send's bytes.
	version, err := s.agents.Speaks(ctx, rec.GovernanceAgentID)
	if err != nil {
		return PlanSynced{}, planError("sync_plans at "+rec.GovernanceAgentID+" (to choose the AdCP version)", err)
	}
	ref := stage.IntentRef{Tenant: tenant, OperationID: id, Name: record.SyncPlansIntent, Tool: adcp.ToolSyncPlans, Decode: storedPlan}
	read := rec
	intent, err := stage.ClaimStored(ctx, s.facts, ref, func(ctx context.Context) (*record.Intent, error) {
		if read == nil { // a later round, after another attempt claimed it: read it again
			if read, err = s.campaign(ctx, tenant, id); err != nil {
				return nil, err
			}
		}
		plan, err := read.PlanIntentRecord()
		read = nil
		if err != nil {
			return nil, &workflow.TerminalError{Code: "no_plan", Reason: "campaign " + id + " carries no plan to push"}
		}
		return plan, nil
	})
	if err != nil {
		return PlanSynced{}, err // a ledger failure is a TransientError (workflow.TaskError)
	}
	send := intent.Intent
	if send, err = send.At(version); err != nil {
		// The claim stands: an intent that cannot be re-enveloped is never sent.
		return PlanSynced{}, &workflow.TerminalError{Code: "bad_intent", Reason: err.Error()}
	}
	res, err := s.agents.SyncPlans(ctx, rec.GovernanceAgentID, send)
	stage.ReleaseUnsent(ctx, s.facts, s.log, id, intent, err)
	if err != nil {
		return PlanSynced{}, planError("sync_plans at "+rec.GovernanceAgentID, err)
	}
	for _, p := range res.Plans {
		if p.PlanID != rec.PlanID {
			continue
		}
		if p.Status != "active" {
			return PlanSynced{}, &workflow.TerminalError{Code: "plan_not_synced",
				Reason: fmt.Sprintf("governance agent %s holds plan %s as %q, not active", rec.GovernanceAgentID, rec.PlanID, p.Status)}
		}
		return PlanSynced{PlanID: p.PlanID, Status: p.Status, Replayed: res.Replayed}, nil
	}
	return PlanSynced{}, &workflow.TerminalError{Code: "plan_not_synced",
		Reason: fmt.Sprintf("governance agent %s did not answer for plan %s", rec.GovernanceAgentID, rec.PlanID)}
}

// planError is the workflow error of a push that failed: retried (transient) or the end.
func planError(what string, err error) error {
	if adcp.Decide(err) == adcp.DecisionRetry {
		return &workflow.TransientError{Reason: what + ": " + err.Error(), RetryAfterSeconds: int(adcp.RetryAfter(err) / time.Second)}
	}
	return &workflow.TerminalError{Code: "plan_not_synced", Reason: what + ": " + err.Error()}
}

// storedPlan reads the campaign's plan record as the intent it holds (PlanIntent is the JSON of
// an adcp.Intent); a first send after released claims runs its replay window from then.
func storedPlan(stored *record.Intent) (adcp.Intent, error) {
	var in adcp.Intent
	if err := json.Unmarshal(stored.Request, &in); err != nil {
		return adcp.Intent{}, err
	}
	if in.Task != adcp.ToolSyncPlans || in.Key == "" || len(in.Body) == 0 {
		return adcp.Intent{}, fmt.Errorf("the stored plan holds task %q with key %t and %d bytes", in.Task, in.Key != "", len(in.Body))
	}
	if !stored.CreatedAt.IsZero() {
		in.Created = stored.CreatedAt
	}
	return in, nil
}

// Close fails every leg that has not started (status requested), with the failure's cause as
// the reason, and frees its PO number: nothing was sent to any seller. A leg that already
// moved on is left to its own execution.
func (s *Settler) Close(ctx context.Context, tenant, id string, failure *workflow.StepError) (Closed, error) {
	rec, err := s.campaign(ctx, tenant, id)
	if err != nil {
		return Closed{}, err
	}
	reason := "the campaign's plan could not be pushed to its governance agent, so no leg was checked or sent to a seller"
	if failure != nil {
		if why := failure.Sentence(); why != "" {
			reason += ": " + why // a sentence, never a Lambda envelope or an engine's error name
		}
	}
	out := Closed{Closed: []string{}}
	for _, leg := range rec.Legs {
		op, err := s.operation(ctx, tenant, leg.OperationID)
		if err != nil {
			return Closed{}, err
		}
		if op.Status == workflow.StatusRequested {
			_, err := s.facts.Transition(ctx, tenant, op.ID, workflow.StatusFailed, op.Version, record.Patch{Reason: &reason, Actor: "system"})
			if err != nil && !errors.Is(err, record.ErrConflict) {
				return Closed{}, &workflow.TransientError{Reason: "fail leg " + op.ID + ": " + err.Error()}
			}
			if err == nil {
				out.Closed = append(out.Closed, op.ID)
			}
		}
		if err := s.releaseLock(ctx, tenant, leg); err != nil {
			return Closed{}, err
		}
	}
	return out, nil
}

// releaseLock frees the leg's business-key lock when the leg still holds it: the lock is
// re-taken by its owner (the operation id; this succeeds only while it is the leg's or free)
// and released at once, as a buy's own end does.
func (s *Settler) releaseLock(ctx context.Context, tenant string, leg record.CampaignLeg) error {
	lease, err := s.facts.AcquireLock(ctx, record.BusinessKeyLock(tenant, leg.SellerID, leg.PONumber), leg.OperationID, time.Minute)
	var held *record.LockHeldError
	switch {
	case errors.As(err, &held):
		return nil
	case err != nil:
		return &workflow.TransientError{Reason: "take the lock of leg " + leg.OperationID + ": " + err.Error()}
	}
	if err := s.facts.ReleaseLock(ctx, lease); err != nil && !errors.Is(err, record.ErrLeaseLost) {
		return &workflow.TransientError{Reason: "release the lock of leg " + leg.OperationID + ": " + err.Error()}
	}
	return nil
}

// approval is the campaign's approval, nil when it asked none.
func (s *Settler) approval(ctx context.Context, rec *record.Campaign) (*record.Approval, error) {
	if rec.ApprovalID == "" {
		return nil, nil
	}
	a, err := s.facts.GetApproval(ctx, rec.ApprovalID)
	if err != nil {
		return nil, &workflow.TransientError{Reason: "read the approval of campaign " + rec.ID + ": " + err.Error()}
	}
	if a.Tenant != rec.Tenant || a.CampaignID != rec.ID {
		return nil, &workflow.TerminalError{Code: "approval_mismatch", Reason: "approval " + a.ID + " is not campaign " + rec.ID + "'s"}
	}
	return a, nil
}

// Settle derives the campaign's outcome from its legs' operations. Under all_or_nothing, a
// campaign in which some leg ended without completing names every completed leg to cancel,
// with the reason the cancel records at the seller and in the leg's timeline (the create
// function bounds its length).
func (s *Settler) Settle(ctx context.Context, tenant, id string) (Settled, error) {
	rec, err := s.campaign(ctx, tenant, id)
	if err != nil {
		return Settled{}, err
	}
	states := make([]LegState, len(rec.Legs))
	var why string
	for i, leg := range rec.Legs {
		op, err := s.operation(ctx, tenant, leg.OperationID)
		if err != nil {
			return Settled{}, err
		}
		amount, err := money.ParseDecimal(leg.Amount, rec.Currency)
		if err != nil {
			return Settled{}, &workflow.TerminalError{Code: "invalid_amount", Reason: fmt.Sprintf("campaign %s leg %s: %v", id, leg.OperationID, err)}
		}
		states[i] = LegState{SellerID: leg.SellerID, Status: op.Status, Amount: amount}
		if why == "" && op.Status != workflow.StatusCompleted {
			why = fmt.Sprintf("the campaign is all_or_nothing and its leg at %s (%s) ended %s", leg.SellerID, leg.OperationID, op.Status)
			if op.Reason != "" {
				why += ": " + op.Reason
			}
		}
	}
	o := Decide(rec.Currency, states)
	if o.Status == Failed {
		decided, err := s.approval(ctx, rec)
		if err != nil {
			return Settled{}, err
		}
		o.Status = approvalOutcome(decided, o.Status)
	}
	out := Settled{Status: o.Status, Committed: o.Committed.Decimal(), Currency: rec.Currency, Compensate: []compensation{}}
	if Policy(rec.Policy) == AllOrNothing && o.Status == PartiallyCompleted && rec.Outcome == "" {
		for i, st := range states {
			if st.Status == workflow.StatusCompleted {
				out.Compensate = append(out.Compensate, compensation{OperationID: rec.Legs[i].OperationID, Reason: why})
			}
		}
		return out, nil // the outcome follows the cancels
	}
	if o.Status == Running {
		return out, nil // a leg that could not start: nothing is final to record
	}
	// Nothing is left to do: this is the campaign's outcome (a cancel that failed leaves its leg
	// committed, and the outcome says so).
	if err := s.facts.SettleCampaign(ctx, tenant, id, string(o.Status), o.Committed.Decimal()); err != nil && !errors.Is(err, record.ErrConflict) {
		return Settled{}, &workflow.TransientError{Reason: "record the outcome of campaign " + id + ": " + err.Error()}
	}
	return out, nil
}
