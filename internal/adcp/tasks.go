package adcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// AccountRef is core/account-ref.json: either AccountID, or Brand+Operator
// (never both).
type AccountRef struct {
	AccountID string    `json:"account_id,omitempty"`
	Brand     *BrandRef `json:"brand,omitempty"`
	Operator  string    `json:"operator,omitempty"`
	Sandbox   *bool     `json:"sandbox,omitempty"`
}

// BrandRef is core/brand-ref.json (the fields buyflow sets).
type BrandRef struct {
	Domain  string `json:"domain"`
	BrandID string `json:"brand_id,omitempty"`
}

// money is {amount, currency} as used by total_budget in requests. Amounts are JSON numbers
// kept as written (exact decimals), never floats.
type money struct {
	Amount   json.Number `json:"amount"`
	Currency string      `json:"currency"`
}

// formatID is core/format-id.json.
type formatID struct {
	AgentURL string `json:"agent_url"`
	ID       string `json:"id"`
}

// PushNotificationConfig is core/push-notification-config.json.
type PushNotificationConfig struct {
	URL         string          `json:"url"`
	OperationID string          `json:"operation_id,omitempty"`
	Token       string          `json:"token,omitempty"`
	Auth        json.RawMessage `json:"authentication,omitempty"` // legacy HMAC/Bearer opt-in
}

// ReportingWebhook is core/reporting-webhook.json: where a seller that pushes delivery reports
// (capabilities media_buy.reporting_delivery_methods "webhook") posts them for a buy.
type ReportingWebhook struct {
	URL   string `json:"url"`
	Token string `json:"token,omitempty"`
	// Authentication is required in AdCP 3.x (the legacy Bearer or HMAC-SHA256 opt-in).
	Authentication     WebhookAuthentication `json:"authentication"`
	ReportingFrequency string                `json:"reporting_frequency"` // hourly, daily or monthly
}

// WebhookAuthentication is the legacy authentication of a webhook registration: exactly one
// scheme ("Bearer" or "HMAC-SHA256") and its credentials (32 characters or more).
type WebhookAuthentication struct {
	Schemes     []string `json:"schemes"`
	Credentials string   `json:"credentials"`
}

// PackageRequest is media-buy/package-request.json (the fields buyflow sets;
// Context is the per-package echo, e.g. {"buyer_ref": "..."}).
type PackageRequest struct {
	ProductID       string          `json:"product_id,omitempty"`
	PricingOptionID string          `json:"pricing_option_id,omitempty"`
	Budget          json.Number     `json:"budget"`
	BidPrice        json.Number     `json:"bid_price,omitempty"`
	Pacing          string          `json:"pacing,omitempty"`
	Impressions     *float64        `json:"impressions,omitempty"`
	StartTime       string          `json:"start_time,omitempty"`
	EndTime         string          `json:"end_time,omitempty"`
	FormatIDs       []formatID      `json:"format_ids,omitempty"`
	Targeting       json.RawMessage `json:"targeting_overlay,omitempty"`
	Context         json.RawMessage `json:"context,omitempty"`
	Ext             json.RawMessage `json:"ext,omitempty"`
}

// CreateMediaBuyRequest is media-buy/create-media-buy-request.json plus the
// envelope fields buyflow sends flat beside it.
type CreateMediaBuyRequest struct {
	IdempotencyKey         string                  `json:"idempotency_key,omitempty"`
	Account                AccountRef              `json:"account"`
	Brand                  BrandRef                `json:"brand"`
	StartTime              string                  `json:"start_time,omitempty"` // "asap" or RFC 3339
	EndTime                string                  `json:"end_time,omitempty"`
	Packages               []PackageRequest        `json:"packages,omitempty"`
	ProposalID             string                  `json:"proposal_id,omitempty"`
	TotalBudget            *money                  `json:"total_budget,omitempty"`
	PlanID                 string                  `json:"plan_id,omitempty"`
	PONumber               string                  `json:"po_number,omitempty"`
	Paused                 *bool                   `json:"paused,omitempty"`
	GovernanceContext      string                  `json:"governance_context,omitempty"`
	PushNotificationConfig *PushNotificationConfig `json:"push_notification_config,omitempty"`
	ReportingWebhook       *ReportingWebhook       `json:"reporting_webhook,omitempty"`
	Context                json.RawMessage         `json:"context,omitempty"`
	Ext                    json.RawMessage         `json:"ext,omitempty"`
}

