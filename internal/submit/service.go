package submit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/buy"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/workflow"
)

// Ledger is the part of the ledger the submit and read use cases need.
type Ledger interface {
	Claim(ctx context.Context, tenant, idempotencyKey, payloadHash string) (*record.Claim, error)
	CompleteClaim(ctx context.Context, c *record.Claim, operationID string, response json.RawMessage) error
	ReleaseClaim(ctx context.Context, c *record.Claim) error
	GetOperation(ctx context.Context, tenant, id string) (*record.Operation, error)
	ListOperations(ctx context.Context, tenant string, o record.ListOptions) (record.Page[record.View], error)
	ListEvents(ctx context.Context, tenant, opID string, limit int, cursor string) (record.Page[record.Event], error)
	GetApproval(ctx context.Context, id string) (*record.Approval, error)
	GetBuyState(ctx context.Context, tenant, opID string) (*record.BuyState, error)
	GetBreaker(ctx context.Context, agentID string) (record.Breaker, error)
}

// Service implements the buyer-facing use cases.
type Service struct {
	ledger Ledger
	execs  buy.Executions
	placer *buy.Placer
	agents buy.AgentLookup
	schema buy.SchemaValidator
}

// New returns the media-buy service: it places buys with placer and starts their executions
// with execs.
func New(l Ledger, execs buy.Executions, placer *buy.Placer, agents buy.AgentLookup, schema buy.SchemaValidator) *Service {
	return &Service{ledger: l, execs: execs, placer: placer, agents: agents, schema: schema}
}

// Submit accepts a media buy: validate (nothing is written for a refused request), claim the
// Idempotency-Key, take the business-key lock, create the operation, start its execution, and
// complete the claim with the answer replayed to every retry.
func (s *Service) Submit(ctx context.Context, c buy.Caller, key string, body []byte) (api.Submitted, error) {
	req, err := buy.ParseSubmit(ctx, body, s.agents, s.schema)
	if err != nil {
		return api.Submitted{}, err
	}
	return buy.Once(ctx, s.ledger, c.Tenant, key, req.PayloadHash, "media buy",
		func(out *api.Submitted) { out.Replayed = true },
		func() (api.Submitted, error) { return s.place(ctx, c, key, req) })
}

func (s *Service) place(ctx context.Context, c buy.Caller, key string, req *buy.ValidatedRequest) (api.Submitted, error) {
	p, err := s.placer.Place(ctx, c, key, req)
	if err != nil {
		return api.Submitted{}, err
	}
	if _, err := s.execs.Start(ctx, p.ExecutionName, p.Input); err != nil {
		return api.Submitted{}, fmt.Errorf("submit: start execution: %w", err)
	}
	return p.Submitted, nil
}

// Get returns the tenant's operation id.
func (s *Service) Get(ctx context.Context, tenant, id string) (api.MediaBuy, error) {
	op, err := s.ledger.GetOperation(ctx, tenant, id)
	if errors.Is(err, record.ErrNotFound) {
		return api.MediaBuy{}, buy.ErrNotFound
	}
	if err != nil {
		return api.MediaBuy{}, fmt.Errorf("submit: get %s: %w", id, err)
	}
	v := viewOf(op.View())
	var said *api.SellerWords
	a, err := s.latestApproval(ctx, tenant, id, func(ev record.Event) {
		if w := buy.SellerWordsOf(ev); w != nil {
			said = w
		}
	})
	switch {
	case err == nil:
		v.Approval = a
	case !errors.Is(err, errNoApproval):
		return api.MediaBuy{}, err
	}
	// Only while the seller has the buy: after it, a "review under way" would mislead, and
	// an ending's words are in its reason.
	switch op.Status {
	case workflow.StatusSubmitted, workflow.StatusWorking, workflow.StatusInputRequired:
		v.Seller = said
	}
	switch st, err := s.ledger.GetBuyState(ctx, tenant, id); {
	case err == nil:
		v.Current = &api.Current{Revision: st.Revision, State: st.State, Budget: st.BudgetTotal, Currency: st.Currency,
			Packages: st.Packages, EndTime: st.EndTime, ChangeInFlight: st.ChangeID, LastChangeID: st.LastChangeID,
			LastOutcome: st.LastOutcome, LastReason: st.LastReason, UpdatedAt: st.UpdatedAt.UTC().Format(time.RFC3339Nano)}
	case !errors.Is(err, record.ErrNotFound):
		return api.MediaBuy{}, fmt.Errorf("submit: get the state of %s: %w", id, err)
	}
	if v.Waiting, err = s.waiting(ctx, op); err != nil {
		return api.MediaBuy{}, err
	}
	return v, nil
}

