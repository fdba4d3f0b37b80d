package buy

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
	"github.com/buyflow/buyflow/internal/charclass"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/workflow"
)

// placementLedger is the part of the ledger placing a buy needs.
type placementLedger interface {
	AcquireLock(ctx context.Context, name, owner string, ttl time.Duration) (record.Lease, error)
	ReleaseLock(ctx context.Context, l record.Lease) error
	CreateOperation(ctx context.Context, op record.Operation) (*record.Operation, error)
}

// Executions starts workflow executions under deterministic names.
type Executions interface {
	Start(ctx context.Context, name string, input any) (string, error)
}

// PlaceConfig is what every placed buy's execution is given.
type PlaceConfig struct {
	// Run is the timing of every execution (tests shrink it).
	Run workflow.RunConfig
	// StateMachineARN is the MediaBuy state machine; it travels in each execution's input so
	// the wait loop can continue as a new execution.
	StateMachineARN string
	// LockTTL bounds how long a buy holds its business key when nothing releases it (the
	// workflow releases it when the operation ends). Zero means the longest a run can take
	// (approval timeout plus seller deadline) and a day.
	LockTTL time.Duration
}

// Placer places validated buys: the business-key lock, then the operation.
type Placer struct {
	ledger placementLedger
	cfg    PlaceConfig
}

// NewPlacer returns a Placer.
func NewPlacer(l placementLedger, cfg PlaceConfig) *Placer {
	if cfg.LockTTL <= 0 {
		cfg.LockTTL = time.Duration(cfg.Run.ApprovalTimeoutSeconds+cfg.Run.DeadlineSeconds)*time.Second + 24*time.Hour
	}
	return &Placer{ledger: l, cfg: cfg}
}

// OperationID derives the operation id from the tenant and the Idempotency-Key, so that every
// retry of one request, even after a partial failure, names the same operation, business-key
// lock owner and execution.
func OperationID(tenant, idempotencyKey string) string {
	sum := sha256.Sum256([]byte(tenant + "\x00" + idempotencyKey))
	return "mb-" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:])[:26])
}

// ValidOperationID accepts an operation id as the buy routes' paths name it: 1–64 of
// [A-Za-z0-9_-], which OperationID's ids are. A path that is not one is refused before any read.
func ValidOperationID(id string) bool { return operationIDChars.Span(id, 1, 64) }

var operationIDChars = charclass.Of("A-Za-z0-9_-")

// Placed is a buy whose operation exists, and the execution that is to run it.
type Placed struct {
	api.Submitted
	ExecutionName string
	Input         workflow.ExecutionInput
}

// Place places one buy under the operation id its key derives and returns the execution that
// is to run it. Run it under the request's Idempotency-Key claim (Once): a retry converges on
// the same operation.
func (p *Placer) Place(ctx context.Context, c Caller, key string, req *ValidatedRequest) (Placed, error) {
	out, err := p.PlaceAll(ctx, c, []string{key}, []*ValidatedRequest{req})
	if err != nil {
		return Placed{}, err
	}
	return out[0], nil
}

// PlaceAll places buys that are submitted together (the legs of a campaign), each under the
// operation id its key derives, and returns the executions that are to run them: the caller's
// own workflow starts them. Every business-key lock is taken before any operation is created,
// and the ones taken are released when another is held, so a refused group leaves no buy
// behind. A retry with the same keys converges on the same operations.
func (p *Placer) PlaceAll(ctx context.Context, c Caller, keys []string, reqs []*ValidatedRequest) ([]Placed, error) {
	if len(keys) != len(reqs) {
		return nil, fmt.Errorf("buy: place all: %d keys for %d requests", len(keys), len(reqs))
	}
	for _, req := range reqs {
		if re := req.Refusal(); re != nil {
			return nil, re // nothing is locked or written yet
		}
	}
	leases := make([]record.Lease, 0, len(reqs))
	for i, req := range reqs {
		l, err := p.lock(ctx, c, OperationID(c.Tenant, keys[i]), req)
		if err != nil {
			for _, taken := range leases {
				if rerr := p.ledger.ReleaseLock(ctx, taken); rerr != nil {
					err = errors.Join(err, fmt.Errorf("buy: release lock: %w", rerr))
				}
			}
			return nil, err
		}
		leases = append(leases, l)
	}
	out := make([]Placed, len(reqs))
	for i, req := range reqs {
		placed, err := p.record(ctx, c, OperationID(c.Tenant, keys[i]), req)
		if err != nil {
			return nil, err
		}
		out[i] = placed
	}
	return out, nil
}

// lock takes the business-key lock of one buy: one active buy per (tenant, seller, PO number).
func (p *Placer) lock(ctx context.Context, c Caller, id string, req *ValidatedRequest) (record.Lease, error) {
	lockName := record.BusinessKeyLock(c.Tenant, req.SellerID, req.PONumber)
	l, err := p.ledger.AcquireLock(ctx, lockName, id, p.cfg.LockTTL)
	if err != nil {
		var held *record.LockHeldError
		if errors.As(err, &held) {
			return record.Lease{}, &RequestError{Status: 409, Code: "active_buy_exists", Field: "/media_buy/po_number",
				Message: fmt.Sprintf("media buy %s is still active for seller %s and PO number %s; wait for it to end or use another PO number",
					held.Holder.Owner, req.SellerID, req.PONumber)}
		}
		return record.Lease{}, fmt.Errorf("buy: lock business key: %w", err)
	}
	return l, nil
}

// record creates the operation (a retry finds it created) and names its execution.
func (p *Placer) record(ctx context.Context, c Caller, id string, req *ValidatedRequest) (Placed, error) {
	stored, err := json.Marshal(req.SubmitRequest)
	if err != nil {
		return Placed{}, fmt.Errorf("buy: encode request: %w", err)
	}
	op := record.Operation{
		ID: id, Tenant: c.Tenant, Status: workflow.StatusRequested,
		SellerID: req.SellerID, GovernanceAgentID: req.Governance.AgentID, PlanID: req.Governance.PlanID,
		PONumber: req.PONumber, BudgetTotal: req.Amount.Decimal(), Currency: req.Currency,
		Requester: c.Principal, RequireApproval: req.RequireApproval,
		Request: stored, ExecutionName: workflow.ExecutionName(id, 0),
	}
	if req.Notify != nil {
		op.NotifySlack = req.Notify.Slack
	}
	if _, err := p.ledger.CreateOperation(ctx, op); err != nil && !errors.Is(err, record.ErrConflict) {
		return Placed{}, fmt.Errorf("buy: create operation: %w", err)
	}
	return Placed{
		Submitted:     api.Submitted{OperationID: id, Status: string(workflow.StatusRequested), Links: LinksFor(id)},
		ExecutionName: op.ExecutionName,
		Input:         workflow.ExecutionInput{OperationID: id, Tenant: c.Tenant, Config: p.cfg.Run, StateMachineARN: p.cfg.StateMachineARN},
	}, nil
}