// UpdateMediaBuyRequest is media-buy/update-media-buy-request.json. Set
// Canceled (with CancellationReason) to cancel the buy.
type UpdateMediaBuyRequest struct {
	IdempotencyKey         string                  `json:"idempotency_key,omitempty"`
	Account                AccountRef              `json:"account"`
	MediaBuyID             string                  `json:"media_buy_id,omitempty"`
	Revision               *int                    `json:"revision,omitempty"`
	Paused                 *bool                   `json:"paused,omitempty"`
	Canceled               bool                    `json:"canceled,omitempty"`
	CancellationReason     string                  `json:"cancellation_reason,omitempty"`
	StartTime              string                  `json:"start_time,omitempty"`
	EndTime                string                  `json:"end_time,omitempty"`
	Packages               []json.RawMessage       `json:"packages,omitempty"`
	GovernanceContext      string                  `json:"governance_context,omitempty"`
	PushNotificationConfig *PushNotificationConfig `json:"push_notification_config,omitempty"`
	Context                json.RawMessage         `json:"context,omitempty"`
}

// Required string fields of the request types are omitempty so that an unset
// field reaches the schema as missing and fails validation locally.

// Package is core/package.json as returned (the fields buyflow reads).
type Package struct {
	PackageID string          `json:"package_id"`
	ProductID string          `json:"product_id,omitempty"`
	Budget    json.Number     `json:"budget,omitempty"`
	Context   json.RawMessage `json:"context,omitempty"`
}

// ResponseShape says which of the three response arms a create/update
// answer is.
type ResponseShape string

// Response shapes.
const (
	ShapeSuccess   ResponseShape = "success"
	ShapeSubmitted ResponseShape = "submitted"
	ShapeError     ResponseShape = "error"
	// ShapeInterim is a working or input-required answer (no media buy yet).
	ShapeInterim ResponseShape = "interim"
)

// MediaBuyResult is a decoded create_media_buy or update_media_buy body.
type MediaBuyResult struct {
	Shape          ResponseShape
	Status         TaskStatus // envelope status (StatusCompleted when absent)
	TaskID         string     // submitted: poll this
	Message        string
	MediaBuyID     string
	MediaBuyStatus string // media_buy_status, or a 3.0 top-level media-buy status
	ConfirmedAt    *string
	Revision       int
	Packages       []Package
	Errors         []ErrorDetail
	Replayed       bool
	Raw            json.RawMessage
}

// mediaBuyStatuses is enums/media-buy-status.json. Three of its values
// (completed, rejected, canceled) are task statuses too.
var mediaBuyStatuses = map[string]bool{"pending_creatives": true, "pending_start": true, "active": true,
	"paused": true, "completed": true, "rejected": true, "canceled": true}

// DecodeMediaBuy decodes a create_media_buy / update_media_buy body — a
// synchronous answer, a poll's result, or a webhook's result — following the
// documented dispatch: submitted first, then errors, then the success fields.
// For the error arm it returns the result and an *Error built from the first
// non-warning error.
//
// The root status is read in the vocabulary of the answer's version: with
// media_buy_status (3.1, 3.2) it is the task status, and 3.2 may leave it out;
// without media_buy_status, an answer that carries a media buy and no error
// is the success arm, whose root status is the media buy's (3.0, and 3.1's
// deprecated form). So a 3.0 cancel answered "canceled" is a canceled buy in a
// completed task, never a canceled task.
//
// A 3.2 answer (one that echoes adcp_version 3.2 or later, or answers a request sent in 3.2)
// has no such legacy form: its root status is always the task's, the buy's is
// media_buy_status only.
func DecodeMediaBuy(body json.RawMessage) (*MediaBuyResult, error) {
	return decodeMediaBuyAs("", body)
}

