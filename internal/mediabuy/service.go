package mediabuy

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/workflow"
)

// Ledger is the part of the ledger the submit and read use cases need.
type Ledger interface {
	Claim(ctx context.Context, tenant, idempotencyKey, payloadHash string) (*ledger.Claim, error)
	CompleteClaim(ctx context.Context, c *ledger.Claim, operationID string, response json.RawMessage) error
	ReleaseClaim(ctx context.Context, c *ledger.Claim) error
	AcquireLock(ctx context.Context, name, owner string, ttl time.Duration) (ledger.Lease, error)
	ReleaseLock(ctx context.Context, l ledger.Lease) error
	CreateOperation(ctx context.Context, op ledger.Operation) (*ledger.Operation, error)
	GetOperation(ctx context.Context, tenant, id string) (*ledger.Operation, error)
	ListOperations(ctx context.Context, tenant string, o ledger.ListOptions) (ledger.Page[ledger.View], error)
	ListEvents(ctx context.Context, tenant, opID string, limit int, cursor string) (ledger.Page[ledger.Event], error)
	GetApproval(ctx context.Context, id string) (*ledger.Approval, error)
	GetBuyState(ctx context.Context, tenant, opID string) (*ledger.BuyState, error)
	GetBreaker(ctx context.Context, agentID string) (ledger.Breaker, error)
}

// Executions starts workflow executions under deterministic names.
type Executions interface {
	Start(ctx context.Context, name string, input any) (string, error)
}

var _ Ledger = (*ledger.Store)(nil)

// Config holds the submit use case's settings.
type Config struct {
	// Run is the timing of every execution started (tests shrink it).
	Run workflow.RunConfig
	// StateMachineARN is the MediaBuy state machine; it travels in each execution's input so
	// the wait loop can continue as a new execution.
	StateMachineARN string
	// LockTTL bounds how long an operation holds its business key when nothing releases it
	// (the workflow releases it when the operation ends).
	LockTTL time.Duration
}

// Service implements the buyer-facing use cases.
type Service struct {
	ledger Ledger
	execs  Executions
	agents AgentLookup
	schema SchemaValidator
	cfg    Config
}

// New returns the media-buy service.
func New(l Ledger, e Executions, agents AgentLookup, schema SchemaValidator, cfg Config) *Service {
	if cfg.LockTTL <= 0 {
		cfg.LockTTL = time.Duration(cfg.Run.ApprovalTimeoutSeconds+cfg.Run.DeadlineSeconds)*time.Second + 24*time.Hour
	}
	return &Service{ledger: l, execs: e, agents: agents, schema: schema, cfg: cfg}
}

// OperationID derives the operation id from the tenant and the Idempotency-Key, so that every
// retry of one request, even after a partial failure, names the same operation, business-key
// lock owner and execution.
func OperationID(tenant, idempotencyKey string) string {
	sum := sha256.Sum256([]byte(tenant + "\x00" + idempotencyKey))
	return "mb-" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:])[:26])
}

// Submit accepts a media buy: validate (nothing is written for a refused request), claim the
// Idempotency-Key, take the business-key lock, create the operation, start its execution, and
// complete the claim with the answer replayed to every retry.
func (s *Service) Submit(ctx context.Context, c Caller, key string, body []byte) (Submitted, error) {
	req, err := ParseSubmit(ctx, body, s.agents, s.schema)
	if err != nil {
		return Submitted{}, err
	}
	return Once(ctx, s.ledger, c.Tenant, key, req.PayloadHash, "media buy",
		func(out *Submitted) { out.Replayed = true },
		func() (Submitted, error) { return s.place(ctx, c, key, req) })
}

func (s *Service) place(ctx context.Context, c Caller, key string, req *ValidatedRequest) (Submitted, error) {
	if req.refusal != nil {
		// Checked after the claim: a retry of a buy accepted before the agent was disabled
		// still gets its answer replayed; a new buy gets the refusal and leaves nothing behind.
		return Submitted{}, req.refusal
	}
	id := OperationID(c.Tenant, key)
	if _, err := s.lock(ctx, c, id, req); err != nil {
		return Submitted{}, err
	}
	return s.start(ctx, c, id, req)
}

// Placed is a buy whose operation exists, and the execution that is to run it.
type Placed struct {
	Submitted
	ExecutionName string
	Input         workflow.ExecutionInput
}

