package campaign

import (
	"context"
	"fmt"

	"github.com/buyflow/buyflow/internal/approval"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/workflow"
)

// ActionRelease decides, after every leg's governance check (and after the campaign's approval,
// when one was asked), where each leg's media buy starts.
const ActionRelease = "release"

// LegCheck is one leg's governance check as the CheckLegs Map ended it: Failure is set when the
// check failed after its retries (the Map's Catch).
type LegCheck struct {
	OperationID string              `json:"operation_id"`
	Failure     *workflow.StepError `json:"failure,omitempty"`
}

// Released answers ActionRelease: either the campaign needs its one approval first, or the legs
// to start, each with where its media buy begins.
type Released struct {
	NeedsApproval bool `json:"needs_approval"`
	// Why is the policy's sentence when the campaign's total is at or over the threshold (a
	// leg waiting for a person says why in its own reason); the execution history shows it.
	Why string `json:"why,omitempty"`
	// Covers are the legs the approval decides when NeedsApproval: the legs the gate would buy,
	// whose total it compared (RequestCampaignApproval hands them to notify, which records that
	// total on the approval).
	Covers []string   `json:"covers,omitempty"`
	Legs   []legStart `json:"legs"`
}

// legStart is a leg's child execution under the name submit fixed, with where it starts.
type legStart = legExecution[workflow.LegExecutionInput]

// releaseInput is what ActionRelease reads besides the campaign: the legs as submit started
// them, their checks, and the campaign approval's answer when there was one (Approval when
// approved, Failure when rejected, expired or not delivered).
type releaseInput struct {
	Legs     []LegInput               `json:"legs"`
	Checks   []LegCheck               `json:"checks"`
	Approval *workflow.ApprovalOutput `json:"approval,omitempty"`
	Failure  *workflow.StepError      `json:"failure,omitempty"`
}

// Release decides where every leg starts once all of them were checked:
//
//   - A leg the check denied, or whose check failed, records that failure and is not bought.
//   - Under all_or_nothing, one such leg calls the others off (CampaignCalledOff, canceled):
//     nothing is bought at any seller, and nobody is asked to approve.
//   - Otherwise, when any leg waits for a person (awaiting_approval: the policy's threshold,
//     the buyer's request, conditions a person must judge), or when the total of the legs it
//     would buy is at or over the policy's threshold (legs each under it add up to what a
//     single buy of that amount would need a person for), the campaign asks its one approval
//     first (NeedsApproval, no leg started): a leg governance let through waits for it too.
//   - After an approval, every leg that was checked is created (or re-checked when its
//     governance approval lapsed before the decision); after a rejection or an expiry every one
//     of them records that failure, so nothing is created at any seller.
func (s *Settler) Release(ctx context.Context, tenant, id string, in releaseInput) (Released, error) {
	rec, err := s.campaign(ctx, tenant, id)
	if err != nil {
		return Released{}, err
	}
	if len(in.Legs) != len(rec.Legs) || len(in.Checks) != len(rec.Legs) {
		return Released{}, &workflow.InvalidInputError{Field: "legs", Reason: fmt.Sprintf("campaign %s has %d legs; %d inputs and %d checks were sent", id, len(rec.Legs), len(in.Legs), len(in.Checks))}
	}
	ops := make([]*record.Operation, len(rec.Legs))
	var cleared []*record.Operation
	refusals := make([]*workflow.StepError, len(rec.Legs))
	var refused *workflow.StepError
	waiting := false
	for i, leg := range rec.Legs {
		if in.Legs[i].OperationID != leg.OperationID || in.Checks[i].OperationID != leg.OperationID {
			return Released{}, &workflow.InvalidInputError{Field: fmt.Sprintf("legs[%d]", i), Reason: "is not the campaign's leg " + leg.OperationID}
		}
		op, err := s.operation(ctx, tenant, leg.OperationID)
		if err != nil {
			return Released{}, err
		}
		ops[i] = op
		refusals[i] = refusal(op, in.Checks[i].Failure)
		if refusals[i] != nil && refused == nil {
			refused = &workflow.StepError{Error: workflow.FailureCampaignCalledOff,
				Cause: fmt.Sprintf("the campaign is all_or_nothing and its leg at %s (%s) was not cleared: %s; nothing is bought at any seller",
					leg.SellerID, leg.OperationID, refusals[i].Cause)}
		}
		if refusals[i] == nil {
			cleared = append(cleared, op)
			waiting = waiting || op.Status == workflow.StatusAwaitingApproval
		}
	}
	callOff := refused != nil && Policy(rec.Policy) == AllOrNothing
	// With no leg to buy, nobody is asked: each leg records its own failure.
	if in.Approval == nil && in.Failure == nil && !callOff && len(cleared) > 0 {
		over, why := s.overThreshold(rec, cleared)
		if waiting || over {
			covers := approval.Campaign{Record: rec, Legs: cleared}.LegIDs()
			return Released{NeedsApproval: true, Why: why, Covers: covers, Legs: []legStart{}}, nil
		}
	}
	out := Released{Legs: make([]legStart, len(rec.Legs))}
	now := s.now()
	for i, leg := range in.Legs {
		start := workflow.LegExecutionInput{ExecutionInput: leg.Input, CampaignLeg: workflow.LegStart{Start: workflow.LegCreate}}
		switch {
		case refusals[i] != nil:
			start.CampaignLeg.Start, start.Failure = workflow.LegFail, refusals[i]
		case callOff:
			start.CampaignLeg.Start, start.Failure = workflow.LegFail, refused
		case in.Failure != nil:
			start.CampaignLeg.Start, start.Failure = workflow.LegFail, in.Failure
		case in.Approval != nil && !ops[i].GovernanceExpiresAt.IsZero() && !now.Before(ops[i].GovernanceExpiresAt):
			start.CampaignLeg.Start = workflow.LegRecheck
		}
		out.Legs[i] = legStart{OperationID: leg.OperationID, ExecutionName: leg.ExecutionName, Input: start}
	}
	return out, nil
}

// overThreshold applies the approval policy to the total of the cleared legs (what the
// campaign would commit: each leg's amount as its operation stores the buy's one amount). A
// total that cannot be summed exactly needs a person, and the approval's request then refuses
// to show it: nothing is bought.
func (s *Settler) overThreshold(rec *record.Campaign, cleared []*record.Operation) (bool, string) {
	_, why, err := approval.Campaign{Record: rec, Legs: cleared}.Gate(s.threshold.NeedsCampaign)
	if err != nil {
		return true, err.Error()
	}
	return why != "", why
}

// refusal is why a leg's check did not clear it, or nil: the check failed after its retries
// (the Map's Catch), governance denied it, or the leg ended or never got past its check.
func refusal(op *record.Operation, checkFailure *workflow.StepError) *workflow.StepError {
	switch {
	case checkFailure != nil:
		return checkFailure
	case op.Status == workflow.StatusRejected:
		return &workflow.StepError{Error: workflow.FailureGovernanceDenied, Cause: op.Reason}
	case op.Status == workflow.StatusCreating, op.Status == workflow.StatusAwaitingApproval:
		return nil
	}
	return &workflow.StepError{Error: "LegNotCleared", Cause: fmt.Sprintf("leg %s is %s after its governance check: %s", op.ID, op.Status, op.Reason)}
}