// decodeMediaBuyAs is DecodeMediaBuy for the answer to a request sent in AdCP version sent
// ("" when not known); the answer's own adcp_version echo wins.
func decodeMediaBuyAs(sent string, body json.RawMessage) (*MediaBuyResult, error) {
	resp, err := responseFromBody(body)
	if err != nil {
		return nil, err
	}
	answered := resp.AdCPVersion
	if answered == "" {
		answered = sent
	}
	legacy := !speaks32(answered)
	var w struct {
		Status         string          `json:"status"`
		MediaBuyID     string          `json:"media_buy_id"`
		MediaBuyStatus string          `json:"media_buy_status"`
		ConfirmedAt    *string         `json:"confirmed_at"`
		Revision       int             `json:"revision"`
		Packages       []Package       `json:"packages"`
		Errors         []ErrorDetail   `json:"errors"`
		AdCPError      json.RawMessage `json:"adcp_error"`
	}
	if err := decodeJSON(resp.Body, &w, "media buy", "", ""); err != nil {
		return nil, err
	}
	r := &MediaBuyResult{
		Status: resp.Status, TaskID: resp.TaskID, Message: resp.Message, Replayed: resp.Replayed,
		MediaBuyID: w.MediaBuyID, MediaBuyStatus: w.MediaBuyStatus, ConfirmedAt: w.ConfirmedAt,
		Revision: w.Revision, Packages: w.Packages, Errors: w.Errors, Raw: body,
	}
	if legacy && r.MediaBuyStatus == "" && w.MediaBuyID != "" && mediaBuyStatuses[w.Status] && !hasFatal(w.AdCPError, w.Errors) {
		r.MediaBuyStatus, r.Status, resp.Status = w.Status, StatusCompleted, StatusCompleted
	}
	if legacy && r.MediaBuyStatus == "" && resp.LegacyStatus != "" {
		r.MediaBuyStatus = resp.LegacyStatus
	}
	switch resp.Status {
	case StatusSubmitted:
		r.Shape = ShapeSubmitted
		if r.TaskID == "" {
			return r, &Error{Kind: KindProtocol, Recovery: RecoveryTerminal, Message: "submitted answer without task_id"}
		}
		return r, nil
	case StatusWorking, StatusInputRequired:
		r.Shape = ShapeInterim
		return r, nil
	}
	if e := failureFromEnvelope(envelope{AdCPError: w.AdCPError, Errors: w.Errors}); e != nil && (w.MediaBuyID == "" || resp.Status == statusFailed || resp.Status == statusRejected) {
		r.Shape = ShapeError
		return r, e
	}
	if resp.Status == statusFailed || resp.Status == statusRejected || resp.Status == statusCanceled {
		r.Shape = ShapeError
		return r, &Error{Kind: KindAdCP, Recovery: RecoveryTerminal, Message: "task " + string(resp.Status) + ": " + resp.Message}
	}
	if w.MediaBuyID == "" {
		return r, &Error{Kind: KindProtocol, Recovery: RecoveryTerminal, Message: "answer is neither submitted, error nor success (no media_buy_id)"}
	}
	r.Shape = ShapeSuccess
	return r, nil
}

// hasFatal reports whether a payload carries an error that fails the call.
func hasFatal(adcpError json.RawMessage, errs []ErrorDetail) bool {
	return failureFromEnvelope(envelope{AdCPError: adcpError, Errors: errs}) != nil
}

// CreateMediaBuy sends a create_media_buy Intent and decodes the answer.
func (c *Client) CreateMediaBuy(ctx context.Context, agentID string, in Intent) (*MediaBuyResult, error) {
	return c.sendMediaBuy(ctx, agentID, in, ToolCreateMediaBuy)
}

// UpdateMediaBuy sends an update_media_buy Intent (including cancellation)
// and decodes the answer.
func (c *Client) UpdateMediaBuy(ctx context.Context, agentID string, in Intent) (*MediaBuyResult, error) {
	return c.sendMediaBuy(ctx, agentID, in, ToolUpdateMediaBuy)
}

func (c *Client) sendMediaBuy(ctx context.Context, agentID string, in Intent, tool string) (*MediaBuyResult, error) {
	resp, err := c.sendIntent(ctx, agentID, in, tool)
	if err != nil {
		return nil, err
	}
	r, err := decodeMediaBuyAs(resp.SentVersion, resp.Body)
	return r, tag(err, agentID, tool)
}

// sendIntent sends in, which must be an intent for tool.
func (c *Client) sendIntent(ctx context.Context, agentID string, in Intent, tool string) (*Response, error) {
	if in.Task != tool {
		return nil, fmt.Errorf("adcp: %s: intent is for %s", tool, in.Task)
	}
	return c.Send(ctx, agentID, in)
}

