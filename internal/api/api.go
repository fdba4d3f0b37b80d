// Package api is the JSON of buyflow's HTTP API: the views the server answers with and the
// client (internal/apiclient, the CLI, the end-to-end suite) decodes, one type per answer, so
// the two cannot drift apart. It holds data only; the use cases build the views
// (internal/buy, internal/campaign, internal/approve) and testdata/*.golden pins the JSON.
//
// Invariants:
//   - A view never carries a task token, a webhook token, a signature or a credential.
//   - A JSON name changes only with its golden file (go test ./internal/api -update).
package api

import (
	"encoding/json"

	"github.com/buyflow/buyflow/internal/record"
)

// Links are the URLs (paths) a client follows: the resource and its timeline.
type Links struct {
	Self   string `json:"self"`
	Events string `json:"events"`
}

// Page is one page of a listing (media buys, campaigns, a timeline); NextCursor, when set,
// reads the next one.
type Page[T any] struct {
	Items      []T    `json:"items"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// Problem is the error body of every refused request.
type Problem struct {
	Error ProblemDetail `json:"error"`
}

// ProblemDetail says what went wrong, where and what to do.
type ProblemDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

// Submitted is the answer to an accepted media buy: 202 with the operation id and links.
type Submitted struct {
	OperationID string `json:"operation_id"`
	Status      string `json:"status"`
	// Replayed is true when the same Idempotency-Key and body were seen before.
	Replayed bool  `json:"replayed"`
	Links    Links `json:"links"`
}

// ID returns the operation id (the id an Idempotency-Key claim records).
func (s Submitted) ID() string { return s.OperationID }

// MediaBuy is one media buy (or a change to one) as GET /v1/media-buys/{id} shows it: what a
// buyer or finance may read.
type MediaBuy struct {
	OperationID  string          `json:"operation_id"`
	Status       string          `json:"status"`
	SellerID     string          `json:"seller_id"`
	GovernanceID string          `json:"governance_agent_id"`
	PlanID       string          `json:"plan_id"`
	PONumber     string          `json:"po_number"`
	Budget       string          `json:"budget"`
	Currency     string          `json:"currency"`
	Requester    string          `json:"requester"`
	SellerTaskID string          `json:"seller_task_id,omitempty"`
	MediaBuyID   string          `json:"media_buy_id,omitempty"`
	Reason       string          `json:"reason,omitempty"`
	CreatedAt    string          `json:"created_at"`
	UpdatedAt    string          `json:"updated_at"`
	Version      int64           `json:"version"`
	MediaBuy     json.RawMessage `json:"media_buy,omitempty"`
	// Packages are the packages the seller placed (its ids, and the budgets it reported):
	// what a per-package budget change names.
	Packages []record.PackageBudget `json:"packages,omitempty"`
	// ExecutionName is the buy's first Step Functions execution; its continuations (a long
	// seller wait) are named <ExecutionName>-g<N> (workflow.ExecutionName), so an operator finds
	// every execution of a buy from this one name.
	ExecutionName string `json:"execution_name,omitempty"`
	// Approval is the buy's latest approval request, when a person was asked (GET of one buy
	// only; listings leave it out).
	Approval *Approval `json:"approval,omitempty"`
	// Current is the placed buy as its changes left it (GET of one buy that was changed).
	Current *Current `json:"current,omitempty"`
	// Waiting is set while the buy waits for an unavailable agent (GET of one buy only).
	Waiting *Waiting `json:"waiting,omitempty"`
	// Seller is what the seller last said about the buy's task while the buy waits on it (GET
	// of one buy only): a review by the seller's people shows here, not only as working.
	Seller *SellerWords `json:"seller,omitempty"`
	// Kind is "modification" for a change to a placed buy: BuyID names the buy and Change is
	// the change as the buyer asked for it.
	Kind   string          `json:"kind,omitempty"`
	BuyID  string          `json:"media_buy_operation_id,omitempty"`
	Change json.RawMessage `json:"change,omitempty"`
	Links  Links           `json:"links"`
}

// Current is a placed buy after its changes: the seller's revision, the approved budget and
// its packages, paused/active/canceled, the change in flight and how the last one ended.
type Current struct {
	Revision       int                    `json:"revision"`
	State          string                 `json:"state"`
	Budget         string                 `json:"budget"`
	Currency       string                 `json:"currency"`
	Packages       []record.PackageBudget `json:"packages,omitempty"`
	EndTime        string                 `json:"end_time,omitempty"`
	ChangeInFlight string                 `json:"change_in_flight,omitempty"`
	LastChangeID   string                 `json:"last_change_id,omitempty"`
	LastOutcome    string                 `json:"last_outcome,omitempty"`
	LastReason     string                 `json:"last_reason,omitempty"`
	UpdatedAt      string                 `json:"updated_at"`
}

// Waiting says a buy is waiting for an agent that is unavailable: the agent's circuit breaker
// (internal/breaker) is open, so the buy's next step does not call it and waits.
type Waiting struct {
	// Reason is seller_unavailable or governance_unavailable.
	Reason  string `json:"reason"`
	AgentID string `json:"agent_id"`
	// Since is when the agent's breaker opened; RetryAt is when it lets the next call through
	// (a probe: the buy goes on when it succeeds), passed while that probe is out.
	Since   string `json:"since"`
	RetryAt string `json:"retry_at"`
}

// SellerWords is the seller's latest message about a buy's task, as its poll answer or
// webhook said it: untrusted text, bounded, JSON-escaped here and escaped again wherever it is
// rendered.
type SellerWords struct {
	Message string `json:"message"`
	// SellerStatus is the seller's task status the message came with (submitted, working,
	// input-required, ...).
	SellerStatus string `json:"seller_status,omitempty"`
	At           string `json:"at"`
}

// Approval is a buy's latest approval (or a campaign's one approval) as its buyer may see it:
// who is asked (approver ids as configured: Slack user or group ids), until when, what happens
// if nobody decides, and, once decided, who decided and when. It never carries a link, a
// signature or a task token.
type Approval struct {
	ApprovalID string `json:"approval_id"`
	// CampaignID is set when the approval is a campaign's: one decision for all its legs.
	CampaignID string `json:"campaign_id,omitempty"`
	// Status is pending, approved, rejected or expired.
	Status      string   `json:"status"`
	Approvers   []string `json:"approvers"`
	RequestedAt string   `json:"requested_at"`
	ExpiresAt   string   `json:"expires_at"`
	// Reason is why a person is asked (policy_threshold, governance_conditions, ...);
	// ReasonText what asked in its own words when it said more (the policy's sentence, the
	// seller's message, governance's conditions).
	Reason     string `json:"reason,omitempty"`
	ReasonText string `json:"reason_text,omitempty"`
	// Amount is what the person approves ("25000.00 USD"): the buy's amount, or the total of
	// the legs a campaign's approval covers (Legs, their operations), the total its gate
	// compared with the policy's threshold.
	Amount string   `json:"amount,omitempty"`
	Legs   []string `json:"legs,omitempty"`
	// Round counts the requests of this buy from 0; Escalation is true when this request went
	// to the escalation approvers after an earlier one expired.
	Round      int  `json:"round"`
	Escalation bool `json:"escalation,omitempty"`
	// EscalatesTo lists who is asked next if this request expires; empty means the buy is
	// rejected when it expires.
	EscalatesTo []string `json:"escalates_to,omitempty"`
	DecidedBy   string   `json:"decided_by,omitempty"`
	DecidedAt   string   `json:"decided_at,omitempty"`
}

// Event is one entry of a timeline.
type Event struct {
	At     string          `json:"at"`
	Type   string          `json:"type"`
	Actor  string          `json:"actor,omitempty"`
	From   string          `json:"from,omitempty"`
	To     string          `json:"to,omitempty"`
	Amount string          `json:"amount,omitempty"`
	Reason string          `json:"reason,omitempty"`
	Detail json.RawMessage `json:"detail,omitempty"`
}
