package campaign

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/buyflow/buyflow/internal/buy"
	"github.com/buyflow/buyflow/internal/jsonnum"
	"github.com/buyflow/buyflow/internal/money"
	"github.com/buyflow/buyflow/internal/statusevent"
)

// Policy says what happens to a campaign's other legs when one fails or is rejected.
type Policy string

// The partial-failure policies.
const (
	// BestEffort keeps the legs that succeeded and reports the ones that failed.
	BestEffort Policy = "best_effort"
	// AllOrNothing cancels the placed legs at their sellers when any leg fails.
	AllOrNothing Policy = "all_or_nothing"
)

// MaxLegs bounds a campaign.
const MaxLegs = 50

// MaxBodyBytes bounds a campaign body: up to MaxLegs buys.
const MaxBodyBytes = 2 << 20

// Request is the body of POST /v1/campaigns.
type Request struct {
	// Name is a label for people; optional.
	Name string `json:"name,omitempty"`
	// Governance names the governance agent and the plan every leg belongs to.
	Governance buy.GovernanceRef `json:"governance"`
	// TotalBudget is the plan's budget: the legs may add up to it, never more.
	TotalBudget budget `json:"total_budget"`
	// Policy is the partial-failure policy.
	Policy Policy `json:"policy"`
	// RequireApproval asks for a human approval whatever the approval policy says.
	RequireApproval bool `json:"require_approval,omitempty"`
	// Legs are the media buys, one per seller (or several with distinct PO numbers).
	Legs []Leg `json:"legs"`
	// Plan, when set, is the governance plan (AdCP governance plan: brand, objectives, budget,
	// flight, policies) that buyflow pushes with sync_plans before the first check, for a
	// governance agent that expects the buyer to register it. Its plan_id is governance.plan_id;
	// its budget is the campaign's total_budget.
	Plan json.RawMessage `json:"plan,omitempty"`
	// Context is echoed by the governance agent on sync_plans (AdCP context).
	Context json.RawMessage `json:"context,omitempty"`
	// Notify asks buyflow to tell the requester, in Slack, when the campaign is submitted,
	// waits for its approval and ends (with its total and how many legs were placed).
	Notify *statusevent.Notify `json:"notify,omitempty"`
}

// budget is an amount with its currency, as the body carries it (a JSON number).
type budget struct {
	Amount   json.RawMessage `json:"amount"`
	Currency string          `json:"currency"`
}

// Leg is one seller's media buy: its create_media_buy request as POST /v1/media-buys takes it.
type Leg struct {
	SellerID string `json:"seller_id"`
	// Currency, when present, must be the campaign's: a campaign has one currency.
	Currency string          `json:"currency,omitempty"`
	MediaBuy json.RawMessage `json:"media_buy"`
}

// Validated is a campaign that passed every check.
type Validated struct {
	Request
	// Total is the campaign's total budget.
	Total money.Amount
	// Legs are the validated buys, in the order submitted; each carries its amount.
	Buys []*buy.ValidatedRequest
	// Planned is the sum of the legs' amounts (at most Total).
	Planned money.Amount
	// PayloadHash is the SHA-256 of the canonical body.
	PayloadHash string
	// SyncPlans is the sync_plans request for Plan (without its idempotency_key), schema-checked;
	// nil without a plan.
	SyncPlans map[string]json.RawMessage
}