// PlaceAll places buys that are submitted together (the legs of a campaign), each under the
// operation id its key derives, and returns the executions that are to run them: the caller's
// own workflow starts them. Every business-key lock is taken before any operation is created,
// and the ones taken are released when another is held, so a refused group leaves no buy
// behind. A retry with the same keys converges on the same operations.
func (s *Service) PlaceAll(ctx context.Context, c Caller, keys []string, reqs []*ValidatedRequest) ([]Placed, error) {
	if len(keys) != len(reqs) {
		return nil, fmt.Errorf("mediabuy: place all: %d keys for %d requests", len(keys), len(reqs))
	}
	leases := make([]ledger.Lease, 0, len(reqs))
	for i, req := range reqs {
		l, err := s.lock(ctx, c, OperationID(c.Tenant, keys[i]), req)
		if err != nil {
			for _, taken := range leases {
				if rerr := s.ledger.ReleaseLock(ctx, taken); rerr != nil {
					err = errors.Join(err, fmt.Errorf("mediabuy: release lock: %w", rerr))
				}
			}
			return nil, err
		}
		leases = append(leases, l)
	}
	out := make([]Placed, len(reqs))
	for i, req := range reqs {
		p, err := s.record(ctx, c, OperationID(c.Tenant, keys[i]), req)
		if err != nil {
			return nil, err
		}
		out[i] = p
	}
	return out, nil
}

// lock takes the business-key lock of one buy: one active buy per (tenant, seller, PO number).
func (s *Service) lock(ctx context.Context, c Caller, id string, req *ValidatedRequest) (ledger.Lease, error) {
	lockName := ledger.BusinessKeyLock(c.Tenant, req.SellerID, req.PONumber)
	l, err := s.ledger.AcquireLock(ctx, lockName, id, s.cfg.LockTTL)
	if err != nil {
		var held *ledger.LockHeldError
		if errors.As(err, &held) {
			return ledger.Lease{}, &RequestError{Status: 409, Code: "active_buy_exists", Field: "/media_buy/po_number",
				Message: fmt.Sprintf("media buy %s is still active for seller %s and PO number %s; wait for it to end or use another PO number",
					held.Holder.Owner, req.SellerID, req.PONumber)}
		}
		return ledger.Lease{}, fmt.Errorf("mediabuy: lock business key: %w", err)
	}
	return l, nil
}

// start records the operation and starts its execution.
func (s *Service) start(ctx context.Context, c Caller, id string, req *ValidatedRequest) (Submitted, error) {
	p, err := s.record(ctx, c, id, req)
	if err != nil {
		return Submitted{}, err
	}
	if _, err := s.execs.Start(ctx, p.ExecutionName, p.Input); err != nil {
		return Submitted{}, fmt.Errorf("mediabuy: start execution: %w", err)
	}
	return p.Submitted, nil
}

// record creates the operation (a retry finds it created) and names its execution.
func (s *Service) record(ctx context.Context, c Caller, id string, req *ValidatedRequest) (Placed, error) {
	stored, err := json.Marshal(req.SubmitRequest)
	if err != nil {
		return Placed{}, fmt.Errorf("mediabuy: encode request: %w", err)
	}
	op := ledger.Operation{
		ID: id, Tenant: c.Tenant, Status: workflow.StatusRequested,
		SellerID: req.SellerID, GovernanceAgentID: req.Governance.AgentID, PlanID: req.Governance.PlanID,
		PONumber: req.PONumber, BudgetTotal: req.Amount.Decimal(), Currency: req.Currency,
		Requester: c.Principal, RequireApproval: req.RequireApproval,
		Request: stored, ExecutionName: workflow.ExecutionName(id, 0),
	}
	if req.Notify != nil {
		op.NotifySlack = req.Notify.Slack
	}
	if _, err := s.ledger.CreateOperation(ctx, op); err != nil && !errors.Is(err, ledger.ErrConflict) {
		return Placed{}, fmt.Errorf("mediabuy: create operation: %w", err)
	}
	return Placed{
		Submitted:     Submitted{OperationID: id, Status: string(workflow.StatusRequested), Links: LinksFor(id)},
		ExecutionName: op.ExecutionName,
		Input:         workflow.ExecutionInput{OperationID: id, Tenant: c.Tenant, Config: s.cfg.Run, StateMachineARN: s.cfg.StateMachineARN},
	}, nil
}

