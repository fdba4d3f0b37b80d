package campaign

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/money"
	"github.com/buyflow/buyflow/internal/workflow"
)

// The campaign function's actions (statemachine/campaign.asl.json).
const (
	// ActionLeg reads one leg's status (a leg whose media buy continued as a new execution).
	ActionLeg = "leg"
	// ActionSettle derives the campaign's outcome and, under all_or_nothing, the legs to cancel.
	ActionSettle = "settle"
)

// TaskInput is the campaign function's payload.
type TaskInput struct {
	Action      string `json:"action"`
	Tenant      string `json:"tenant"`
	CampaignID  string `json:"campaign_id,omitempty"`
	OperationID string `json:"operation_id,omitempty"`
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
	Compensate []Compensation `json:"compensate"`
}

// Compensation names one placed leg to cancel and why.
type Compensation struct {
	OperationID string `json:"operation_id"`
	Reason      string `json:"reason"`
}

// Facts is what the campaign function reads (the campaign and its legs' operations) and the
// one thing it writes: the campaign's final status.
type Facts interface {
	GetCampaign(ctx context.Context, tenant, id string) (*ledger.Campaign, error)
	GetOperation(ctx context.Context, tenant, id string) (*ledger.Operation, error)
	SettleCampaign(ctx context.Context, tenant, id, outcome string) error
}

var _ Facts = (*ledger.Store)(nil)

// Settler serves the campaign state machine's Lambda tasks. Every leg's facts are written by its
// own media buy's stages and the cancels by the create function; the Settler writes only the
// campaign's final status.
type Settler struct {
	facts Facts
}

// NewSettler returns the campaign function's handler.
func NewSettler(f Facts) *Settler { return &Settler{facts: f} }

// Handle serves one task payload. Errors come back bare (workflow.TaskError) so the state
// machine's Retry matches TransientError.
func (s *Settler) Handle(ctx context.Context, raw json.RawMessage) (any, error) {
	out, err := s.handle(ctx, raw)
	if err != nil {
		return nil, workflow.TaskError(err)
	}
	return out, nil
}

func (s *Settler) handle(ctx context.Context, raw json.RawMessage) (any, error) {
	var in TaskInput
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return nil, &workflow.InvalidInputError{Field: "payload", Reason: err.Error()}
	}
	switch in.Action {
	case ActionLeg:
		op, err := s.operation(ctx, in.Tenant, in.OperationID)
		if err != nil {
			return nil, err
		}
		return LegStatus{Status: op.Status, Terminal: op.Status.Terminal()}, nil
	case ActionSettle:
		return s.Settle(ctx, in.Tenant, in.CampaignID)
	}
	return nil, &workflow.InvalidInputError{Field: "action", Reason: fmt.Sprintf("%q is not %s or %s", in.Action, ActionLeg, ActionSettle)}
}

func (s *Settler) operation(ctx context.Context, tenant, id string) (*ledger.Operation, error) {
	op, err := s.facts.GetOperation(ctx, tenant, id)
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, &workflow.NotFoundError{OperationID: id}
	}
	if err != nil {
		return nil, &workflow.TransientError{Reason: "read operation " + id + ": " + err.Error()}
	}
	return op, nil
}

// Settle derives the campaign's outcome from its legs' operations. Under all_or_nothing, a
// campaign in which some leg ended without completing names every completed leg to cancel,
// with the reason the cancel records at the seller and in the leg's timeline (the create
// function bounds its length).
func (s *Settler) Settle(ctx context.Context, tenant, id string) (Settled, error) {
	rec, err := s.facts.GetCampaign(ctx, tenant, id)
	if errors.Is(err, ledger.ErrNotFound) {
		return Settled{}, &workflow.TerminalError{Code: "campaign_not_found", Reason: "no campaign " + id + " for tenant " + tenant}
	}
	if err != nil {
		return Settled{}, &workflow.TransientError{Reason: "read campaign " + id + ": " + err.Error()}
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
	out := Settled{Status: o.Status, Committed: o.Committed.Decimal(), Currency: rec.Currency, Compensate: []Compensation{}}
	if Policy(rec.Policy) == AllOrNothing && o.Status == PartiallyCompleted && rec.Outcome == "" {
		for i, st := range states {
			if st.Status == workflow.StatusCompleted {
				out.Compensate = append(out.Compensate, Compensation{OperationID: rec.Legs[i].OperationID, Reason: why})
			}
		}
		return out, nil // the outcome follows the cancels
	}
	if o.Status == Running {
		return out, nil // a leg that could not start: nothing is final to record
	}
	// Nothing is left to do: this is the campaign's outcome (a cancel that failed leaves its leg
	// committed, and the outcome says so).
	if err := s.facts.SettleCampaign(ctx, tenant, id, string(o.Status)); err != nil && !errors.Is(err, ledger.ErrConflict) {
		return Settled{}, &workflow.TransientError{Reason: "record the outcome of campaign " + id + ": " + err.Error()}
	}
	return out, nil
}
