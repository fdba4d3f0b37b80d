package buy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/jsonnum"
	"github.com/buyflow/buyflow/internal/money"
	"github.com/buyflow/buyflow/internal/registry"
	"github.com/buyflow/buyflow/internal/statusevent"
)

// SubmitRequest is the body of POST /v1/media-buys.
type SubmitRequest struct {
	// SellerID names a configured seller agent.
	SellerID string `json:"seller_id"`
	// Governance names the campaign's governance agent and plan.
	Governance GovernanceRef `json:"governance"`
	// Currency is the ISO 4217 code of every amount in MediaBuy.
	Currency string `json:"currency"`
	// RequireApproval asks for a human approval whatever the policy says.
	RequireApproval bool `json:"require_approval,omitempty"`
	// Notify asks buyflow to tell the requester, in Slack, when the buy waits for an approval,
	// is approved or rejected, placed, failed or canceled.
	Notify *statusevent.Notify `json:"notify,omitempty"`
	// MediaBuy is the AdCP create_media_buy request without the fields buyflow owns
	// (idempotency_key, push_notification_config, governance_context, adcp_version).
	MediaBuy json.RawMessage `json:"media_buy"`
}

// GovernanceRef names a governance agent and the plan the buy belongs to.
type GovernanceRef struct {
	AgentID string `json:"agent_id"`
	PlanID  string `json:"plan_id"`
}

// ValidatedRequest is a SubmitRequest that passed every check, with what buyflow derived.
type ValidatedRequest struct {
	SubmitRequest
	// PONumber is media_buy.po_number: with the tenant and the seller, the business key.
	PONumber string
	// Amount is the amount of the buy (see buyAmount): what policy, governance, the approver,
	// the ledger and the timeline all see.
	Amount money.Amount
	// PayloadHash is the SHA-256 of the canonical request: the same key with another hash is
	// a conflict.
	PayloadHash string
	// refusal is set when an agent the buy names is disabled: the request is valid (a replay
	// of an accepted one is answered as before) but a new buy is refused.
	refusal *RequestError
}

// Refusal is why a new buy of this valid request is refused (an agent it names is disabled),
// or nil. It is checked under the Idempotency-Key claim, not at parse time: a retry of a
// request accepted before the agent was disabled has its answer replayed; a new one is
// refused. Placer checks it before it places anything.
func (r *ValidatedRequest) Refusal() *RequestError { return r.refusal }

// RequestError is a submit request that buyflow refuses; the HTTP layer answers it with
// Status, a machine-readable Code, the offending Field (a JSON pointer into the body) and a
// message a person understands.
type RequestError struct {
	Status  int
	Code    string
	Field   string
	Message string
}

func (e *RequestError) Error() string {
	if e.Field != "" {
		return fmt.Sprintf("%s at %s: %s", e.Code, e.Field, e.Message)
	}
	return e.Code + ": " + e.Message
}

// Problem is the answer to the refusal: Status and the API's problem body (an
// httpapi.Refusal).
func (e *RequestError) Problem() (int, api.ProblemDetail) {
	return e.Status, api.ProblemDetail{Code: e.Code, Message: e.Message, Field: e.Field}
}

