package modify

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/buy"
	"github.com/buyflow/buyflow/internal/money"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/workflow"
)

// requestLedger is the part of the ledger the change requests need.
type requestLedger interface {
	GetOperation(ctx context.Context, tenant, id string) (*record.Operation, error)
	CreateOperation(ctx context.Context, op record.Operation) (*record.Operation, error)
	GetBuyState(ctx context.Context, tenant, opID string) (*record.BuyState, error)
	BeginChange(ctx context.Context, initial record.BuyState, changeID, kind string, expires time.Time, ev record.Event) (*record.BuyState, error)
	EndChange(ctx context.Context, tenant, opID, changeID, outcome, reason string, ev record.Event) (*record.BuyState, error)
	ListDeliverySnapshots(ctx context.Context, tenant, opID string, limit int) ([]record.DeliverySnapshot, error)
}

// executions starts workflow executions under deterministic names.
type executions interface {
	Start(ctx context.Context, name string, input any) (string, error)
}

// RequestConfig holds the change requests' settings.
type RequestConfig struct {
	// Run is the timing of the buy's executions; a change runs with it and DeadlineSeconds.
	Run workflow.RunConfig
	// DeadlineSeconds bounds the wait for the seller's answer to one change (default 12 h).
	DeadlineSeconds int
	// StateMachineARN is the MediaBuy state machine, which runs changes too.
	StateMachineARN string
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// defaultDeadlineSeconds is how long a change waits for the seller: update_media_buy's own
// 12-hour timeout.
const defaultDeadlineSeconds = 12 * 3600

// Requests accepts changes to placed buys over the API: PATCH /v1/media-buys/{id} and
// POST /v1/media-buys/{id}/cancel.
type Requests struct {
	ledger requestLedger
	execs  executions
	cfg    RequestConfig
}

// NewRequests returns the change requests' use case.
func NewRequests(l requestLedger, e executions, cfg RequestConfig) *Requests {
	if cfg.DeadlineSeconds <= 0 {
		cfg.DeadlineSeconds = defaultDeadlineSeconds
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Requests{ledger: l, execs: e, cfg: cfg}
}

// changeID derives a change's id from the tenant, the buy and the Idempotency-Key, so every
// retry of one request names the same change and execution.
func changeID(tenant, buyID, idempotencyKey string) string {
	sum := sha256.Sum256([]byte(tenant + "\x00" + buyID + "\x00" + idempotencyKey))
	return "chg-" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:])[:26])
}

