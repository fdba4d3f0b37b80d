// Package agents is the agents function's use case, the operators' side of the agent
// registry (internal/registry): the IAM-only API under /v1/operator/agents that adds, updates, disables, lists and shows
// agents, each change an audit event naming the caller; the get_adcp_capabilities check on
// add and on a schedule; and the deployment's seed (the CDK context's agents, delivered by a
// CloudFormation custom resource) loaded into the store.
package agents

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/httpapi"
	"github.com/buyflow/buyflow/internal/iamarn"
	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/registry"
	"github.com/buyflow/buyflow/internal/reqsign"
	"github.com/buyflow/buyflow/internal/webhookauth"
)

// Prefix is the operator API's path prefix.
const Prefix = "/v1/operator/agents"

// Registry is the store the operator API changes; *agents.Store satisfies it.
type Registry interface {
	List(ctx context.Context) ([]registry.Record, error)
	Get(ctx context.Context, id string) (registry.Record, error)
	Add(ctx context.Context, r registry.Record, actor, action string) (registry.Record, error)
	Update(ctx context.Context, id, actor string, change registry.Change, validate func(registry.Record) error) (registry.Record, error)
	Seed(ctx context.Context, seed []adcp.Agent, actor string) ([]string, error)
	History(ctx context.Context, id string) ([]registry.Event, error)
}

// prober asks an agent what it supports; *adcp.Client satisfies it (built over the store, so
// it calls only agents the registry has).
type prober interface {
	Capabilities(ctx context.Context, agentID string) (*adcp.Capabilities, error)
	Tools(ctx context.Context, agentID string) (map[string]bool, error)
}

// secretReader returns a secret's value by name; *secrets.Store satisfies it.
type secretReader interface {
	Get(ctx context.Context, name string) ([]byte, error)
}

// Config wires the service.
type Config struct {
	Registry Registry
	Prober   prober
	// Signer is the deployment's request signer (nil: no request-signing key); a check records
	// its key id, so that an agent's record says whether buyflow signs for it.
	Signer *reqsign.Signer
	// SecretPrefix is the prefix every secret an agent names must lie under.
	SecretPrefix string
	// Secrets reads the secrets agents name (nil: their values are not checked). An add or an
	// update whose HMAC or bearer webhook secret webhookauth would refuse is refused with it.
	Secrets secretReader
	// Operators are the IAM principals allowed to call the API: user ARNs, or role ARNs that
	// stand for every session of the role (session ARNs are refused: whoever assumes a role
	// picks the session name).
	Operators []string
	// DevTenantHeader is the local stack's identity header (never set by the CDK stack).
	DevTenantHeader string
	// ProbeTimeout bounds one agent's capabilities check (default 10 s); ProbeConcurrency
	// bounds the scheduled check's parallel calls (default 8).
	ProbeTimeout     time.Duration
	ProbeConcurrency int
	Log              *slog.Logger
	// Metrics counts a recovered panic of an HTTP request (nil: not counted).
	Metrics *metrics.Recorder
}

// Service serves the operator API, the seed and the scheduled check.
type Service struct{ cfg Config }

