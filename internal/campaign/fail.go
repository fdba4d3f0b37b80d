package campaign

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/buyflow/buyflow/internal/money"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/workflow"
)

// FailureRecorded answers ActionFail: the campaign's status as recorded, what its legs
// committed, the reason a person reads, and the legs the campaign leaves (each to be failed
// with its own Failure by the governance function's RecordFailure, which reports it to
// governance where the leg was checked).
type FailureRecorded struct {
	Status    Status       `json:"status"`
	Committed string       `json:"committed"`
	Currency  string       `json:"currency"`
	Reason    string       `json:"reason"`
	LegsLeft  []legFailure `json:"legs_left"`
}

// legFailure is one leg the failed campaign leaves and why it is not bought.
type legFailure struct {
	OperationID string             `json:"operation_id"`
	Failure     workflow.StepError `json:"failure"`
}

// Fail records that a step of the Campaign execution failed after its retries: the campaign's
// outcome becomes failed with a sentence that says where it stopped, why, and what its legs
// committed, so neither a reader nor the requester sees a campaign that runs forever.
//
// Before placement (legsPlaced false) no leg has an execution of its own: every leg is left,
// and the answer names each with the failure its RecordFailure records (a leg already ended
// keeps its status, and governance still hears the outcome of a leg it checked). After
// placement every leg belongs to its own media buy execution, which records how it ends:
// none is left. A campaign whose outcome was recorded before keeps it.
func (s *Settler) Fail(ctx context.Context, tenant, id string, failure *workflow.StepError, legsPlaced bool) (FailureRecorded, error) {
	rec, err := s.campaign(ctx, tenant, id)
	if err != nil {
		return FailureRecorded{}, err
	}
	states := make([]LegState, len(rec.Legs))
	for i, leg := range rec.Legs {
		op, err := s.operation(ctx, tenant, leg.OperationID)
		if err != nil {
			return FailureRecorded{}, err
		}
		amount, err := money.ParseDecimal(leg.Amount, rec.Currency)
		if err != nil {
			return FailureRecorded{}, &workflow.TerminalError{Code: "invalid_amount", Reason: fmt.Sprintf("campaign %s leg %s: %v", id, leg.OperationID, err)}
		}
		states[i] = LegState{SellerID: leg.SellerID, Status: op.Status, Amount: amount}
	}
	o := Decide(rec.Currency, states)
	why := failureCause(failure)
	out := FailureRecorded{Status: Failed, Committed: o.Committed.Decimal(), Currency: rec.Currency, LegsLeft: []legFailure{}}
	if legsPlaced {
		placed := 0
		for _, st := range states {
			if st.Status == workflow.StatusCompleted {
				placed++
			}
		}
		legs := "legs"
		if len(rec.Legs) == 1 {
			legs = "leg"
		}
		out.Reason = fmt.Sprintf("The campaign stopped after its legs were handed to their own media buys: %s. %d of its %d %s placed, committing %s %s; each leg's status says how it ended.",
			why, placed, len(rec.Legs), legs, o.Committed.Decimal(), rec.Currency)
	} else {
		out.Reason = fmt.Sprintf("The campaign stopped before any leg was placed: %s. Nothing was sent to any seller, and every leg records this failure.", why)
		for _, leg := range rec.Legs {
			out.LegsLeft = append(out.LegsLeft, legFailure{OperationID: leg.OperationID, Failure: workflow.StepError{
				Error: workflow.FailureCampaignFailed,
				Cause: "campaign " + id + " stopped before this leg was placed, so it is not bought: " + why,
			}})
		}
	}
	err = s.facts.FailCampaign(ctx, tenant, id, out.Committed, out.Reason)
	switch {
	case errors.Is(err, record.ErrConflict):
		// Settled before (a retry after the write, or a settle that got there first): the
		// recorded outcome stands.
		if rec, err = s.campaign(ctx, tenant, id); err != nil {
			return FailureRecorded{}, err
		}
		out.Status, out.Committed, out.Reason = Status(rec.Outcome), rec.Committed, rec.Reason
	case err != nil:
		return FailureRecorded{}, &workflow.TransientError{Reason: "record the failure of campaign " + id + ": " + err.Error()}
	}
	s.log.WarnContext(ctx, "campaign failed in its own step", "campaignId", id, "legsPlaced", legsPlaced, "legsLeft", len(out.LegsLeft), "reason", out.Reason)
	return out, nil
}

// failureCause is the Catch's failure as a clause a person reads: the function's own message
// (workflow.StepError.Readable), not the engine's envelope; the error's name only when the
// engine gave no cause.
func failureCause(f *workflow.StepError) string {
	if f == nil {
		return "a step failed after its retries, with no cause given"
	}
	r := f.Readable()
	cause := strings.TrimSpace(r.Cause)
	// The Lambda service's own refusals (Lambda.ServiceException and the like) carry the
	// service's error document, {"Type": ..., "message": ...}: its message is the sentence.
	var doc struct {
		Message      string `json:"message"`
		MessageUpper string `json:"Message"`
	}
	if strings.HasPrefix(cause, "{") && json.Unmarshal([]byte(cause), &doc) == nil {
		if m := strings.TrimSpace(doc.Message + doc.MessageUpper); m != "" {
			cause = m
		}
	}
	cause = strings.TrimSpace(strings.TrimSuffix(cause, "."))
	if cause == "" {
		return "a step failed after its retries, with no cause given (" + r.Error + ")"
	}
	return "a step failed after its retries (" + record.Clip(cause, 600) + ")"
}