// Submit accepts c for the tenant's buy buyID under the request's Idempotency-Key: refused
// with a 409 *ConflictError when the buy cannot take it now (not placed, a change in flight, a
// cancellation before it), otherwise the change is marked in flight on the buy and its own
// execution starts. A retry with the same key and change answers the same change; the same
// key with another change is a 422.
func (s *Requests) Submit(ctx context.Context, caller buy.Caller, buyID, key string, c Change) (api.ChangeAccepted, error) {
	id := changeID(caller.Tenant, buyID, key)
	stored, err := json.Marshal(c)
	if err != nil {
		return api.ChangeAccepted{}, fmt.Errorf("modify: encode change: %w", err)
	}
	out := api.ChangeAccepted{ChangeID: id, BuyID: buyID, Kind: string(c.Kind), Status: string(workflow.StatusRequested)}
	out.Links.Change = "/v1/media-buys/" + id
	out.Links.Events = "/v1/media-buys/" + buyID + "/events"
	switch prior, err := s.ledger.GetOperation(ctx, caller.Tenant, id); {
	case err == nil:
		if string(prior.Change) != string(stored) {
			return api.ChangeAccepted{}, &RequestError{Status: 422, Code: "idempotency_key_reused", Field: "Idempotency-Key",
				Message: "this Idempotency-Key was already used for a different change; use a new key for a new change"}
		}
		out.Status, out.Replayed = string(prior.Status), true
		// The first attempt may have died before the start: starting again converges.
		if _, err := s.execs.Start(ctx, id, s.input(caller.Tenant, buyID, id, c)); err != nil {
			return api.ChangeAccepted{}, fmt.Errorf("modify: start execution: %w", err)
		}
		return out, nil
	case !errors.Is(err, record.ErrNotFound):
		return api.ChangeAccepted{}, fmt.Errorf("modify: read change: %w", err)
	}
	parent, err := s.ledger.GetOperation(ctx, caller.Tenant, buyID)
	if errors.Is(err, record.ErrNotFound) {
		return api.ChangeAccepted{}, buy.ErrNotFound
	}
	if err != nil {
		return api.ChangeAccepted{}, fmt.Errorf("modify: read buy: %w", err)
	}
	if parent.Kind == record.KindModification {
		return api.ChangeAccepted{}, &RequestError{Status: 422, Code: "not_a_buy", Message: fmt.Sprintf("%s is a change, not a media buy: change the buy %s", buyID, parent.ParentID)}
	}
	b := Buy{OperationID: parent.ID, Status: parent.Status, MediaBuyID: parent.MediaBuyID, Currency: parent.Currency, State: StateActive,
		Packages: recordedPackages(parent.SellerPackages, parent.Currency)}
	initial := record.BuyState{Tenant: caller.Tenant, OperationID: parent.ID, MediaBuyID: parent.MediaBuyID, State: string(StateActive),
		BudgetTotal: parent.BudgetTotal, Currency: parent.Currency, Packages: parent.SellerPackages}
	switch st, err := s.ledger.GetBuyState(ctx, caller.Tenant, parent.ID); {
	case err == nil:
		b.Revision, b.State, b.Packages = st.Revision, state(st.State), recordedPackages(st.Packages, parent.Currency)
		// This request's own change in flight is a retry racing its first attempt, which
		// BeginChange answers as begun; only another change refuses it.
		if st.ChangeID != "" && st.ChangeID != id && s.cfg.Now().Before(st.ChangeExpires) {
			b.ChangeInFlight = st.ChangeID
		}
	case !errors.Is(err, record.ErrNotFound):
		return api.ChangeAccepted{}, fmt.Errorf("modify: read buy state: %w", err)
	}
	if err := Admit(b, c); err != nil {
		return api.ChangeAccepted{}, err
	}
	// Said now, to the person asking, not by a run that fails later: the buy's record shows no
	// package a budget could be set on.
	if err := budgetWithoutPackages(b, c); err != nil {
		return api.ChangeAccepted{}, err
	}
	expires := s.cfg.Now().Add(time.Duration(s.cfg.Run.ApprovalTimeoutSeconds+s.cfg.DeadlineSeconds)*time.Second + time.Hour)
	ev := record.Event{Type: record.EventModificationRequested, Actor: caller.Principal, Reason: c.Reason, Amount: parent.BudgetTotal, Currency: parent.Currency,
		Detail: record.EventDetail(map[string]any{"change_id": id, "kind": c.Kind, "total": c.Total, "packages": c.Packages, "end_time": c.EndTime})}
	if _, err := s.ledger.BeginChange(ctx, initial, id, string(c.Kind), expires, ev); err != nil {
		var refused *record.ChangeRefusedError
		if errors.As(err, &refused) {
			if refused.Canceled {
				return api.ChangeAccepted{}, &ConflictError{Code: CodeCanceled, Message: fmt.Sprintf("media buy %s is canceled: a cancellation is final", parent.ID)}
			}
			return api.ChangeAccepted{}, &ConflictError{Code: CodeChangeInFlight, Message: fmt.Sprintf("media buy %s has a change under way (%s); send this one when it has finished", parent.ID, refused.Current.ChangeID)}
		}
		return api.ChangeAccepted{}, fmt.Errorf("modify: begin change: %w", err)
	}
	op := record.Operation{ID: id, Tenant: caller.Tenant, Status: workflow.StatusRequested, SellerID: parent.SellerID,
		GovernanceAgentID: parent.GovernanceAgentID, PlanID: parent.PlanID, Requester: caller.Principal,
		BudgetTotal: parent.BudgetTotal, Currency: parent.Currency, Request: parent.Request, MediaBuyID: parent.MediaBuyID,
		ExecutionName: id, Kind: record.KindModification, ParentID: parent.ID, Change: stored,
		// The buy's requester hears about its changes where they asked to hear about the buy.
		NotifySlack: parent.NotifySlack}
	if _, err := s.ledger.CreateOperation(ctx, op); err != nil && !errors.Is(err, record.ErrConflict) {
		s.abandon(ctx, caller.Tenant, parent.ID, id, err)
		return api.ChangeAccepted{}, fmt.Errorf("modify: create change: %w", err)
	}
	if _, err := s.execs.Start(ctx, id, s.input(caller.Tenant, parent.ID, id, c)); err != nil {
		s.abandon(ctx, caller.Tenant, parent.ID, id, err)
		return api.ChangeAccepted{}, fmt.Errorf("modify: start execution: %w", err)
	}
	return out, nil
}

// abandon frees the buy of a change that could not start, so the buyer's retry (or another
// change) is not refused until the change's expiry.
func (s *Requests) abandon(ctx context.Context, tenant, buyID, changeID string, cause error) {
	reason := "the change could not start: " + record.Clip(cause.Error(), 300)
	_, _ = s.ledger.EndChange(ctx, tenant, buyID, changeID, OutcomeFailed, reason,
		record.Event{Type: record.EventModificationEnded, Actor: "system", Reason: reason, Detail: record.EventDetail(map[string]any{"change_id": changeID, "outcome": OutcomeFailed})})
}

func (s *Requests) input(tenant, buyID, changeID string, c Change) workflow.ChangeExecutionInput {
	run := s.cfg.Run
	run.DeadlineSeconds = s.cfg.DeadlineSeconds
	return workflow.ChangeExecutionInput{
		ExecutionInput: workflow.ExecutionInput{OperationID: changeID, Tenant: tenant, Config: run, StateMachineARN: s.cfg.StateMachineARN},
		Change:         workflow.ChangeRef{BuyID: buyID, Kind: string(c.Kind)},
	}
}

// Delivery returns what the tenant's buy delivered, as its seller reported it.
func (s *Requests) Delivery(ctx context.Context, tenant, buyID string, limit int) (api.Delivery, error) {
	parent, err := s.ledger.GetOperation(ctx, tenant, buyID)
	if errors.Is(err, record.ErrNotFound) {
		return api.Delivery{}, buy.ErrNotFound
	}
	if err != nil {
		return api.Delivery{}, fmt.Errorf("modify: read buy: %w", err)
	}
	d := api.Delivery{OperationID: parent.ID, Currency: parent.Currency, Approved: parent.BudgetTotal, Snapshots: []record.DeliverySnapshot{}}
	if st, err := s.ledger.GetBuyState(ctx, tenant, buyID); err == nil {
		d.Approved = st.BudgetTotal
	}
	snaps, err := s.ledger.ListDeliverySnapshots(ctx, tenant, buyID, limit)
	if err != nil {
		return api.Delivery{}, fmt.Errorf("modify: read delivery: %w", err)
	}
	d.Snapshots = append(d.Snapshots, snaps...)
	if len(snaps) > 0 {
		d.Spend = snaps[0].Spend
		d.OverBudget = money.OverBudget(snaps[0].Spend, d.Approved)
	}
	return d, nil
}