// sendDecoded sends in, an intent for tool, and decodes the answer's body with decode, its
// error tagged with the agent and the tool.
func sendDecoded[R any](ctx context.Context, c *Client, agentID string, in Intent, tool string, decode func(json.RawMessage) (R, error)) (R, error) {
	resp, err := c.sendIntent(ctx, agentID, in, tool)
	if err != nil {
		var zero R
		return zero, err
	}
	r, err := decode(resp.Body)
	return r, tag(err, agentID, tool)
}

// tag fills the agent and tool of an *Error that lacks them.
func tag(err error, agentID, tool string) error {
	var ae *Error
	if errors.As(err, &ae) && ae.Agent == "" {
		ae.Agent, ae.Tool = agentID, tool
	}
	return err
}

// CheckGovernanceRequest is governance/check-governance-request.json (intent
// check). Never carries account. Fill every field buyflow knows; CheckGovernance sends the
// ones the governance agent's AdCP version has (atVersion).
type CheckGovernanceRequest struct {
	// Target is the registry id of the agent that will receive Payload (the seller); in 3.2 its
	// MCP URL is sent as target_agent.
	Target      string `json:"-"`
	TargetAgent string `json:"target_agent,omitempty"` // set by CheckGovernance (3.2)
	// ProposedCommitment is the positive incremental amount the intent would commit (3.2;
	// required for update_media_buy).
	ProposedCommitment  *Commitment     `json:"proposed_commitment,omitempty"`
	PlanID              string          `json:"plan_id,omitempty"`
	Caller              string          `json:"caller,omitempty"` // URI of the calling agent
	Tool                string          `json:"tool,omitempty"`
	Payload             json.RawMessage `json:"payload,omitempty"` // exact seller arguments
	PurchaseType        string          `json:"purchase_type,omitempty"`
	GovernanceContext   string          `json:"governance_context,omitempty"`
	Phase               string          `json:"phase,omitempty"`
	InvoiceRecipient    json.RawMessage `json:"invoice_recipient,omitempty"`
	ModificationSummary string          `json:"modification_summary,omitempty"`
	Context             json.RawMessage `json:"context,omitempty"`
}

// Commitment is check_governance's proposed_commitment: an exact amount and its currency.
type Commitment struct {
	Amount   json.Number `json:"amount"`
	Currency string      `json:"currency"`
}

// atVersion shapes an intent check for a governance agent that speaks version: the one place
// the two shapes differ. 3.1 has no target_agent or proposed_commitment and carries a prior
// approval's governance_context on a modification check; 3.2 names the downstream agent's URL
// (target), forbids governance_context on an intent (tool + payload) check — the plan is
// addressed by plan_id, the approval binds the new check to it — and keeps
// proposed_commitment.
func (r CheckGovernanceRequest) atVersion(version string, target Agent) CheckGovernanceRequest {
	if !speaks32(version) {
		r.TargetAgent, r.ProposedCommitment = "", nil
		return r
	}
	r.TargetAgent = target.MCPURL
	if r.Tool != "" {
		r.GovernanceContext = ""
	}
	return r
}

// Governance verdicts (enums/governance-decision.json).
const (
	VerdictApproved   = "approved"
	VerdictDenied     = "denied"
	VerdictConditions = "conditions"
)

// Condition is one machine- or human-actionable governance condition.
type Condition struct {
	Field         string          `json:"field"`
	RequiredValue json.RawMessage `json:"required_value,omitempty"`
	Reason        string          `json:"reason"`
}

// finding is one governance finding.
type finding struct {
	CategoryID  string          `json:"category_id"`
	PolicyID    string          `json:"policy_id,omitempty"`
	Severity    string          `json:"severity"`
	Explanation string          `json:"explanation"`
	Details     json.RawMessage `json:"details,omitempty"`
}

// GovernanceResult is a decoded check_governance answer. When the check went
// async, Pending is true, Verdict is empty and TaskID is set.
type GovernanceResult struct {
	Pending           bool
	Status            TaskStatus
	TaskID            string
	CheckID           string
	Verdict           string // "verdict" (3.1) or root "status" (3.0)
	PlanID            string
	Explanation       string
	Conditions        []Condition
	Findings          []finding
	ExpiresAt         string
	GovernanceContext string
	Raw               json.RawMessage
}