// New returns the service.
func New(cfg Config) (*Service, error) {
	if cfg.Registry == nil || cfg.Prober == nil {
		return nil, errors.New("agents: registry and prober are required")
	}
	if err := CheckOperators(cfg.Operators); err != nil {
		return nil, err
	}
	if cfg.ProbeTimeout <= 0 {
		cfg.ProbeTimeout = 10 * time.Second
	}
	if cfg.ProbeConcurrency <= 0 {
		cfg.ProbeConcurrency = 8
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	return &Service{cfg: cfg}, nil
}

// CheckOperators refuses an operator list with anything but IAM user or role ARNs (or the
// local stack's dev: principals).
func CheckOperators(ops []string) error {
	var errs []error
	for i, op := range ops {
		if !iamarn.IsUserOrRole(op) && !iamarn.IsDevPrincipal(op) {
			errs = append(errs, fmt.Errorf("operators[%d] %q is not an IAM user or role ARN", i, op))
		}
	}
	return errors.Join(errs...)
}

// isOperator reports whether principal (as API Gateway verified it) is an operator: the
// exact user ARN, or a session of an operator role.
func (s *Service) isOperator(principal string) bool {
	if principal != "" && slices.Contains(s.cfg.Operators, principal) {
		return true
	}
	if role, ok := iamarn.RoleOfSession(principal); ok {
		return slices.Contains(s.cfg.Operators, role)
	}
	return false
}

// Shown is an agent as the API shows it, with its audit trail when one agent is asked for.
type Shown struct {
	registry.Record
	History []registry.Event `json:"history,omitempty"`
}

// List is the answer of GET /v1/operator/agents.
type List struct {
	Agents []registry.Record `json:"agents"`
}

// HandleHTTP serves the operator routes.
func (s *Service) HandleHTTP(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	caller, err := httpapi.Identify(req, s.cfg.DevTenantHeader)
	if err != nil {
		return httpapi.Error(401, "no_identity", "sign the request with SigV4 (IAM)", ""), nil
	}
	if !s.isOperator(caller.Principal) {
		return httpapi.Error(403, "not_an_operator", "your IAM identity is not one of the deployment's operators (context buyflow:operators)", ""), nil
	}
	method := strings.ToUpper(req.RequestContext.HTTP.Method)
	path := strings.TrimRight(req.RawPath, "/")
	if path != Prefix && !strings.HasPrefix(path, Prefix+"/") {
		return httpapi.Error(404, "no_route", "no such operator route: GET/POST "+Prefix, ""), nil
	}
	parts := strings.Split(strings.TrimPrefix(strings.TrimPrefix(path, Prefix), "/"), "/")
	body, err := httpapi.Body(req)
	if err != nil {
		return httpapi.Error(400, "malformed_body", "the body is not valid base64", ""), nil
	}
	var out any
	status := 200
	switch {
	case parts[0] == "" && method == "GET":
		var recs []registry.Record
		recs, err = s.cfg.Registry.List(ctx)
		out = List{Agents: append([]registry.Record{}, recs...)}
	case parts[0] == "" && method == "POST":
		status = 201
		out, err = s.add(ctx, caller.Principal, body)
	case len(parts) == 1 && method == "GET":
		out, err = s.show(ctx, parts[0])
	case len(parts) == 1 && method == "PATCH":
		out, err = s.update(ctx, caller.Principal, parts[0], body)
	case len(parts) == 2 && method == "POST" && parts[1] == "disable":
		out, err = s.setDisabled(ctx, caller.Principal, parts[0], body, true)
	case len(parts) == 2 && method == "POST" && parts[1] == "enable":
		out, err = s.setDisabled(ctx, caller.Principal, parts[0], nil, false)
	case len(parts) == 2 && method == "POST" && parts[1] == "capabilities":
		out, err = s.probe(ctx, caller.Principal, parts[0])
	default:
		return httpapi.Error(404, "no_route", "no such operator route: GET/POST "+Prefix+", GET/PATCH "+Prefix+
			"/{agent_id}, POST "+Prefix+"/{agent_id}/disable|enable|capabilities", ""), nil
	}
	if err != nil {
		return s.answerError(ctx, req.RequestContext.RequestID, err), nil
	}
	return httpapi.JSON(status, out), nil
}

func (s *Service) answerError(ctx context.Context, requestID string, err error) events.APIGatewayV2HTTPResponse {
	var ie *InputError
	switch {
	case errors.As(err, &ie):
		return httpapi.Error(ie.Status, ie.Code, ie.Message, ie.Field)
	case errors.Is(err, registry.ErrInvalid):
		return httpapi.Error(422, "invalid_agent", err.Error(), "")
	case errors.Is(err, registry.ErrUnknown):
		return httpapi.Error(404, "not_found", "no agent with that id", "")
	case errors.Is(err, registry.ErrExists):
		return httpapi.Error(409, "agent_exists", "an agent with that id exists: update it (PATCH) instead", "/id")
	case errors.Is(err, registry.ErrConflict):
		return httpapi.Error(409, "conflict", "the agent changed meanwhile; read it again and retry", "")
	case errors.Is(err, record.ErrContention):
		// The registry already sent the write again while other writes raced it; nothing applied.
		s.cfg.Log.WarnContext(ctx, "operator request lost a write race", "requestId", requestID, "err", err)
		resp := httpapi.Error(409, httpapi.CodeConcurrentWrite, "other writes were changing the registry at the same moment and this change was not applied; send it again", "")
		resp.Headers["Retry-After"] = "1"
		return resp
	}
	s.cfg.Log.ErrorContext(ctx, "operator request failed", "requestId", requestID, "err", err)
	return httpapi.Error(500, "internal", "buyflow could not complete the request; it is safe to retry (request "+requestID+")", "")
}

func (s *Service) validate(r registry.Record) error { return registry.Validate(r, s.cfg.SecretPrefix) }

// validateWith is validate plus the check of the agent's webhook secret, for an add or an
// update (one that names a new secret, or an operator's retry after fixing it).
func (s *Service) validateWith(ctx context.Context) func(registry.Record) error {
	return func(r registry.Record) error {
		if err := s.validate(r); err != nil {
			return err
		}
		return s.checkWebhookSecret(ctx, r.Agent)
	}
}

// checkWebhookSecret refuses an agent whose HMAC or bearer webhook secret exists and is one
// webhookauth refuses: every webhook of the agent would otherwise be turned away until someone
// notices. A secret that cannot be read is not refused here (it may be created next; the
// webhook function then says what is wrong with it).
func (s *Service) checkWebhookSecret(ctx context.Context, a adcp.Agent) error {
	if s.cfg.Secrets == nil || a.Webhook == nil {
		return nil
	}
	field, ref := "webhook.hmac_secret_ref", a.Webhook.HMACSecretRef
	if a.Webhook.Mode == adcp.WebhookBearer {
		field, ref = "webhook.bearer_secret_ref", a.Webhook.BearerSecretRef
	}
	if ref == "" {
		return nil
	}
	raw, err := s.cfg.Secrets.Get(ctx, ref)
	if err != nil {
		return nil // unreadable is not refused: see above
	}
	for i, secret := range webhookauth.StoredSecrets(raw) {
		if err := webhookauth.CheckSecret(secret); err != nil {
			which := "its value"
			if i > 0 {
				which = "its previous value"
			}
			// The error names the secret and its length, never its value.
			why := strings.TrimPrefix(err.Error(), webhookauth.ErrConfig.Error()+": ")
			return fmt.Errorf("%w: %s %s: %s is refused (%s): put a random secret of at least %d bytes in it",
				registry.ErrInvalid, field, ref, which, why, webhookauth.MinSecretBytes)
		}
	}
	return nil
}

func (s *Service) add(ctx context.Context, actor string, body []byte) (registry.Record, error) {
	r, err := ParseNewAgent(body, s.cfg.SecretPrefix)
	if err != nil {
		return registry.Record{}, err
	}
	if err := s.checkWebhookSecret(ctx, r.Agent); err != nil {
		return registry.Record{}, err
	}
	if _, err := s.cfg.Registry.Add(ctx, r, actor, registry.ActionAdded); err != nil {
		return registry.Record{}, err
	}
	// Checked once it is stored: the prober calls only agents the registry has. A failed
	// check is recorded on the agent, not a refusal (the seller may be down for a minute).
	return s.probe(ctx, actor, r.ID)
}

func (s *Service) show(ctx context.Context, id string) (Shown, error) {
	r, err := s.cfg.Registry.Get(ctx, id)
	if err != nil {
		return Shown{}, err
	}
	h, err := s.cfg.Registry.History(ctx, id)
	if err != nil {
		return Shown{}, err
	}
	return Shown{Record: r, History: h}, nil
}

func (s *Service) update(ctx context.Context, actor, id string, body []byte) (registry.Record, error) {
	change, err := ParsePatch(body)
	if err != nil {
		return registry.Record{}, err
	}
	r, err := s.cfg.Registry.Update(ctx, id, actor, change, s.validateWith(ctx))
	if err != nil {
		return registry.Record{}, err
	}
	return s.probe(ctx, actor, r.ID)
}

func (s *Service) setDisabled(ctx context.Context, actor, id string, body []byte, disabled bool) (registry.Record, error) {
	var why Reason
	if len(strings.TrimSpace(string(body))) > 0 {
		if err := decodeStrict(body, &why); err != nil {
			return registry.Record{}, err
		}
	}
	return s.cfg.Registry.Update(ctx, id, actor, func(r *registry.Record) (string, string, error) {
		r.Disabled, r.DisabledReason = disabled, why.Reason
		if disabled {
			return registry.ActionDisabled, why.Reason, nil
		}
		return registry.ActionEnabled, "", nil
	}, s.validate)
}

// probe calls get_adcp_capabilities and tools/list at agent id and records what buyflow
// needs; a failure is recorded as the check's error, keeping the previous values.
func (s *Service) probe(ctx context.Context, actor, id string) (registry.Record, error) {
	pctx, cancel := context.WithTimeout(ctx, s.cfg.ProbeTimeout)
	defer cancel()
	now := time.Now().UTC()
	caps, err := s.cfg.Prober.Capabilities(pctx, id)
	var tools map[string]bool
	if err == nil {
		tools, err = s.cfg.Prober.Tools(pctx, id)
	}
	return s.cfg.Registry.Update(ctx, id, actor, func(r *registry.Record) (string, string, error) {
		next := &registry.Capabilities{CheckedAt: now}
		if r.Capabilities != nil {
			*next = *r.Capabilities
			next.CheckedAt = now
		}
		if err != nil {
			next.Error = err.Error()
			r.Capabilities = next
			return registry.ActionCapabilities, "check failed: " + next.Error, nil
		}
		replay, _ := caps.ReplayWindow()
		next.SupportedVersions, next.ReplayTTLSeconds, next.WebhookSigning, next.RequestSigning, next.Error =
			caps.SupportedVersions, int(replay/time.Second), caps.WebhookSigning, caps.RequestSigning, ""
		next.SigningKeyID = ""
		if s.cfg.Signer != nil {
			next.SigningKeyID = s.cfg.Signer.KeyID
		}
		// The version the functions will speak, chosen as they choose it (adcp.Negotiate), with
		// the pin as it is now; a pin the agent cannot honour fails the check.
		next.WireVersion = ""
		if next.WireVersion, err = adcp.Negotiate(r.AdCPVersion, caps.SupportedVersions); err != nil {
			next.Error = err.Error()
			r.Capabilities = next
			return registry.ActionCapabilities, "check failed: " + next.Error, nil
		}
		next.Tools = next.Tools[:0:0]
		for t := range tools {
			next.Tools = append(next.Tools, t)
		}
		slices.Sort(next.Tools)
		r.Capabilities = next
		return registry.ActionCapabilities, fmt.Sprintf("versions %v (speaks %s), replay window %ds, %d tools; %s", next.SupportedVersions, next.WireVersion, next.ReplayTTLSeconds, len(next.Tools), SigningSummary(*r)), nil
	}, nil)
}

// SigningSummary says, in a line, whether the agent requires signed requests and whether
// buyflow signs for it, as of its last check.
func SigningSummary(r registry.Record) string {
	if r.Capabilities == nil {
		return "request signing: not checked yet"
	}
	c, err := reqsign.ParseCapability(r.Capabilities.RequestSigning)
	if err != nil {
		return "request signing: the agent's request_signing block is unreadable (" + err.Error() + ")"
	}
	var requires string
	switch {
	case c.RequiresAny():
		requires = "required for " + strings.Join(append(append([]string{}, c.RequiredFor...), c.ProtocolMethodsRequiredFor...), ", ")
	case c.Supported:
		requires = "supported, not required"
	default:
		requires = "not required"
	}
	signs := "buyflow signs what it requires with key " + r.Capabilities.SigningKeyID
	if r.SignRequests {
		signs = "buyflow signs every request (sign_requests) with key " + r.Capabilities.SigningKeyID
	}
	if r.Capabilities.SigningKeyID == "" {
		signs = "buyflow has no request-signing key"
		if c.Requires(adcp.ToolCreateMediaBuy) {
			signs += ": buys to it are refused at submit"
		}
	}
	return "request signing " + requires + "; " + signs
}

// RefreshAll checks every enabled agent's capabilities (the schedule's job), a few at a
// time; one agent's failure is recorded on it and does not stop the others.
func (s *Service) RefreshAll(ctx context.Context) (checked, failed int, err error) {
	recs, err := s.cfg.Registry.List(ctx)
	if err != nil {
		return 0, 0, err
	}
	var ids []string
	for _, r := range recs {
		if !r.Disabled {
			ids = append(ids, r.ID)
		}
	}
	s.probeAll(ctx, ActorSchedule, ids, func(id string, got registry.Record, perr error) {
		checked++
		if perr != nil || (got.Capabilities != nil && got.Capabilities.Error != "") {
			failed++
			s.cfg.Log.WarnContext(ctx, "capabilities check failed", "agent", id, "err", errors.Join(perr, errText(got)))
		}
	})
	return checked, failed, nil
}

// probeAll checks the capabilities of every agent in ids, ProbeConcurrency at a time, each
// bounded by ProbeTimeout, and hands each result to done (called under a lock, one at a time).
func (s *Service) probeAll(ctx context.Context, actor string, ids []string, done func(id string, got registry.Record, err error)) {
	var mu sync.Mutex
	sem := make(chan struct{}, s.cfg.ProbeConcurrency)
	var wg sync.WaitGroup
	for _, id := range ids {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			got, err := s.probe(ctx, actor, id)
			mu.Lock()
			defer mu.Unlock()
			done(id, got, err)
		})
	}
	wg.Wait()
}

