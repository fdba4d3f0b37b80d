package modify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/breaker"
	"github.com/buyflow/buyflow/internal/buy"
	"github.com/buyflow/buyflow/internal/money"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/stage"
	"github.com/buyflow/buyflow/internal/webhookroute"
	"github.com/buyflow/buyflow/internal/workflow"
)

// ledger is the part of the ledger the modification stages use; *ledger.Store satisfies it.
type ledger interface {
	stage.Intents
	GetOperation(ctx context.Context, tenant, id string) (*record.Operation, error)
	Transition(ctx context.Context, tenant, id string, to workflow.Status, expectedVersion int64, ch record.Patch) (*record.Operation, error)
	AppendEvent(ctx context.Context, tenant, opID string, ev record.Event) error
	ListEvents(ctx context.Context, tenant, opID string, limit int, cursor string) (record.Page[record.Event], error)
	GetBuyState(ctx context.Context, tenant, opID string) (*record.BuyState, error)
	ApplyChange(ctx context.Context, next record.BuyState, changeID string, ev record.Event) (*record.BuyState, error)
	EndChange(ctx context.Context, tenant, opID, changeID, outcome, reason string, ev record.Event) (*record.BuyState, error)
	ContradictChange(ctx context.Context, tenant, opID, changeID, state, reason string, ev record.Event) (*record.BuyState, error)
	FollowChange(ctx context.Context, tenant, id string, from, to workflow.Status, budget string, ch record.Patch) (*record.Operation, error)
}

// adCP is the part of the AdCP client the modification stages use; *adcp.Client satisfies it.
type adCP interface {
	CheckGovernance(ctx context.Context, agentID string, req adcp.CheckGovernanceRequest) (*adcp.GovernanceResult, error)
	UpdateMediaBuy(ctx context.Context, agentID string, in adcp.Intent) (*adcp.MediaBuyResult, error)
	GetMediaBuys(ctx context.Context, agentID string, req adcp.GetMediaBuysRequest) (*adcp.GetMediaBuysResult, error)
	ReportPlanOutcome(ctx context.Context, agentID string, in adcp.Intent) (*adcp.OutcomeResult, error)
	NewIntent(ctx context.Context, agentID, task string, req any, created time.Time) (adcp.Intent, error)
}

var _ adCP = (*adcp.Client)(nil)