// DecodeGovernance decodes a check_governance body (sync answer or a poll's
// result).
func DecodeGovernance(body json.RawMessage) (*GovernanceResult, error) {
	resp, err := responseFromBody(body)
	if err != nil {
		return nil, err
	}
	var w struct {
		CheckID           string      `json:"check_id"`
		Verdict           string      `json:"verdict"`
		PlanID            string      `json:"plan_id"`
		Explanation       string      `json:"explanation"`
		Conditions        []Condition `json:"conditions"`
		Findings          []finding   `json:"findings"`
		ExpiresAt         string      `json:"expires_at"`
		GovernanceContext string      `json:"governance_context"`
	}
	if err := resp.decode(&w, "check_governance", "", ""); err != nil {
		return nil, err
	}
	g := &GovernanceResult{Status: resp.Status, TaskID: resp.TaskID, CheckID: w.CheckID, Verdict: w.Verdict,
		PlanID: w.PlanID, Explanation: w.Explanation, Conditions: w.Conditions, Findings: w.Findings,
		ExpiresAt: w.ExpiresAt, GovernanceContext: w.GovernanceContext, Raw: body}
	if g.Verdict == "" {
		switch resp.LegacyStatus {
		case VerdictApproved, VerdictDenied, VerdictConditions:
			g.Verdict = resp.LegacyStatus
		}
	}
	if resp.Status == StatusSubmitted || resp.Status == StatusWorking || resp.Status == StatusInputRequired {
		g.Pending = true
		return g, nil
	}
	switch g.Verdict {
	case VerdictApproved, VerdictDenied, VerdictConditions:
		return g, nil
	}
	return g, &Error{Kind: KindProtocol, Recovery: RecoveryTerminal, Message: fmt.Sprintf("check_governance answer has no known verdict (%q)", g.Verdict)}
}

// CheckGovernance runs an intent check (fresh idempotency key per call), shaped for the AdCP
// version the governance agent speaks.
func (c *Client) CheckGovernance(ctx context.Context, agentID string, req CheckGovernanceRequest) (*GovernanceResult, error) {
	resp, err := c.callShaped(ctx, agentID, ToolCheckGovernance, func(version string) (any, error) {
		if !speaks32(version) {
			return req.atVersion(version, Agent{}), nil
		}
		target, err := c.opts.Agents.Agent(ctx, req.Target)
		if err != nil {
			return nil, fmt.Errorf("target agent of the check: %w", err)
		}
		return req.atVersion(version, target), nil
	})
	if err != nil {
		return nil, err
	}
	g, err := DecodeGovernance(resp.Body)
	return g, tag(err, agentID, ToolCheckGovernance)
}

// SellerResponse is report_plan_outcome's seller_response.
type SellerResponse struct {
	SellerReference  string            `json:"seller_reference,omitempty"`
	CommittedBudget  json.Number       `json:"committed_budget,omitempty"` // exact, never a float
	Packages         []json.RawMessage `json:"packages,omitempty"`
	PlannedDelivery  json.RawMessage   `json:"planned_delivery,omitempty"`
	CreativeDeadline string            `json:"creative_deadline,omitempty"`
}

// OutcomeError is report_plan_outcome's error.
type OutcomeError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// ReportPlanOutcomeRequest is governance/report-plan-outcome-request.json.
type ReportPlanOutcomeRequest struct {
	IdempotencyKey    string          `json:"idempotency_key,omitempty"`
	PlanID            string          `json:"plan_id,omitempty"`
	CheckID           string          `json:"check_id,omitempty"`
	PurchaseType      string          `json:"purchase_type,omitempty"`
	Outcome           string          `json:"outcome,omitempty"` // completed | failed | delivery
	SellerResponse    *SellerResponse `json:"seller_response,omitempty"`
	Delivery          json.RawMessage `json:"delivery,omitempty"`
	Error             *OutcomeError   `json:"error,omitempty"`
	GovernanceContext string          `json:"governance_context,omitempty"`
	Context           json.RawMessage `json:"context,omitempty"`
}

// OutcomeResult is a decoded report_plan_outcome answer.
type OutcomeResult struct {
	Status          TaskStatus
	TaskID          string
	OutcomeID       string
	OutcomeState    string // "outcome_state" (3.1) or root "status" (3.0): accepted | findings
	CommittedBudget *json.Number
	Findings        []finding
	PlanSummary     json.RawMessage
	Replayed        bool
	Raw             json.RawMessage
}