// List returns one page of the tenant's operations, newest first.
func (s *Service) List(ctx context.Context, tenant string, q ListQuery) (api.Page[api.MediaBuy], error) {
	opts := record.ListOptions{SellerID: q.Seller, Limit: q.Limit, Cursor: q.Cursor}
	if q.Status != "" {
		st, err := workflow.ParseStatus(q.Status)
		if err != nil {
			return api.Page[api.MediaBuy]{}, &buy.RequestError{Status: 400, Code: "invalid_status", Field: "status", Message: err.Error()}
		}
		opts.Status = st
	}
	page, err := s.ledger.ListOperations(ctx, tenant, opts)
	if errors.Is(err, record.ErrInvalidCursor) {
		return api.Page[api.MediaBuy]{}, &buy.RequestError{Status: 400, Code: "invalid_cursor", Field: "cursor", Message: "the cursor is not one this listing returned"}
	}
	if err != nil {
		return api.Page[api.MediaBuy]{}, fmt.Errorf("submit: list: %w", err)
	}
	out := api.Page[api.MediaBuy]{Items: make([]api.MediaBuy, 0, len(page.Items)), NextCursor: page.Cursor}
	for _, v := range page.Items {
		out.Items = append(out.Items, viewOf(v))
	}
	return out, nil
}

// Events returns one page of the operation's timeline, oldest first.
func (s *Service) Events(ctx context.Context, tenant, id, cursor string, limit int) (api.Page[api.Event], error) {
	if _, err := s.ledger.GetOperation(ctx, tenant, id); errors.Is(err, record.ErrNotFound) {
		return api.Page[api.Event]{}, buy.ErrNotFound
	} else if err != nil {
		return api.Page[api.Event]{}, fmt.Errorf("submit: get %s: %w", id, err)
	}
	page, err := s.ledger.ListEvents(ctx, tenant, id, limit, cursor)
	if errors.Is(err, record.ErrInvalidCursor) {
		return api.Page[api.Event]{}, &buy.RequestError{Status: 400, Code: "invalid_cursor", Field: "cursor", Message: "the cursor is not one this listing returned"}
	}
	if err != nil {
		return api.Page[api.Event]{}, fmt.Errorf("submit: events of %s: %w", id, err)
	}
	out := api.Page[api.Event]{Items: make([]api.Event, 0, len(page.Items)), NextCursor: page.Cursor}
	for _, e := range page.Items {
		out.Items = append(out.Items, buy.EventOf(e))
	}
	return out, nil
}

func viewOf(v record.View) api.MediaBuy {
	out := api.MediaBuy{
		OperationID: v.ID, Status: string(v.Status), SellerID: v.SellerID, GovernanceID: v.GovernanceAgentID,
		PlanID: v.PlanID, PONumber: v.PONumber, Budget: v.BudgetTotal, Currency: v.Currency, Requester: v.Requester,
		SellerTaskID: v.SellerTaskID, MediaBuyID: v.MediaBuyID, Reason: v.Reason, Version: v.Version,
		CreatedAt: v.CreatedAt.UTC().Format(time.RFC3339Nano), UpdatedAt: v.UpdatedAt.UTC().Format(time.RFC3339Nano),
		Kind: v.Kind, BuyID: v.ParentID, Change: v.Change, Links: buy.LinksFor(v.ID), ExecutionName: workflow.ExecutionName(v.ID, 0),
		Packages: v.SellerPackages,
	}
	var req buy.SubmitRequest
	if json.Unmarshal(v.Request, &req) == nil {
		out.MediaBuy = req.MediaBuy
	}
	return out
}