func badRequest(code, field, format string, args ...any) *RequestError {
	return &RequestError{Status: 400, Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

func unprocessable(code, field, format string, args ...any) *RequestError {
	return &RequestError{Status: 422, Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

// MaxBodyBytes bounds a submit body.
const MaxBodyBytes = 256 << 10

// reservedFields are create_media_buy fields buyflow sets itself.
var reservedFields = []string{"idempotency_key", "push_notification_config", "governance_context", "adcp_version"}

// SchemaValidator validates an AdCP request body against the spec's schemas; it returns an
// error carrying the offending JSON pointer ([FieldError]) for a violation.
type SchemaValidator interface {
	ValidateRequest(tool string, body []byte) error
}

// FieldError is implemented by schema errors that can name the offending field.
type FieldError interface {
	error
	FieldPointer() string
}

// Agent is what submit needs to know of a configured agent.
type Agent struct {
	Role string // "seller" or "governance"
	// Disabled agents take no new buys (their open buys finish).
	Disabled bool
	// Unsignable is a seller whose last capabilities check says it requires create_media_buy
	// signed while this deployment has no request-signing key: nothing could be sent to it.
	Unsignable bool
}

// AgentLookup tells what a configured agent id names. ok is false for an id the registry
// does not have; an error means the registry could not be read (a temporary failure, never
// reported as an unknown agent).
type AgentLookup func(ctx context.Context, id string) (a Agent, ok bool, err error)

// currentAgents reads an agent as stored now; the registry's cache (internal/registry)
// satisfies it.
type currentAgents interface {
	Current(ctx context.Context, id string) (registry.Record, error)
}

// RegistryLookup answers AgentLookup from the agent registry, reading each agent as stored now:
// a disable stops new buys at once, not after the cache's TTL. canSign says whether the
// deployment has a request-signing key.
func RegistryLookup(r currentAgents, canSign bool) AgentLookup {
	return func(ctx context.Context, id string) (Agent, bool, error) {
		a, err := r.Current(ctx, id)
		if errors.Is(err, registry.ErrUnknown) {
			return Agent{}, false, nil
		}
		if err != nil {
			return Agent{}, false, err
		}
		return Agent{Role: string(a.Role), Disabled: a.Disabled, Unsignable: !canSign && a.RequiresSignedCreate()}, true, nil
	}
}

// placeholderKey stands in for the seller idempotency key while the buyer's media_buy is
// schema-checked; the real key is generated once per intent by the create stage.
const placeholderKey = "validation-placeholder-key-0000"

// ParseSubmit decodes and validates a submit body. Every refusal is a *RequestError.
func ParseSubmit(ctx context.Context, body []byte, agents AgentLookup, schema SchemaValidator) (*ValidatedRequest, error) {
	if len(body) > MaxBodyBytes {
		return nil, &RequestError{Status: 413, Code: "body_too_large", Message: fmt.Sprintf("the body is over %d bytes", MaxBodyBytes)}
	}
	// Numbers first: the decoders and the schema library below read them into big numbers,
	// and one of them panics on an exponent math/big refuses. A key written twice is refused
	// too: the seller's or governance agent's parser may keep the other one.
	var numErr *jsonnum.Error
	var dupErr *jsonnum.DuplicateKeyError
	switch err := jsonnum.CheckUnique(body); {
	case errors.As(err, &numErr):
		return nil, unprocessable("number_out_of_range", numErr.Pointer, "%v", numErr.Err)
	case errors.As(err, &dupErr):
		return nil, unprocessable("duplicate_key", dupErr.Pointer, "%v; send each field once", dupErr)
	}
	var req SubmitRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return nil, DecodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, badRequest("malformed_json", "", "the body must be one JSON object")
	}

	if req.SellerID == "" {
		return nil, unprocessable("missing_field", "/seller_id", "seller_id is required")
	}
	seller, ok, err := agents(ctx, req.SellerID)
	if err != nil {
		return nil, fmt.Errorf("buy: look up seller %s: %w", req.SellerID, err)
	}
	if !ok || seller.Role != "seller" {
		return nil, unprocessable("unknown_seller", "/seller_id", "seller %q is not a configured seller agent", req.SellerID)
	}
	var refusal *RequestError
	switch {
	case seller.Disabled:
		refusal = unprocessable("seller_disabled", "/seller_id", "seller %q is disabled: it takes no new buys (its open buys finish)", req.SellerID)
	case seller.Unsignable:
		refusal = unprocessable("seller_requires_signing", "/seller_id", "seller %q requires create_media_buy to be signed (request_signing.required_for) and this deployment has no request-signing key; nothing was sent (see docs/ARCHITECTURE.md, Request signing)", req.SellerID)
	}
	if req.Governance.AgentID == "" {
		return nil, unprocessable("missing_field", "/governance/agent_id", "governance.agent_id is required: every buy is checked before any spend")
	}
	gov, ok, err := agents(ctx, req.Governance.AgentID)
	if err != nil {
		return nil, fmt.Errorf("buy: look up governance agent %s: %w", req.Governance.AgentID, err)
	}
	if !ok || gov.Role != "governance" {
		return nil, unprocessable("unknown_governance_agent", "/governance/agent_id", "%q is not a configured governance agent", req.Governance.AgentID)
	}
	if gov.Disabled && refusal == nil {
		refusal = unprocessable("governance_agent_disabled", "/governance/agent_id", "governance agent %q is disabled: it checks no new buys", req.Governance.AgentID)
	}
	if req.Governance.PlanID == "" {
		return nil, unprocessable("missing_field", "/governance/plan_id", "governance.plan_id is required")
	}
	if req.Notify != nil {
		if err := statusevent.CheckSlackID(req.Notify.Slack); err != nil {
			return nil, unprocessable("invalid_notify", "/notify/slack", "notify.slack: %v", err)
		}
	}
	if _, ok := money.MinorUnits(req.Currency); !ok {
		return nil, unprocessable("invalid_currency", "/currency", "%q is not an ISO 4217 currency code (such as USD, EUR or JPY)", req.Currency)
	}
	if len(bytes.TrimSpace(req.MediaBuy)) == 0 || bytes.TrimSpace(req.MediaBuy)[0] != '{' {
		return nil, unprocessable("missing_field", "/media_buy", "media_buy must be the create_media_buy request object")
	}

	var mb map[string]json.RawMessage
	if err := json.Unmarshal(req.MediaBuy, &mb); err != nil {
		return nil, badRequest("malformed_json", "/media_buy", "media_buy is not a JSON object: %v", err)
	}
	for _, f := range reservedFields {
		if _, ok := mb[f]; ok {
			return nil, unprocessable("reserved_field", "/media_buy/"+f, "%s is set by buyflow; leave it out", f)
		}
	}
	if raw, ok := mb["plan_id"]; ok {
		var plan string
		if json.Unmarshal(raw, &plan) != nil || plan != req.Governance.PlanID {
			return nil, unprocessable("plan_mismatch", "/media_buy/plan_id", "media_buy.plan_id must equal governance.plan_id")
		}
	}
	var po string
	if raw, ok := mb["po_number"]; !ok || json.Unmarshal(raw, &po) != nil || strings.TrimSpace(po) == "" {
		return nil, unprocessable("missing_field", "/media_buy/po_number", "media_buy.po_number is required: it keys the one-active-buy lock")
	}

	// Schema-check what will be sent, with buyflow's fields in place.
	candidate := make(map[string]json.RawMessage, len(mb)+2)
	for k, v := range mb {
		candidate[k] = v
	}
	candidate["idempotency_key"], _ = json.Marshal(placeholderKey)
	candidate["plan_id"], _ = json.Marshal(req.Governance.PlanID)
	candBody, err := json.Marshal(candidate)
	if err != nil {
		return nil, fmt.Errorf("buy: marshal candidate request: %w", err)
	}
	if err := schema.ValidateRequest("create_media_buy", candBody); err != nil {
		var fe FieldError
		if errors.As(err, &fe) {
			return nil, unprocessable("schema_violation", "/media_buy"+fe.FieldPointer(), "%s", fe.Error())
		}
		return nil, fmt.Errorf("buy: validate media_buy: %w", err)
	}

	amount, err := buyAmount(mb, req.Currency)
	if err != nil {
		return nil, err
	}

	canon, err := Canonical(body)
	if err != nil {
		return nil, fmt.Errorf("buy: canonical body: %w", err)
	}
	sum := sha256.Sum256(canon)
	return &ValidatedRequest{
		SubmitRequest: req,
		PONumber:      po,
		Amount:        amount,
		PayloadHash:   hex.EncodeToString(sum[:]),
		refusal:       refusal,
	}, nil
}

// Canonical re-encodes JSON with sorted object keys and no insignificant space, so two bodies
// that differ only in layout hash alike.
func Canonical(body []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(v) // maps marshal with sorted keys
}

// DecodeError turns a JSON decoding error into the refusal that names what is wrong.
func DecodeError(err error) *RequestError {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return badRequest("malformed_json", "", "the body is not valid JSON (offset %d)", syn.Offset)
	case errors.As(err, &typ):
		return unprocessable("wrong_type", "/"+strings.ReplaceAll(typ.Field, ".", "/"), "%s must be a %s", typ.Field, typ.Type)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("malformed_json", "", "the body is empty or truncated")
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return unprocessable("unknown_field", "/"+name, "unknown field %q", name)
	}
	return badRequest("malformed_json", "", "the body could not be read: %v", err)
}