// DecodeOutcome decodes a report_plan_outcome body.
func DecodeOutcome(body json.RawMessage) (*OutcomeResult, error) {
	resp, err := responseFromBody(body)
	if err != nil {
		return nil, err
	}
	var w struct {
		OutcomeID       string          `json:"outcome_id"`
		OutcomeState    string          `json:"outcome_state"`
		CommittedBudget *json.Number    `json:"committed_budget"`
		Findings        []finding       `json:"findings"`
		PlanSummary     json.RawMessage `json:"plan_summary"`
		Errors          []ErrorDetail   `json:"errors"`
	}
	if err := resp.decode(&w, "report_plan_outcome", "", ""); err != nil {
		return nil, err
	}
	o := &OutcomeResult{Status: resp.Status, TaskID: resp.TaskID, OutcomeID: w.OutcomeID, OutcomeState: w.OutcomeState,
		CommittedBudget: w.CommittedBudget, Findings: w.Findings, PlanSummary: w.PlanSummary, Replayed: resp.Replayed, Raw: body}
	if o.OutcomeState == "" && (resp.LegacyStatus == "accepted" || resp.LegacyStatus == "findings") {
		o.OutcomeState = resp.LegacyStatus
	}
	if o.OutcomeID == "" && o.OutcomeState == "" {
		if e := failureFromEnvelope(envelope{Errors: w.Errors}); e != nil {
			return o, e
		}
	}
	return o, nil
}

// ReportPlanOutcome sends a report_plan_outcome Intent.
func (c *Client) ReportPlanOutcome(ctx context.Context, agentID string, in Intent) (*OutcomeResult, error) {
	return sendDecoded(ctx, c, agentID, in, ToolReportPlanOutcome, DecodeOutcome)
}

// SyncPlansRequest is governance/sync-plans-request.json; each plan is passed
// as JSON (governance/plan shape) so no field is lost.
type SyncPlansRequest struct {
	IdempotencyKey string            `json:"idempotency_key,omitempty"`
	Plans          []json.RawMessage `json:"plans"`
	Context        json.RawMessage   `json:"context,omitempty"`
}

// SyncedPlan is one entry of a sync_plans answer.
type SyncedPlan struct {
	PlanID  string          `json:"plan_id"`
	Status  string          `json:"status"` // active | error
	Version json.RawMessage `json:"version,omitempty"`
	Errors  []ErrorDetail   `json:"errors,omitempty"`
}

// SyncPlansResult is a decoded sync_plans answer.
type SyncPlansResult struct {
	Status   TaskStatus
	TaskID   string
	Plans    []SyncedPlan
	Replayed bool
	Raw      json.RawMessage
}

// SyncPlans sends a sync_plans Intent.
func (c *Client) SyncPlans(ctx context.Context, agentID string, in Intent) (*SyncPlansResult, error) {
	resp, err := c.sendIntent(ctx, agentID, in, ToolSyncPlans)
	if err != nil {
		return nil, err
	}
	var w struct {
		Plans  []SyncedPlan  `json:"plans"`
		Errors []ErrorDetail `json:"errors"`
	}
	if err := resp.decode(&w, "sync_plans", agentID, ToolSyncPlans); err != nil {
		return nil, err
	}
	r := &SyncPlansResult{Status: resp.Status, TaskID: resp.TaskID, Plans: w.Plans, Replayed: resp.Replayed, Raw: resp.Body}
	if len(w.Plans) == 0 && resp.Status == StatusCompleted {
		if e := failureFromEnvelope(envelope{Errors: w.Errors}); e != nil {
			return r, tag(e, agentID, ToolSyncPlans)
		}
	}
	return r, nil
}

// GetTaskStatusRequest is protocol/get-task-status-request.json (same shape
// as legacy tasks/get).
type GetTaskStatusRequest struct {
	TaskID         string          `json:"task_id,omitempty"`
	Account        *AccountRef     `json:"account,omitempty"`
	IncludeResult  bool            `json:"include_result,omitempty"`
	IncludeHistory bool            `json:"include_history,omitempty"`
	Context        json.RawMessage `json:"context,omitempty"`
}

