package stage

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	mathrand "math/rand/v2"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/breaker"
	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/sellertask"
	"github.com/buyflow/buyflow/internal/webhookroute"
	"github.com/buyflow/buyflow/internal/workflow"
)

// Ledger is the part of the ledger the stages use; *ledger.Store satisfies it.
type Ledger interface {
	Intents
	GetOperation(ctx context.Context, tenant, id string) (*record.Operation, error)
	Transition(ctx context.Context, tenant, id string, to workflow.Status, expectedVersion int64, ch record.Patch) (*record.Operation, error)
	// Advance records a seller's task update (sellertask.RecordStatus, the poll stage's).
	Advance(ctx context.Context, op *record.Operation, to workflow.Status, ch record.Patch, take bool) (*record.Operation, error)
	SetTaskToken(ctx context.Context, tenant, id, token string) (*record.Operation, error)
	ClearTaskToken(ctx context.Context, tenant, id, token string) error
	AppendEvent(ctx context.Context, tenant, opID string, ev record.Event) error
	AppendEventWhile(ctx context.Context, tenant, opID string, status workflow.Status, ev record.Event) error
	ListEvents(ctx context.Context, tenant, opID string, limit int, cursor string) (record.Page[record.Event], error)
	AcquireLock(ctx context.Context, name, owner string, ttl time.Duration) (record.Lease, error)
	ReleaseLock(ctx context.Context, l record.Lease) error
	// GetSweepHeartbeat tells how long the safety net may wait (SweepUp).
	GetSweepHeartbeat(ctx context.Context) (record.SweepHeartbeat, error)
}

// AdCP is the part of the AdCP client the stages use; *adcp.Client satisfies it.
type AdCP interface {
	CheckGovernance(ctx context.Context, agentID string, req adcp.CheckGovernanceRequest) (*adcp.GovernanceResult, error)
	GetTaskStatus(ctx context.Context, agentID string, req adcp.GetTaskStatusRequest) (*adcp.TaskStatusResult, error)
	CreateMediaBuy(ctx context.Context, agentID string, in adcp.Intent) (*adcp.MediaBuyResult, error)
	UpdateMediaBuy(ctx context.Context, agentID string, in adcp.Intent) (*adcp.MediaBuyResult, error)
	GetMediaBuys(ctx context.Context, agentID string, req adcp.GetMediaBuysRequest) (*adcp.GetMediaBuysResult, error)
	ReportPlanOutcome(ctx context.Context, agentID string, in adcp.Intent) (*adcp.OutcomeResult, error)
	// Capabilities is the agent's get_adcp_capabilities answer (cached).
	Capabilities(ctx context.Context, agentID string) (*adcp.Capabilities, error)
	// NewIntent fixes a mutating request in the AdCP version the agent speaks.
	NewIntent(ctx context.Context, agentID, task string, req any, created time.Time) (adcp.Intent, error)
}

var _ AdCP = (*adcp.Client)(nil)