func errText(r registry.Record) error {
	if r.Capabilities == nil || r.Capabilities.Error == "" {
		return nil
	}
	return errors.New(r.Capabilities.Error)
}

// Actors that are not people.
const (
	ActorDeploy   = "deploy"
	ActorSchedule = "schedule"
)

// ParseSeed decodes a deployment's seed (the agents document of the CDK context,
// internal/adcp's RegistryConfig) with the same checks as an add; an empty seed is no agents.
func ParseSeed(doc, secretPrefix string) ([]adcp.Agent, error) {
	if strings.TrimSpace(doc) == "" {
		return nil, nil
	}
	reg, err := adcp.ParseRegistry([]byte(doc))
	if err != nil {
		return nil, err
	}
	var out []adcp.Agent
	var errs []error
	for _, id := range reg.IDs() {
		a, _ := reg.Agent(id)
		if err := registry.Validate(registry.Record{Agent: a}, secretPrefix); err != nil {
			errs = append(errs, fmt.Errorf("agent %s: %w", id, err))
		}
		out = append(out, a)
	}
	return out, errors.Join(errs...)
}

// LoadSeed adds the seed's agents the store does not have (operators' changes to the others
// stay) and checks the new ones' capabilities.
func (s *Service) LoadSeed(ctx context.Context, doc string) ([]string, error) {
	seed, err := ParseSeed(doc, s.cfg.SecretPrefix)
	if err != nil {
		return nil, err
	}
	added, err := s.cfg.Registry.Seed(ctx, seed, ActorDeploy)
	if err != nil {
		return added, err
	}
	// In parallel, as the scheduled check does: the deploy waits on this answer, and one
	// agent that hangs must not hold it for ProbeTimeout per agent in turn.
	s.probeAll(ctx, ActorDeploy, added, func(id string, _ registry.Record, err error) {
		if err != nil {
			s.cfg.Log.WarnContext(ctx, "capabilities check of a seeded agent not recorded", "agent", id, "err", err)
		}
	})
	return added, nil
}