// TaskStatusResult is a decoded get_task_status / tasks/get answer. Status is
// the polled task's status; Error is set for failed tasks, Result for
// completed ones (the full task response, e.g. a create_media_buy success).
type TaskStatusResult struct {
	TaskID      string
	TaskType    string
	Protocol    string
	Status      TaskStatus
	CreatedAt   string
	UpdatedAt   string
	CompletedAt string
	HasWebhook  bool
	Progress    json.RawMessage
	Error       *ErrorDetail
	Result      json.RawMessage
	Raw         json.RawMessage
}

// Failure returns the polled task's failure as *Error (nil unless the task
// failed or was rejected).
func (t *TaskStatusResult) Failure() *Error {
	if t.Status != statusFailed && t.Status != statusRejected {
		return nil
	}
	if t.Error != nil && t.Error.Code != "" {
		return errorFromDetail(*t.Error)
	}
	if e := ResultFailure(t.Result); e != nil {
		return e
	}
	return &Error{Kind: KindAdCP, Recovery: RecoveryTerminal, Message: "task " + string(t.Status) + " without an error object"}
}

// ResultFailure returns the error a task's result reports (its adcp_error,
// else its first fatal errors[] entry, with code and recovery), or nil. A
// webhook's result and a poll's result carry the failure of a task this way.
func ResultFailure(result json.RawMessage) *Error {
	if len(result) == 0 {
		return nil
	}
	var env envelope
	if json.Unmarshal(result, &env) != nil {
		// A mistyped envelope field must not hide the error objects.
		var m map[string]json.RawMessage
		if json.Unmarshal(result, &m) != nil {
			return nil
		}
		env.AdCPError = m["adcp_error"]
		_ = json.Unmarshal(m["errors"], &env.Errors) // best effort: adcp_error may still be there
	}
	return failureFromEnvelope(env)
}

// GetTaskStatus polls a task through the tool the agent offers
// (get_task_status, else tasks/get), with a fresh idempotency key.
func (c *Client) GetTaskStatus(ctx context.Context, agentID string, req GetTaskStatusRequest) (*TaskStatusResult, error) {
	tool, err := c.PollTool(ctx, agentID)
	if err != nil {
		return nil, err
	}
	resp, err := c.Call(ctx, agentID, tool, req)
	if err != nil {
		return nil, err
	}
	var w struct {
		TaskID      string          `json:"task_id"`
		TaskType    string          `json:"task_type"`
		Protocol    string          `json:"protocol"`
		Status      string          `json:"status"`
		CreatedAt   string          `json:"created_at"`
		UpdatedAt   string          `json:"updated_at"`
		CompletedAt string          `json:"completed_at"`
		HasWebhook  bool            `json:"has_webhook"`
		Progress    json.RawMessage `json:"progress"`
		Error       json.RawMessage `json:"error"`
		Result      json.RawMessage `json:"result"`
	}
	if err := decodeJSON(resp.Body, &w, "task status", agentID, tool); err != nil {
		return nil, err
	}
	if !validTaskStatus(w.Status) {
		return nil, &Error{Kind: KindProtocol, Agent: agentID, Tool: tool, Recovery: RecoveryTerminal, Message: fmt.Sprintf("task status %q is not a task status", w.Status)}
	}
	t := &TaskStatusResult{TaskID: w.TaskID, TaskType: w.TaskType, Protocol: w.Protocol, Status: TaskStatus(w.Status),
		CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt, CompletedAt: w.CompletedAt, HasWebhook: w.HasWebhook,
		Progress: w.Progress, Result: w.Result, Raw: resp.Body}
	if len(w.Error) > 0 && string(w.Error) != "null" {
		if d, ok := parseAdCPError(w.Error); ok {
			t.Error = &d
		}
	}
	if string(t.Result) == "null" {
		t.Result = nil
	}
	return t, nil
}

// TaskFilters is list_tasks' filters (the fields buyflow uses).
type TaskFilters struct {
	Statuses  []string `json:"statuses,omitempty"`
	TaskTypes []string `json:"task_types,omitempty"`
	TaskIDs   []string `json:"task_ids,omitempty"`
}

// Pagination is a pagination request.
type Pagination struct {
	MaxResults int    `json:"max_results,omitempty"`
	Cursor     string `json:"cursor,omitempty"`
}