// Options are the knobs every stage has a default for; the zero Options is production's.
type Options struct {
	// Now is the clock (default time.Now); it should be the ledger's clock too.
	Now func() time.Time
	// Rand returns floats in [0,1) for the poll jitter (default math/rand/v2).
	Rand func() float64
	// NewToken returns a fresh random webhook token (default 32 random bytes, hex).
	NewToken func() (string, error)
	// Routes seals each operation's owner into the webhook URL the create stage registers
	// (internal/webhookroute); nil registers URLs without routes.
	Routes *webhookroute.Secret
	// MaxConditionRounds bounds check_governance rounds with conditions (default 3).
	MaxConditionRounds int
	// Metrics receives the stage's metrics (GovernanceDenied, AdcpErrors by Code, Timeouts by
	// Kind, ...); the function's wiring flushes it once per invocation. Nil records nothing.
	Metrics *metrics.Recorder
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Stage is what the stage use cases share: the ledger, the AdCP client, the webhook token
// every governance check records and the create stage registers, the clock and the outputs.
// Each use case embeds it.
type Stage struct {
	Ledger   Ledger
	AdCP     AdCP
	clock    func() time.Time
	newToken func() (string, error)
	Metrics  *metrics.Recorder
	Log      *slog.Logger
}

// New returns the shared part of a stage, with o's defaults filled in.
func New(l Ledger, a AdCP, o Options) Stage {
	st := Stage{Ledger: l, AdCP: a, clock: o.Now, newToken: o.NewToken, Metrics: o.Metrics, Log: o.Logger}
	if st.clock == nil {
		st.clock = time.Now
	}
	if st.newToken == nil {
		st.newToken = RandomToken
	}
	if st.Log == nil {
		st.Log = slog.Default()
	}
	return st
}

// OrMathRand is r, or math/rand/v2 when r is nil: the jitter of the first and later waits.
func OrMathRand(r func() float64) func() float64 {
	if r == nil {
		return mathrand.Float64
	}
	return r
}

// RandomToken returns a fresh webhook token: 32 random bytes, hex.
func RandomToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("stage: random token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// Now is the stage's clock, in UTC.
func (s *Stage) Now() time.Time { return s.clock().UTC() }

// SweepUp reports whether the reconciliation sweep's heartbeat is fresh, which lets the
// safety net wait its long interval (workflow.RunConfig.SweepNetSeconds). The heartbeat is
// read only when cfg has a long net; a read that fails counts as a sweep that is down: a
// short net costs a few transitions, a long one with no sweep behind it a late buy.
func (s *Stage) SweepUp(ctx context.Context, cfg workflow.RunConfig) bool {
	if cfg.SweepNetSeconds <= 0 {
		return false
	}
	h, err := s.Ledger.GetSweepHeartbeat(ctx)
	if err != nil {
		s.Log.WarnContext(ctx, "sweep heartbeat not read: short safety net", "err", err)
		return false
	}
	return h.Fresh(s.Now())
}

// Intent task names in the ledger.
const (
	IntentCreate       = "create_media_buy"
	IntentCancel       = "update_media_buy#cancel"
	IntentReportPrefix = "report_plan_outcome#"
	intentPushToken    = "push_token"
	IntentCheckPrefix  = record.CheckedIntentPrefix
	IntentReviewPrefix = "check_governance#review#v"
)

// Request mirrors the JSON submit stores in Operation.Request (buy.SubmitRequest).
type Request struct {
	SellerID   string `json:"seller_id"`
	Governance struct {
		AgentID string `json:"agent_id"`
		PlanID  string `json:"plan_id"`
	} `json:"governance"`
	Currency        string          `json:"currency"`
	RequireApproval bool            `json:"require_approval"`
	MediaBuy        json.RawMessage `json:"media_buy"`
}

func ParseRequest(op *record.Operation) (*Request, error) {
	var r Request
	if err := json.Unmarshal(op.Request, &r); err != nil {
		return nil, &workflow.TerminalError{Code: "bad_stored_request", Reason: fmt.Sprintf("operation %s: stored request is not a submit request: %v", op.ID, err)}
	}
	if r.SellerID == "" {
		r.SellerID = op.SellerID
	}
	if r.Governance.AgentID == "" {
		r.Governance.AgentID = op.GovernanceAgentID
	}
	if len(bytes.TrimSpace(r.MediaBuy)) == 0 || r.Governance.PlanID == "" || r.Governance.AgentID == "" || r.SellerID == "" {
		return nil, &workflow.TerminalError{Code: "bad_stored_request", Reason: fmt.Sprintf("operation %s: stored request lacks seller, governance agent, plan or media_buy", op.ID)}
	}
	return &r, nil
}

// account returns media_buy.account, for polls and reads at the seller.
func (r *Request) Account() *adcp.AccountRef {
	var mb struct {
		Account *adcp.AccountRef `json:"account"`
	}
	if json.Unmarshal(r.MediaBuy, &mb) != nil {
		return nil
	}
	return mb.Account
}

// load reads the tenant's operation, mapping a missing one to workflow.NotFoundError.
func (s *Stage) Load(ctx context.Context, tenant, id string) (*record.Operation, error) {
	if tenant == "" || id == "" {
		return nil, &workflow.InvalidInputError{Field: "operation_id", Reason: "operation_id and tenant are required"}
	}
	op, err := s.Ledger.GetOperation(ctx, tenant, id)
	if errors.Is(err, record.ErrNotFound) {
		return nil, &workflow.NotFoundError{OperationID: id}
	}
	if err != nil {
		return nil, fmt.Errorf("stage: read operation %s: %w", id, err)
	}
	return op, nil
}

// LoadRequest reads the tenant's operation (Load) and the buy request stored with it
// (ParseRequest).
func (s *Stage) LoadRequest(ctx context.Context, tenant, id string) (*record.Operation, *Request, error) {
	op, err := s.Load(ctx, tenant, id)
	if err != nil {
		return nil, nil, err
	}
	req, err := ParseRequest(op)
	if err != nil {
		return nil, nil, err
	}
	return op, req, nil
}

// move transitions op to to, forward only (sellertask.Move, no retry of a lost transaction
// race: the ASL retries the TransientError). A refused transition is "no change": it returns
// the current operation and moved=false. A missing operation is a NotFoundError.
func (s *Stage) Move(ctx context.Context, op *record.Operation, to workflow.Status, ch record.Patch) (cur *record.Operation, moved bool, err error) {
	cur, moved, err = sellertask.Move(ctx, sellertask.Deps{Ledger: s.Ledger, Log: s.Log}, op, to, ch)
	if err != nil {
		return nil, false, MoveError(op, err)
	}
	return cur, moved, nil
}

// MoveError maps a failed sellertask call to the stage's errors: a missing operation is a
// NotFoundError, a lost transaction race a TransientError the ASL retries.
func MoveError(op *record.Operation, err error) error {
	switch {
	case errors.Is(err, record.ErrNotFound):
		return &workflow.NotFoundError{OperationID: op.ID}
	case errors.Is(err, record.ErrContention):
		return &workflow.TransientError{Reason: fmt.Sprintf("operation %s: concurrent write, retry", op.ID)}
	default:
		return fmt.Errorf("stage: %w", err)
	}
}

// event appends an audit event; a failure is logged, not returned: the event is a record of a
// step that already happened and must not make the step run twice.
func (s *Stage) Event(ctx context.Context, op *record.Operation, ev record.Event) {
	ev = withAmount(op, ev)
	if err := s.Ledger.AppendEvent(ctx, op.Tenant, op.ID, ev); err != nil {
		s.Log.WarnContext(ctx, "audit event not recorded", "operationId", op.ID, "eventType", ev.Type, "err", err)
	}
}

// EventWhile appends ev only while op still has status (ledger.AppendEventWhile), for a step
// whose meaning depends on that status. moved is true when another actor moved the operation
// on first: nothing is recorded. Any other failure is logged, as Event's.
func (s *Stage) EventWhile(ctx context.Context, op *record.Operation, status workflow.Status, ev record.Event) (moved bool) {
	err := s.Ledger.AppendEventWhile(ctx, op.Tenant, op.ID, status, withAmount(op, ev))
	if errors.Is(err, record.ErrConflict) {
		return true
	}
	if err != nil {
		s.Log.WarnContext(ctx, "audit event not recorded", "operationId", op.ID, "eventType", ev.Type, "err", err)
	}
	return false
}

// withAmount gives ev the operation's amount when it names none: the timeline shows what each
// step was about.
func withAmount(op *record.Operation, ev record.Event) record.Event {
	if ev.Amount == "" && op.BudgetTotal != "" {
		ev.Amount, ev.Currency = op.BudgetTotal, op.Currency
	}
	return ev
}

// CallError turns a failed AdCP call into the workflow error the ASL matches: retry the same
// intent (TransientError, with the agent's retry_after) or stop (TerminalError).
func CallError(what string, err error) error {
	var ae *adcp.Error
	errors.As(err, &ae)
	switch adcp.Decide(err) {
	case adcp.DecisionRetry:
		return &workflow.TransientError{Reason: what + ": " + err.Error(), RetryAfterSeconds: int(adcp.RetryAfter(err) / time.Second)}
	default:
		code := "adcp_error"
		if ae != nil && ae.Code != "" {
			code = ae.Code
		}
		return &workflow.TerminalError{Code: code, Reason: what + ": " + err.Error()}
	}
}

// RetryAfterSpan bounds how long after its first send a create or a change keeps waiting out
// the seller's retry_after; past it a transient failure goes back to the state machine's
// retrier, which gives up after its attempts. With the agent's circuit breaker it bounds a
// seller that asks for waits forever.
const RetryAfterSpan = 10 * time.Minute

// RetryAfterWait is the wait a transient create or update failure that carries the seller's retry_after
// (a RATE_LIMITED, a SERVICE_UNAVAILABLE, a Retry-After header) asks for, as the output the
// state machine waits on before the stage again (SellerAvailable → WaitForSeller before
// CreateMediaBuy, ChangeSellerAvailable → WaitForChangeSeller before UpdateMediaBuy), nil for
// any other failure. The state machine's retrier of TransientError draws its waits with full
// jitter from 2 s up, so it would resend sooner than the seller asked; the wait is exactly
// retry_after and the resend is the same intent (same key, same bytes).
func RetryAfterWait(sellerID string, err error, created, now time.Time) *workflow.AgentUnavailable {
	after := adcp.RetryAfter(err)
	if after <= 0 || adcp.Decide(err) != adcp.DecisionRetry || created.IsZero() || now.Add(after).Sub(created) > RetryAfterSpan {
		return nil
	}
	return &workflow.AgentUnavailable{AgentID: sellerID, Role: string(adcp.RoleSeller), Since: RFC3339(now),
		RetryInSeconds: int(math.Ceil(after.Seconds()))}
}

// Unavailable turns a call the agent's circuit breaker refused (nothing was sent) into the
// wait the state machine runs before the stage again (breaker.WaitFor), recorded on the buy's
// timeline; past the buy's deadline it is a DeadlineExceededError. Any other error gives nil,
// nil.
func (s *Stage) Unavailable(ctx context.Context, op *record.Operation, cfg workflow.RunConfig, role adcp.Role, tool string, err error) (*workflow.AgentUnavailable, error) {
	w := breaker.WaitFor(err, role, tool, op.CreatedAt, s.Now(), cfg)
	if w == nil {
		return nil, nil
	}
	s.Event(ctx, op, record.Event{Type: record.EventAgentUnavailable, Actor: ActorSystem, Reason: record.Clip(w.Reason(), 500),
		Detail: record.EventDetail(w.Detail())})
	if w.Wait != nil {
		s.Log.InfoContext(ctx, "agent unavailable, waiting", "operationId", op.ID, "agent", w.Refusal.Agent, "role", role, "retryInSeconds", w.Wait.RetryInSeconds)
	}
	return w.Wait, w.Err(op.ID)
}

// FixIntent returns the operation's intent name, claimed for one send (the package's
// FixIntent over the stage's ledger, in the create stage's record layout).
func (s *Stage) FixIntent(ctx context.Context, op *record.Operation, name, tool string, build func() (adcp.Intent, error)) (*Claimed, error) {
	return FixIntent(ctx, s.Ledger, IntentRef{Tenant: op.Tenant, OperationID: op.ID, Name: name, Tool: tool}, build)
}

// ReleaseUnsent forgets the claim of a first send that provably sent nothing (the package's
// ReleaseUnsent over the stage's ledger).
func (s *Stage) ReleaseUnsent(ctx context.Context, op *record.Operation, c *Claimed, callErr error) {
	ReleaseUnsent(ctx, s.Ledger, s.Log, op.ID, c, callErr)
}

// pushToken returns the operation's webhook token, creating it once.
func (s *Stage) PushToken(ctx context.Context, op *record.Operation) (string, error) {
	stored, err := s.Ledger.GetIntent(ctx, op.Tenant, op.ID, intentPushToken)
	if err == nil {
		return string(stored.Request), nil
	}
	if !errors.Is(err, record.ErrNotFound) {
		return "", fmt.Errorf("stage: read webhook token of %s: %w", op.ID, err)
	}
	tok, err := s.newToken()
	if err != nil {
		return "", err
	}
	got, _, err := s.Ledger.PutIntent(ctx, record.Intent{Tenant: op.Tenant, OperationID: op.ID, Task: intentPushToken,
		IdempotencyKey: "push-token-" + op.ID, Request: []byte(tok), CreatedAt: s.Now()})
	if err != nil {
		return "", fmt.Errorf("stage: store webhook token of %s: %w", op.ID, err)
	}
	return string(got.Request), nil
}

const ActorSystem = "system"

func SellerActor(id string) string     { return "seller:" + id }
func GovernanceActor(id string) string { return "governance:" + id }
