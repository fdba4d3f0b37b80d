package webhook

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/webhookauth"
	"github.com/buyflow/buyflow/internal/workflow"
)

// Ledger is the part of the ledger the receiver writes; *ledger.Store satisfies it.
type Ledger interface {
	// ClaimReceipt records the delivery's receipt, in progress, before any side effect: nil
	// when this call holds it, else the receipt held (done or still in progress).
	ClaimReceipt(ctx context.Context, r record.Receipt, stale time.Duration) (*record.Receipt, error)
	// CompleteReceipt marks a receipt done once its delivery's effects are recorded.
	CompleteReceipt(ctx context.Context, sellerID, idempotencyKey string) error
	// ReleaseReceipt deletes a receipt ClaimReceipt stored, so that a delivery whose update
	// could not be recorded (a ledger failure after the receipt) is answered 5xx and applied by
	// the seller's retry instead of being taken for a duplicate.
	ReleaseReceipt(ctx context.Context, sellerID, idempotencyKey string) error
	Transition(ctx context.Context, tenant, id string, to workflow.Status, expectedVersion int64, ch record.Patch) (*record.Operation, error)
	// Advance records the update and takes the parked token the wake completes.
	Advance(ctx context.Context, op *record.Operation, to workflow.Status, ch record.Patch, take bool) (*record.Operation, error)
	AppendEvent(ctx context.Context, tenant, opID string, ev record.Event) error
	ClearTaskToken(ctx context.Context, tenant, id, token string) error
}

// operations finds an operation by its id alone: the webhook route is public and carries no
// tenant. LocateOperation says who owns the id (its tenant and seller, from the operation-id
// index), GetOperation reads it; both return an error matching record.ErrNotFound for an
// unknown one. *ledger.Store implements it.
type operations interface {
	LocateOperation(ctx context.Context, id string) (record.OperationOwner, error)
	GetOperation(ctx context.Context, tenant, id string) (*record.Operation, error)
}

// routes opens the route a webhook URL may carry (webhookroute.Param): the owner the create or
// modify stage sealed into it for the URL's operation, false for anything else.
// *webhookroute.Secret satisfies it.
type routes interface {
	Open(ctx context.Context, opID, route string) (record.OperationOwner, bool)
}

// Verifier authenticates a webhook for one seller, all but the recording of its nonce, which
// the receiver commits with its first write (webhookauth.Verifier.VerifyDeferred);
// *webhookauth.Verifier satisfies it.
type Verifier interface {
	VerifyDeferred(ctx context.Context, req webhookauth.Request) (webhookauth.Verified, error)
}

var _ Verifier = (*webhookauth.Verifier)(nil)

// tasks completes a parked Step Functions task token; *sfn.Client satisfies it. A token that is
// already gone is an error matching sfn.ErrTaskGone.
type tasks interface {
	Succeed(ctx context.Context, token string, output any) error
}

// Reports records a delivery report a seller pushed (task_type media_buy_delivery, the
// reporting_webhook the create stage registered) for an operation, under the delivery's
// idempotency key and payload hash: what it did (a snapshot written, or a redelivery with the
// payload hash the first delivery had), and an
// error matching record.ErrConflict for an operation that delivers nothing. It is its own
// dedupe (the receiver claims no receipt for a report). *delivery.Reader satisfies it (wired
// in functions/webhook).
type Reports interface {
	Push(ctx context.Context, op *record.Operation, rep *adcp.DeliveryReport, key, hash string) (moved bool, prior *record.DeliverySnapshot, err error)
}

// Config holds a Service's dependencies and settings.
type Config struct {
	Ledger     Ledger
	Operations operations
	// Routes, when set, opens the routes of the URLs the stages registered: a delivery whose
	// route opens is verified and claimed without the operation index's read.
	Routes routes
	// Verifiers holds one verifier per configured agent id (the operation's seller is used);
	// Sellers, when set instead, gives them from the agent registry (RegistryVerifiers).
	Verifiers map[string]Verifier
	Sellers   verifierSource
	// Registry, when set, says which AdCP versions a seller speaks: a seller that speaks only
	// 3.2 or later gets 3.2's 409 for a different payload under a delivery's idempotency_key;
	// the others are deduplicated by the key alone, as 3.0 and 3.1 say.
	Registry Registry
	Tasks    tasks
	// Reports records pushed delivery reports; nil answers them "ignored", as another task type.
	Reports Reports
	// RunConfig is the workflow timing used to build the wake output (default
	// workflow.DefaultRunConfig()); only the deadline and the first interval matter there.
	RunConfig workflow.RunConfig
	// PublicBaseURL, when set, is the HTTP API's public root (BUYFLOW_PUBLIC_BASE_URL): the
	// target URI is rebuilt as PublicBaseURL + the path from /v1/webhooks/adcp/ on, which is
	// exactly what the create stage registered with the seller. Without it the URI is
	// https://<domainName><rawPath>, which is wrong behind a custom domain with an API
	// mapping (API Gateway puts the stage, not the mapping key, into rawPath).
	PublicBaseURL string
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Metrics receives the receiver's metrics (WebhookSignatureFailures by Code,
	// WebhookDuplicates, ...); the function's wiring flushes it once per invocation. Nil
	// records nothing.
	Metrics *metrics.Recorder
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Service receives seller webhooks. It is safe for concurrent use.
type Service struct {
	cfg   Config
	decoy *webhookauth.Verifier
	log   *slog.Logger
}

// New returns a Service for cfg.
func New(cfg Config) (*Service, error) {
	switch {
	case cfg.Ledger == nil:
		return nil, errors.New("webhook: a ledger is required")
	case cfg.Operations == nil:
		return nil, errors.New("webhook: an operation finder is required")
	case cfg.Tasks == nil:
		return nil, errors.New("webhook: a task completer is required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.RunConfig == (workflow.RunConfig{}) {
		cfg.RunConfig = workflow.DefaultRunConfig()
	}
	cfg.PublicBaseURL = strings.TrimRight(cfg.PublicBaseURL, "/")
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	decoy, err := newDecoy(cfg.Now)
	if err != nil {
		return nil, err
	}
	return &Service{cfg: cfg, decoy: decoy, log: log}, nil
}

// newDecoy returns an RFC 9421 verifier whose only key nobody holds. A delivery for an unknown
// operation is run through it, so the answer (a 401 with the code a 9421 seller's verifier
// would give to the same headers) says nothing about which operations exist.
func newDecoy(now func() time.Time) (*webhookauth.Verifier, error) {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("webhook: decoy key: %w", err)
	}
	jwk, err := webhookauth.PublicJWK("decoy", key)
	if err != nil {
		return nil, fmt.Errorf("webhook: decoy key: %w", err)
	}
	v, err := webhookauth.New(webhookauth.Config{Mode: webhookauth.ModeRFC9421, JWKS: []byte(`{"keys":[` + string(jwk) + `]}`),
		Replay: webhookauth.NewMemoryReplayStore(0, now), AllowHTTP: true, Now: now})
	if err != nil {
		return nil, fmt.Errorf("webhook: decoy verifier: %w", err)
	}
	return v, nil
}

func (s *Service) now() time.Time { return s.cfg.Now().UTC() }