// latestApproval finds the operation's latest approval request on its timeline and reads it;
// errNoApproval says no person was asked. also, when set, sees every event of the walk: what
// else the view reads from the timeline costs no second walk.
func (s *Service) latestApproval(ctx context.Context, tenant, opID string, also func(record.Event)) (*api.Approval, error) {
	var last struct {
		ApprovalID string `json:"approval_id"`
		Round      int    `json:"round"`
		Escalation bool   `json:"escalation"`
		CampaignID string `json:"campaign_id"`
	}
	var requestedAt time.Time
	cursor := ""
	for page := 0; page < 200; page++ {
		p, err := s.ledger.ListEvents(ctx, tenant, opID, record.MaxListLimit, cursor)
		if err != nil {
			return nil, fmt.Errorf("submit: timeline of %s: %w", opID, err)
		}
		for _, ev := range p.Items {
			if also != nil {
				also(ev)
			}
			if ev.Type != record.EventApprovalRequested {
				continue
			}
			if json.Unmarshal(ev.Detail, &last) != nil {
				continue
			}
			requestedAt = ev.At
		}
		if p.Cursor == "" {
			break
		}
		cursor = p.Cursor
	}
	if last.ApprovalID == "" {
		return nil, errNoApproval
	}
	a, err := s.ledger.GetApproval(ctx, last.ApprovalID)
	if err != nil {
		return nil, fmt.Errorf("submit: approval of %s: %w", opID, err)
	}
	// Approvals are keyed by id alone: one that is not this tenant's operation's (or the
	// campaign's whose request this leg's timeline records) is not shown.
	mine := a.OperationID == opID || (a.CampaignID != "" && a.CampaignID == last.CampaignID)
	if a.Tenant != tenant || !mine {
		return nil, errNoApproval
	}
	v := buy.ApprovalOf(a)
	v.RequestedAt, v.Round, v.Escalation = buy.RFC3339(requestedAt), last.Round, last.Escalation
	return v, nil
}

var errNoApproval = errors.New("submit: no approval")

// Reasons of a WaitingView.
const (
	waitingSeller     = "seller_unavailable"
	waitingGovernance = "governance_unavailable"
)

// waiting returns what the buy waits for when its next step calls an agent whose breaker is
// open, or nil. Governance is asked until the buy is placed; the seller from the create on.
func (s *Service) waiting(ctx context.Context, op *record.Operation) (*api.Waiting, error) {
	agent, reason := "", ""
	switch op.Status {
	case workflow.StatusRequested, workflow.StatusCheckingGovernance:
		agent, reason = op.GovernanceAgentID, waitingGovernance
	case workflow.StatusCreating, workflow.StatusSubmitted, workflow.StatusWorking:
		agent, reason = op.SellerID, waitingSeller
	}
	if agent == "" {
		return nil, nil
	}
	b, err := s.ledger.GetBreaker(ctx, agent)
	if errors.Is(err, record.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("submit: circuit breaker of %s: %w", agent, err)
	}
	if b.State != record.BreakerOpen && b.State != record.BreakerHalfOpen {
		return nil, nil
	}
	// When the breaker lets a call through: the cool-down's end, passed while the probe is out
	// (never the probe's timeout: the waiting buys go on as soon as the probe succeeds).
	return &api.Waiting{Reason: reason, AgentID: agent, Since: buy.RFC3339(b.OpenedAt), RetryAt: buy.RFC3339(b.RetryAt)}, nil
}