func refuse(status int, code, field, format string, args ...any) *buy.RequestError {
	return &buy.RequestError{Status: status, Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

// Parse decodes and validates a campaign body; every refusal is a *buy.RequestError naming
// the field. Each leg goes through buy.ParseSubmit with the campaign's governance and
// currency, so a leg is refused for exactly what a single buy would be refused for.
func Parse(ctx context.Context, body []byte, agents buy.AgentLookup, schema buy.SchemaValidator) (*Validated, error) {
	if len(body) > MaxBodyBytes {
		return nil, refuse(413, "body_too_large", "", "the body is over %d bytes", MaxBodyBytes)
	}
	var numErr *jsonnum.Error
	var dupErr *jsonnum.DuplicateKeyError
	switch err := jsonnum.CheckUnique(body); {
	case errors.As(err, &numErr):
		return nil, refuse(422, "number_out_of_range", numErr.Pointer, "%v", numErr.Err)
	case errors.As(err, &dupErr):
		return nil, refuse(422, "duplicate_key", dupErr.Pointer, "%v; send each field once", dupErr)
	}
	var req Request
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return nil, buy.DecodeError(err)
	}
	if dec.More() {
		return nil, refuse(400, "malformed_json", "", "the body holds more than one JSON value")
	}
	switch req.Policy {
	case BestEffort, AllOrNothing:
	case "":
		return nil, refuse(422, "missing_field", "/policy", "policy is required: %s or %s", BestEffort, AllOrNothing)
	default:
		return nil, refuse(422, "invalid_policy", "/policy", "policy %q is not %s or %s", req.Policy, BestEffort, AllOrNothing)
	}
	if _, ok := money.MinorUnits(req.TotalBudget.Currency); !ok {
		return nil, refuse(422, "invalid_currency", "/total_budget/currency", "total_budget.currency %q is not an ISO 4217 currency code", req.TotalBudget.Currency)
	}
	currency := req.TotalBudget.Currency
	total, err := buy.AmountAt(req.TotalBudget.Amount, currency, "/total_budget/amount", "invalid_budget")
	if err != nil {
		return nil, err
	}
	if total.Minor <= 0 {
		return nil, refuse(422, "invalid_budget", "/total_budget/amount", "the total budget must be more than zero")
	}
	if req.Notify != nil {
		if err := statusevent.CheckSlackID(req.Notify.Slack); err != nil {
			return nil, refuse(422, "invalid_notify", "/notify/slack", "notify.slack: %v", err)
		}
	}
	if len(req.Legs) == 0 || len(req.Legs) > MaxLegs {
		return nil, refuse(422, "invalid_legs", "/legs", "a campaign has 1 to %d legs, not %d", MaxLegs, len(req.Legs))
	}

	out := &Validated{Request: req, Total: total, Planned: money.Amount{Currency: currency}}
	pos := map[string]int{}
	for i, leg := range req.Legs {
		field := "/legs/" + strconv.Itoa(i)
		if leg.Currency != "" && leg.Currency != currency {
			return nil, refuse(422, "currency_mismatch", field+"/currency",
				"leg %d is in %s but the campaign is in %s: a campaign has one currency", i, leg.Currency, currency)
		}
		one, err := json.Marshal(buy.SubmitRequest{
			SellerID: leg.SellerID, Governance: req.Governance, Currency: currency,
			RequireApproval: req.RequireApproval, MediaBuy: leg.MediaBuy,
		})
		if err != nil {
			return nil, fmt.Errorf("campaign: encode leg %d: %w", i, err)
		}
		parsed, err := buy.ParseSubmit(ctx, one, agents, schema)
		var re *buy.RequestError
		if errors.As(err, &re) {
			return nil, legError(re, field, i)
		}
		if err != nil {
			return nil, fmt.Errorf("campaign: leg %d: %w", i, err)
		}
		if j, dup := pos[parsed.PONumber]; dup {
			return nil, refuse(422, "duplicate_po_number", field+"/media_buy/po_number",
				"legs %d and %d both use PO number %q: each leg is its own buy and needs its own PO number", j, i, parsed.PONumber)
		}
		pos[parsed.PONumber] = i
		out.Planned = out.Planned.Add(parsed.Amount)
		if out.Planned.Minor > total.Minor {
			return nil, refuse(422, "budget_over_total", "/total_budget/amount",
				"the legs add up to at least %s %s (through leg %d) but the campaign's total_budget is %s %s",
				out.Planned.Decimal(), currency, i, total.Decimal(), currency)
		}
		out.Buys = append(out.Buys, parsed)
	}
	if len(req.Plan) > 0 {
		if out.SyncPlans, err = planRequest(req, total, schema); err != nil {
			return nil, err
		}
	}
	canon, err := buy.Canonical(body)
	if err != nil {
		return nil, fmt.Errorf("campaign: canonical body: %w", err)
	}
	sum := sha256.Sum256(canon)
	out.PayloadHash = hex.EncodeToString(sum[:])
	return out, nil
}

// planPlaceholderKey stands in for sync_plans' idempotency key while the request is
// schema-checked; the campaign's own key is fixed when the campaign is placed.
const planPlaceholderKey = "validation-placeholder-key-0000"

// planRequest builds the sync_plans request for the campaign's plan and checks it against the
// schema: its plan_id is the campaign's, its budget the campaign's total.
func planRequest(req Request, total money.Amount, schema buy.SchemaValidator) (map[string]json.RawMessage, error) {
	var plan map[string]json.RawMessage
	if err := json.Unmarshal(req.Plan, &plan); err != nil || plan == nil {
		return nil, refuse(422, "wrong_type", "/plan", "plan must be an object (the AdCP governance plan)")
	}
	if raw, ok := plan["plan_id"]; ok {
		var id string
		if json.Unmarshal(raw, &id) != nil || id != req.Governance.PlanID {
			return nil, refuse(422, "plan_mismatch", "/plan/plan_id", "plan.plan_id must equal governance.plan_id")
		}
	}
	plan["plan_id"], _ = json.Marshal(req.Governance.PlanID)
	var budget struct {
		Total    json.RawMessage `json:"total"`
		Currency string          `json:"currency"`
	}
	if raw, ok := plan["budget"]; ok && json.Unmarshal(raw, &budget) == nil {
		if budget.Currency != total.Currency {
			return nil, refuse(422, "currency_mismatch", "/plan/budget/currency", "plan.budget.currency must be the campaign's %s", total.Currency)
		}
		a, err := buy.AmountAt(budget.Total, total.Currency, "/plan/budget/total", "invalid_budget")
		if err != nil {
			return nil, err
		}
		if a != total {
			return nil, refuse(422, "budget_mismatch", "/plan/budget/total",
				"plan.budget.total is %s %s but the campaign's total_budget is %s %s; they must be equal", a.Decimal(), a.Currency, total.Decimal(), total.Currency)
		}
	}
	planBytes, err := json.Marshal(plan)
	if err != nil {
		return nil, fmt.Errorf("campaign: encode plan: %w", err)
	}
	sync := map[string]json.RawMessage{"plans": json.RawMessage("[" + string(planBytes) + "]")}
	if len(req.Context) > 0 {
		sync["context"] = req.Context
	}
	candidate := make(map[string]json.RawMessage, len(sync)+1)
	for k, v := range sync {
		candidate[k] = v
	}
	candidate["idempotency_key"], _ = json.Marshal(planPlaceholderKey)
	candBody, err := json.Marshal(candidate)
	if err != nil {
		return nil, fmt.Errorf("campaign: encode sync_plans: %w", err)
	}
	if err := schema.ValidateRequest("sync_plans", candBody); err != nil {
		var fe buy.FieldError
		if errors.As(err, &fe) {
			// The schema's pointer is into the request; the plan is its plans[0].
			field := strings.Replace(fe.FieldPointer(), "/plans/0", "/plan", 1)
			return nil, refuse(422, "schema_violation", field, "%s", fe.Error())
		}
		return nil, fmt.Errorf("campaign: validate plan: %w", err)
	}
	return sync, nil
}

// legError points a single buy's refusal into the campaign body: the buy's /media_buy/... and
// /seller_id are the leg's.
func legError(re *buy.RequestError, field string, i int) *buy.RequestError {
	out := *re
	switch {
	case strings.HasPrefix(re.Field, "/media_buy"), re.Field == "/seller_id", re.Field == "/currency":
		out.Field = field + re.Field
	case re.Field == "":
		out.Field = field
	}
	out.Message = fmt.Sprintf("leg %d: %s", i, re.Message)
	return &out
}

// ID derives the campaign id from the tenant and the Idempotency-Key.
func ID(tenant, idempotencyKey string) string {
	sum := sha256.Sum256([]byte(tenant + "\x00campaign\x00" + idempotencyKey))
	return "cp-" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:])[:26])
}

// legKey is the key leg i's operation id derives from (buy.OperationID). It holds NUL
// bytes, which no Idempotency-Key header can, so no single buy's key names a leg's operation.
func legKey(idempotencyKey string, i int) string {
	return idempotencyKey + "\x00campaign-leg\x00" + strconv.Itoa(i)
}