// ListTasksRequest is protocol/list-tasks-request.json.
type ListTasksRequest struct {
	Account    *AccountRef     `json:"account,omitempty"`
	Filters    *TaskFilters    `json:"filters,omitempty"`
	Pagination *Pagination     `json:"pagination,omitempty"`
	Context    json.RawMessage `json:"context,omitempty"`
}

// TaskSummary is one entry of list_tasks.
type TaskSummary struct {
	TaskID      string `json:"task_id"`
	TaskType    string `json:"task_type"`
	Status      string `json:"status"`
	CreatedAt   string `json:"created_at"`
	UpdatedAt   string `json:"updated_at"`
	CompletedAt string `json:"completed_at,omitempty"`
	HasWebhook  bool   `json:"has_webhook,omitempty"`
}

// ListTasksResult is a decoded list_tasks answer.
type ListTasksResult struct {
	Tasks      []TaskSummary
	HasMore    bool
	Cursor     string
	Raw        json.RawMessage
	Pagination json.RawMessage
}

// ListTasks lists tasks through list_tasks, else legacy tasks/list.
func (c *Client) ListTasks(ctx context.Context, agentID string, req ListTasksRequest) (*ListTasksResult, error) {
	tool, err := c.ListTool(ctx, agentID)
	if err != nil {
		return nil, err
	}
	resp, err := c.Call(ctx, agentID, tool, req)
	if err != nil {
		return nil, err
	}
	var w struct {
		Tasks      []TaskSummary   `json:"tasks"`
		Pagination json.RawMessage `json:"pagination"`
	}
	if err := decodeJSON(resp.Body, &w, "list_tasks", agentID, tool); err != nil {
		return nil, err
	}
	var p struct {
		HasMore bool   `json:"has_more"`
		Cursor  string `json:"cursor"`
	}
	_ = json.Unmarshal(w.Pagination, &p) // pagination is optional in practice
	return &ListTasksResult{Tasks: w.Tasks, HasMore: p.HasMore, Cursor: p.Cursor, Raw: resp.Body, Pagination: w.Pagination}, nil
}

// GetMediaBuysRequest is media-buy/get-media-buys-request.json.
type GetMediaBuysRequest struct {
	Account                *AccountRef     `json:"account,omitempty"`
	MediaBuyIDs            []string        `json:"media_buy_ids,omitempty"`
	StatusFilter           json.RawMessage `json:"status_filter,omitempty"`
	IncludeSnapshot        bool            `json:"include_snapshot,omitempty"`
	IncludeHistory         *int            `json:"include_history,omitempty"`
	IncludeWebhookActivity bool            `json:"include_webhook_activity,omitempty"`
	Pagination             *Pagination     `json:"pagination,omitempty"`
	Context                json.RawMessage `json:"context,omitempty"`
}

// MediaBuy is one media buy of a get_media_buys answer (the fields buyflow
// reads; Raw keeps the rest).
type MediaBuy struct {
	MediaBuyID string          `json:"media_buy_id"`
	Status     string          `json:"status"`
	Revision   int             `json:"revision,omitempty"`
	Context    json.RawMessage `json:"context,omitempty"`
	Packages   []Package       `json:"packages,omitempty"`
	Raw        json.RawMessage `json:"-"`
}

// GetMediaBuysResult is a decoded get_media_buys answer.
type GetMediaBuysResult struct {
	MediaBuys []MediaBuy
	Raw       json.RawMessage
}

// GetMediaBuys reads media buys (fresh idempotency key).
func (c *Client) GetMediaBuys(ctx context.Context, agentID string, req GetMediaBuysRequest) (*GetMediaBuysResult, error) {
	resp, err := c.Call(ctx, agentID, ToolGetMediaBuys, req)
	if err != nil {
		return nil, err
	}
	var w struct {
		MediaBuys []json.RawMessage `json:"media_buys"`
	}
	if err := resp.decode(&w, "get_media_buys", agentID, ToolGetMediaBuys); err != nil {
		return nil, err
	}
	out := &GetMediaBuysResult{Raw: resp.Body}
	for _, raw := range w.MediaBuys {
		var mb MediaBuy
		if err := decodeJSON(raw, &mb, "media buy", agentID, ToolGetMediaBuys); err != nil {
			return nil, err
		}
		mb.Raw = raw
		out.MediaBuys = append(out.MediaBuys, mb)
	}
	return out, nil
}