// Config holds a Service's settings.
type Config struct {
	// CallerURI is the caller sent with check_governance.
	CallerURI string
	// PublicBaseURL is the HTTP API's root: the seller's webhooks for a change go to
	// <PublicBaseURL>/v1/webhooks/adcp/<change id>, as a buy's do.
	PublicBaseURL string
	// Routes seals the change's owner into that URL (internal/webhookroute); nil registers it
	// without a route.
	Routes *webhookroute.Secret
	// Now is the clock (default time.Now).
	Now func() time.Time
	// NewToken returns a fresh random webhook token (default 32 random bytes, hex).
	NewToken func() (string, error)
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Service runs the stages of one change: Check, Update, Apply and Fail.
type Service struct {
	ledger ledger
	adcp   adCP
	policy Policy
	cfg    Config
	log    *slog.Logger
}

// New returns a Service; the zero policy asks a person for no change.
func New(l ledger, a adCP, policy Policy, cfg Config) *Service {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.NewToken == nil {
		cfg.NewToken = stage.RandomToken
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	cfg.PublicBaseURL = strings.TrimRight(cfg.PublicBaseURL, "/")
	return &Service{ledger: l, adcp: a, policy: policy, cfg: cfg, log: log}
}

func (s *Service) now() time.Time { return s.cfg.Now().UTC() }

// Intent names: the frozen plan (what governance checked), the update call, the push token
// and the outcome report, each written before the call that uses it. The update and the
// report are sent, so each attempt claims them first (stage.FixIntent).
const (
	intentPlan   = "modification_plan"
	intentUpdate = "update_media_buy#change"
	intentToken  = "push_token"
	intentReport = "report_plan_outcome#change"
)

// run is one change as the stages see it: the change's operation, the buy's operation and
// the buyer's change.
type run struct {
	op     *record.Operation // the change
	parent *record.Operation // the placed buy
	change Change
	seller string
	acct   adcp.AccountRef
	gov    buy.GovernanceRef
	// bookedEnd is the flight's end as the buy was placed.
	bookedEnd string
}

func (s *Service) load(ctx context.Context, tenant, id string) (*run, error) {
	op, err := s.ledger.GetOperation(ctx, tenant, id)
	if errors.Is(err, record.ErrNotFound) {
		return nil, &workflow.NotFoundError{OperationID: id}
	}
	if err != nil {
		return nil, &workflow.TransientError{Reason: fmt.Sprintf("read change %s: %v", id, err)}
	}
	if op.Kind != record.KindModification || op.ParentID == "" {
		return nil, &workflow.TerminalError{Code: "not_a_change", Reason: fmt.Sprintf("operation %s is not a change to a placed buy", id)}
	}
	parent, err := s.ledger.GetOperation(ctx, tenant, op.ParentID)
	if err != nil {
		return nil, &workflow.TransientError{Reason: fmt.Sprintf("read buy %s: %v", op.ParentID, err)}
	}
	r := &run{op: op, parent: parent, seller: parent.SellerID}
	if err := json.Unmarshal(op.Change, &r.change); err != nil {
		return nil, &workflow.TerminalError{Code: "bad_change", Reason: fmt.Sprintf("change %s: %v", id, err)}
	}
	var req buy.SubmitRequest
	if err := json.Unmarshal(parent.Request, &req); err != nil {
		return nil, &workflow.TerminalError{Code: "bad_request", Reason: fmt.Sprintf("buy %s: %v", parent.ID, err)}
	}
	r.gov = req.Governance
	var mb struct {
		Account adcp.AccountRef `json:"account"`
		EndTime string          `json:"end_time"`
	}
	if err := json.Unmarshal(req.MediaBuy, &mb); err != nil {
		return nil, &workflow.TerminalError{Code: "bad_request", Reason: fmt.Sprintf("buy %s: %v", parent.ID, err)}
	}
	r.acct, r.bookedEnd = mb.Account, mb.EndTime
	return r, nil
}

// current reads the buy as buyflow recorded it and, where the seller lists it, as the seller
// holds it now (its revision, packages and status), with the ledger's record of the change in
// flight: the plan is made against the seller's truth where there is one, and the revision
// sent with it makes a seller refuse a plan made on a stale view. A seller that does not list
// the buy (the @adcp/sdk broadcast example answers get_media_buys with []) does not stop the
// change: it is planned from buyflow's record (Unlisted) and the seller's answer judges it.
func (s *Service) current(ctx context.Context, r *run) (Buy, error) {
	st, err := s.ledger.GetBuyState(ctx, r.op.Tenant, r.parent.ID)
	if err != nil {
		return Buy{}, &workflow.TransientError{Reason: fmt.Sprintf("read the state of buy %s: %v", r.parent.ID, err)}
	}
	if st.ChangeID != r.op.ID {
		return Buy{}, &workflow.TerminalError{Code: "change_not_in_flight", Reason: fmt.Sprintf("change %s is not the change in flight on buy %s (%q is)", r.op.ID, r.parent.ID, st.ChangeID)}
	}
	b := Buy{OperationID: r.parent.ID, Status: r.parent.Status, MediaBuyID: r.parent.MediaBuyID, Currency: r.parent.Currency, Account: r.acct,
		Revision: st.Revision, State: state(st.State), EndTime: st.EndTime, Packages: recordedPackages(st.Packages, r.parent.Currency)}
	if total, err := money.ParseDecimal(st.BudgetTotal, r.parent.Currency); err == nil {
		b.Budget = total
	}
	mb, err := s.listed(ctx, r)
	switch {
	case breaker.Unavailable(err) != nil:
		return Buy{}, err // not sent: the change waits for the seller's breaker
	case err != nil && r.change.Kind == KindCancel && adcp.Decide(err) != adcp.DecisionRetry:
		// A cancellation is sent whatever the read says: it is idempotent and the seller's
		// answer judges it, and a seller that cannot be read must still be able to stop a buy.
		s.log.WarnContext(ctx, "the buy was not read before its cancellation; it is sent as buyflow recorded the buy", "operationId", r.parent.ID, "changeId", r.op.ID, "err", err)
		b.Unlisted = true
		return b, nil
	case err != nil:
		return Buy{}, stage.CallError("get_media_buys", err)
	case mb == nil:
		b.Unlisted = true
		return b, nil
	}
	if mb.Revision > b.Revision {
		b.Revision = mb.Revision
	}
	b.Packages = nil
	for _, p := range mb.Packages {
		amt, err := money.Parse(string(p.Budget), b.Currency)
		if p.Budget == "" || err != nil {
			return Buy{}, &workflow.TerminalError{Code: "unreadable_package", Reason: fmt.Sprintf("the seller reports package %s of %s with budget %q: %v", p.PackageID, mb.MediaBuyID, p.Budget, err)}
		}
		b.Packages = append(b.Packages, Package{ID: p.PackageID, Budget: amt})
	}
	// A listing says when the buy stopped (paused, canceled, ended); "active" leaves buyflow's
	// own record, as it always has.
	if st, ok := sellerState(mb.Status); ok && st != StateActive {
		b.State = st
	}
	return b, nil
}

// sellerState is the state of a buy whose media-buy status the seller reports as status; ok is
// false for a status that says nothing about it ("" or unknown). A buy whose flight ended
// (completed) or that the seller rejected takes no change, as a canceled one.
func sellerState(status string) (state, bool) {
	switch status {
	case "active", "pending_creatives", "pending_start", "pending_activation":
		return StateActive, true
	case "paused":
		return StatePaused, true
	case "canceled", "completed", "rejected":
		return StateCanceled, true
	}
	return "", false
}

// listed is the buy as the seller's get_media_buys lists it; nil, nil when the seller does not
// list it (it answers without it, or MEDIA_BUY_NOT_FOUND).
func (s *Service) listed(ctx context.Context, r *run) (*adcp.MediaBuy, error) {
	got, err := s.adcp.GetMediaBuys(ctx, r.seller, adcp.GetMediaBuysRequest{Account: &r.acct, MediaBuyIDs: []string{r.parent.MediaBuyID}})
	if adcp.ErrorCode(err) == codeMediaBuyNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	for i := range got.MediaBuys {
		if got.MediaBuys[i].MediaBuyID == r.parent.MediaBuyID {
			return &got.MediaBuys[i], nil
		}
	}
	return nil, nil
}

// codeMediaBuyNotFound is the AdCP error a seller may answer get_media_buys with for a buy it
// does not list, instead of leaving it out.
const codeMediaBuyNotFound = "MEDIA_BUY_NOT_FOUND"

// recordedPackages are the packages buyflow recorded for the buy, in the currency; a budget
// the seller never said stays unknown (Package.known), not zero.
func recordedPackages(pkgs []record.PackageBudget, currency string) []Package {
	var out []Package
	for _, pb := range pkgs {
		p := Package{ID: pb.PackageID}
		if amt, err := money.ParseDecimal(pb.Budget, currency); pb.Budget != "" && err == nil {
			p.Budget = amt
		}
		out = append(out, p)
	}
	return out
}

// frozenPlan is the plan stored write-ahead: what governance checks and the seller receives.
type frozenPlan struct {
	Args     adcp.UpdateMediaBuyRequest `json:"args"`
	Before   string                     `json:"before"`
	After    string                     `json:"after"`
	Packages []record.PackageBudget     `json:"packages"`
	State    state                      `json:"state"`
	Revision int                        `json:"revision"`
	Summary  string                     `json:"summary"`
	EndTime  string                     `json:"end_time,omitempty"`
	// PackagesBefore, StateBefore and EndTimeBefore are the buy before the change, as the
	// plan was made against it: what an approver sees as "now".
	PackagesBefore []record.PackageBudget `json:"packages_before,omitempty"`
	StateBefore    state                  `json:"state_before,omitempty"`
	EndTimeBefore  string                 `json:"end_time_before,omitempty"`
	// Unlisted says the plan was made from buyflow's record: the seller did not list the buy
	// (or, for a cancellation, could not be read).
	Unlisted bool `json:"unlisted,omitempty"`
}

// commitment is the change's proposed_commitment (check_governance, AdCP 3.2): what it adds
// to the buy's budget, zero for a decrease or no budget change — the positive delta, never the
// total. Nil when the plan's amounts do not parse (3.2 then refuses the check before sending).
func (p *frozenPlan) commitment(currency string) *adcp.Commitment {
	before, err1 := money.ParseDecimal(p.Before, currency)
	after, err2 := money.ParseDecimal(p.After, currency)
	if err1 != nil || err2 != nil {
		return nil
	}
	inc := Planned{Before: before, After: after}.Increase()
	return &adcp.Commitment{Amount: json.Number(inc.Decimal()), Currency: currency}
}

// plan fixes the change's plan once, against the seller's current buy: every later stage and
// every retry reads the same one.
func (s *Service) plan(ctx context.Context, r *run) (*frozenPlan, error) {
	var fixed frozenPlan
	switch got, err := s.ledger.GetIntent(ctx, r.op.Tenant, r.op.ID, intentPlan); {
	case err == nil:
		if err := json.Unmarshal(got.Request, &fixed); err != nil {
			return nil, &workflow.TerminalError{Code: "bad_plan", Reason: err.Error()}
		}
		return &fixed, nil
	case !errors.Is(err, record.ErrNotFound):
		return nil, &workflow.TransientError{Reason: fmt.Sprintf("read the plan of %s: %v", r.op.ID, err)}
	}
	b, err := s.current(ctx, r)
	if err != nil {
		return nil, err
	}
	// A cancellation is not held back by the seller's listing (the API admitted it on
	// buyflow's record): a buy the seller shows ended is still sent the cancellation, and the
	// seller's answer, in its own words, says whether there was anything left to cancel.
	if err := Admit(b, r.change); err != nil && r.change.Kind != KindCancel {
		// The seller's truth disagrees with what the API saw (the buy was paused or canceled
		// at the seller): nothing is sent.
		var ce *ConflictError
		errors.As(err, &ce)
		if ce.Code != CodeChangeInFlight {
			return nil, &workflow.TerminalError{Code: ce.Code, Reason: ce.Message}
		}
	}
	p, err := Plan(b, r.change, r.op.ID, s.now())
	if err != nil {
		var re *RequestError
		if errors.As(err, &re) {
			return nil, &workflow.TerminalError{Code: re.Code, Reason: re.Message}
		}
		return nil, err
	}
	f := frozenPlan{Args: p.Args, Before: p.Before.Decimal(), After: p.After.Decimal(), State: p.State, Revision: b.Revision, Summary: p.Summary, EndTime: b.EndTime,
		StateBefore: b.State, EndTimeBefore: orElse(b.EndTime, r.bookedEnd), Unlisted: b.Unlisted}
	for _, pk := range b.Packages {
		f.PackagesBefore = append(f.PackagesBefore, record.PackageBudget{PackageID: pk.ID, Budget: pk.decimal()})
	}
	if r.change.Kind == KindEndTime {
		f.EndTime = r.change.EndTime
	}
	for _, pk := range p.Packages {
		f.Packages = append(f.Packages, record.PackageBudget{PackageID: pk.ID, Budget: pk.decimal()})
	}
	raw, err := json.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("modify: encode plan: %w", err)
	}
	stored, _, err := s.ledger.PutIntent(ctx, record.Intent{Tenant: r.op.Tenant, OperationID: r.op.ID, Task: intentPlan,
		IdempotencyKey: "plan-" + r.op.ID, Request: raw, CreatedAt: s.now()})
	if err != nil {
		return nil, &workflow.TransientError{Reason: fmt.Sprintf("store the plan of %s: %v", r.op.ID, err)}
	}
	var out frozenPlan
	if err := json.Unmarshal(stored.Request, &out); err != nil {
		return nil, &workflow.TerminalError{Code: "bad_plan", Reason: err.Error()}
	}
	return &out, nil
}

// event appends ev to the timelines of the change and of the buy; a failed append is logged.
// unavailable is the change's wait for an agent whose circuit breaker refused the call
// (breaker.WaitFor), recorded on the change's and the buy's timelines; past the change's
// deadline a DeadlineExceededError. Any other error gives nil, nil.
func (s *Service) unavailable(ctx context.Context, r *run, cfg workflow.RunConfig, role adcp.Role, tool string, err error) (*workflow.AgentUnavailable, error) {
	w := breaker.WaitFor(err, role, tool, r.op.CreatedAt, s.now(), cfg)
	if w == nil {
		return nil, nil
	}
	s.event(ctx, r, record.Event{Type: record.EventAgentUnavailable, Actor: "system", Reason: record.Clip(w.Reason(), 500), Detail: record.EventDetail(w.Detail())})
	return w.Wait, w.Err(r.op.ID)
}

func (s *Service) event(ctx context.Context, r *run, ev record.Event) {
	if ev.At.IsZero() {
		ev.At = s.now()
	}
	for _, id := range []string{r.op.ID, r.parent.ID} {
		if err := s.ledger.AppendEvent(ctx, r.op.Tenant, id, ev); err != nil {
			s.log.WarnContext(ctx, "event not recorded", "operationId", id, "type", ev.Type, "err", err)
		}
	}
}

// move transitions the change's operation forward; a refused move (the ledger holds this
// status or a later one) returns the current operation.
func (s *Service) move(ctx context.Context, r *run, to workflow.Status, ch record.Patch) (*record.Operation, error) {
	if r.op.Status == to {
		return r.op, nil
	}
	next, err := s.ledger.Transition(ctx, r.op.Tenant, r.op.ID, to, record.AnyVersion, ch)
	var te *record.TransitionError
	switch {
	case err == nil:
		r.op = next
		return next, nil
	case errors.As(err, &te) && te.Current != nil:
		r.op = te.Current
		return te.Current, nil
	case errors.Is(err, record.ErrContention):
		return nil, &workflow.TransientError{Reason: fmt.Sprintf("change %s: concurrent write, retry", r.op.ID)}
	}
	return nil, fmt.Errorf("modify: move change %s to %s: %w", r.op.ID, to, err)
}

// Function is the topology name of the function that runs a change's stages.
const Function = "modify"