// Get returns the tenant's operation id.
func (s *Service) Get(ctx context.Context, tenant, id string) (View, error) {
	op, err := s.ledger.GetOperation(ctx, tenant, id)
	if errors.Is(err, ledger.ErrNotFound) {
		return View{}, ErrNotFound
	}
	if err != nil {
		return View{}, fmt.Errorf("mediabuy: get %s: %w", id, err)
	}
	v := viewOf(op.View())
	a, err := s.latestApproval(ctx, tenant, id)
	switch {
	case err == nil:
		v.Approval = a
	case !errors.Is(err, errNoApproval):
		return View{}, err
	}
	switch st, err := s.ledger.GetBuyState(ctx, tenant, id); {
	case err == nil:
		v.Current = &CurrentView{Revision: st.Revision, State: st.State, Budget: st.BudgetTotal, Currency: st.Currency,
			Packages: st.Packages, EndTime: st.EndTime, ChangeInFlight: st.ChangeID, LastChangeID: st.LastChangeID,
			LastOutcome: st.LastOutcome, LastReason: st.LastReason, UpdatedAt: st.UpdatedAt.UTC().Format(time.RFC3339Nano)}
	case !errors.Is(err, ledger.ErrNotFound):
		return View{}, fmt.Errorf("mediabuy: get the state of %s: %w", id, err)
	}
	if v.Waiting, err = s.waiting(ctx, op); err != nil {
		return View{}, err
	}
	return v, nil
}

// List returns one page of the tenant's operations, newest first.
func (s *Service) List(ctx context.Context, tenant string, q ListQuery) (ListPage, error) {
	opts := ledger.ListOptions{SellerID: q.Seller, Limit: q.Limit, Cursor: q.Cursor}
	if q.Status != "" {
		st, err := workflow.ParseStatus(q.Status)
		if err != nil {
			return ListPage{}, &RequestError{Status: 400, Code: "invalid_status", Field: "status", Message: err.Error()}
		}
		opts.Status = st
	}
	page, err := s.ledger.ListOperations(ctx, tenant, opts)
	if errors.Is(err, ledger.ErrInvalidCursor) {
		return ListPage{}, &RequestError{Status: 400, Code: "invalid_cursor", Field: "cursor", Message: "the cursor is not one this listing returned"}
	}
	if err != nil {
		return ListPage{}, fmt.Errorf("mediabuy: list: %w", err)
	}
	out := ListPage{Items: make([]View, 0, len(page.Items)), NextCursor: page.Cursor}
	for _, v := range page.Items {
		out.Items = append(out.Items, viewOf(v))
	}
	return out, nil
}

// Events returns one page of the operation's timeline, oldest first.
func (s *Service) Events(ctx context.Context, tenant, id, cursor string, limit int) (EventPage, error) {
	if _, err := s.ledger.GetOperation(ctx, tenant, id); errors.Is(err, ledger.ErrNotFound) {
		return EventPage{}, ErrNotFound
	} else if err != nil {
		return EventPage{}, fmt.Errorf("mediabuy: get %s: %w", id, err)
	}
	page, err := s.ledger.ListEvents(ctx, tenant, id, limit, cursor)
	if errors.Is(err, ledger.ErrInvalidCursor) {
		return EventPage{}, &RequestError{Status: 400, Code: "invalid_cursor", Field: "cursor", Message: "the cursor is not one this listing returned"}
	}
	if err != nil {
		return EventPage{}, fmt.Errorf("mediabuy: events of %s: %w", id, err)
	}
	out := EventPage{Items: make([]EventView, 0, len(page.Items)), NextCursor: page.Cursor}
	for _, e := range page.Items {
		out.Items = append(out.Items, EventViewOf(e))
	}
	return out, nil
}

// EventViewOf is the API view of one timeline event.
func EventViewOf(e ledger.Event) EventView {
	ev := EventView{At: e.At.UTC().Format(time.RFC3339Nano), Type: e.Type, Actor: e.Actor,
		From: string(e.From), To: string(e.To), Reason: e.Reason, Detail: e.Detail}
	if e.Amount != "" {
		ev.Amount = strings.TrimSpace(e.Amount + " " + e.Currency)
	}
	return ev
}

func viewOf(v ledger.View) View {
	out := View{
		OperationID: v.ID, Status: string(v.Status), SellerID: v.SellerID, GovernanceID: v.GovernanceAgentID,
		PlanID: v.PlanID, PONumber: v.PONumber, Budget: v.BudgetTotal, Currency: v.Currency, Requester: v.Requester,
		SellerTaskID: v.SellerTaskID, MediaBuyID: v.MediaBuyID, Reason: v.Reason, Version: v.Version,
		CreatedAt: v.CreatedAt.UTC().Format(time.RFC3339Nano), UpdatedAt: v.UpdatedAt.UTC().Format(time.RFC3339Nano),
		Kind: v.Kind, BuyID: v.ParentID, Change: v.Change, Links: LinksFor(v.ID), ExecutionName: workflow.ExecutionName(v.ID, 0),
		Packages: v.SellerPackages,
	}
	var req SubmitRequest
	if json.Unmarshal(v.Request, &req) == nil {
		out.MediaBuy = req.MediaBuy
	}
	return out
}
