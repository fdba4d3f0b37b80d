package buy

import (
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/buyflow/buyflow/internal/record"
)

// Caller is who asks: the tenant (the buyer's account, from the caller's identity, never the
// body) and the principal (a user or role), recorded as the requester.
type Caller struct {
	Tenant    string
	Principal string
}

// Submitted is the answer to an accepted submit: 202 with the operation id and links.
type Submitted struct {
	OperationID string `json:"operation_id"`
	Status      string `json:"status"`
	// Replayed is true when the same Idempotency-Key and body were seen before.
	Replayed bool  `json:"replayed"`
	Links    Links `json:"links"`
}

// Links are the URLs (paths) a client follows after a submit.
type Links struct {
	Self   string `json:"self"`
	Events string `json:"events"`
}

// LinksFor returns the links of operation id.
func LinksFor(id string) Links {
	return Links{Self: "/v1/media-buys/" + id, Events: "/v1/media-buys/" + id + "/events"}
}

// View is the API projection of an operation: what a buyer or finance may read. It never
// carries a task token, a webhook token or a credential.
type View struct {
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
	Approval *ApprovalView `json:"approval,omitempty"`
	// Current is the placed buy as its changes left it (GET of one buy that was changed).
	Current *CurrentView `json:"current,omitempty"`
	// Waiting is set while the buy waits for an unavailable agent (GET of one buy only).
	Waiting *WaitingView `json:"waiting,omitempty"`
	// Kind is "modification" for a change to a placed buy: BuyID names the buy and Change is
	// the change as the buyer asked for it.
	Kind   string          `json:"kind,omitempty"`
	BuyID  string          `json:"media_buy_operation_id,omitempty"`
	Change json.RawMessage `json:"change,omitempty"`
	Links  Links           `json:"links"`
}

// CurrentView is a placed buy after its changes: the seller's revision, the approved budget
// and its packages, paused/active/canceled, the change in flight and how the last one ended.
type CurrentView struct {
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

// EventView is one entry of an operation's timeline.
type EventView struct {
	At     string          `json:"at"`
	Type   string          `json:"type"`
	Actor  string          `json:"actor,omitempty"`
	From   string          `json:"from,omitempty"`
	To     string          `json:"to,omitempty"`
	Amount string          `json:"amount,omitempty"`
	Reason string          `json:"reason,omitempty"`
	Detail json.RawMessage `json:"detail,omitempty"`
}

// EventPage is one page of a timeline, oldest first.
type EventPage struct {
	Items      []EventView `json:"items"`
	NextCursor string      `json:"next_cursor,omitempty"`
}

// ErrNotFound reports an operation that does not exist for the caller's tenant (including
// one that exists for another tenant: the answer is the same).
var ErrNotFound = errors.New("media buy not found")

// ID returns the operation id (the id an Idempotency-Key claim records).
func (s Submitted) ID() string { return s.OperationID }

// ApprovalView is a buy's latest approval as its buyer may see it: who is asked (approver ids
// as configured: Slack user or group ids), until when, what happens if nobody decides, and,
// once decided, who decided and when. It never carries a link, a signature or a task token.
type ApprovalView struct {
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

// WaitingView says a buy is waiting for an agent that is unavailable: the agent's circuit
// breaker (internal/breaker) is open, so the buy's next step does not call it and waits.
type WaitingView struct {
	// Reason is seller_unavailable or governance_unavailable.
	Reason  string `json:"reason"`
	AgentID string `json:"agent_id"`
	// Since is when the agent's breaker opened; RetryAt is when it lets the next call through
	// (a probe: the buy goes on when it succeeds).
	Since   string `json:"since"`
	RetryAt string `json:"retry_at"`
}

// EventViewOf is the API view of one timeline event.
func EventViewOf(e record.Event) EventView {
	ev := EventView{At: e.At.UTC().Format(time.RFC3339Nano), Type: e.Type, Actor: e.Actor,
		From: string(e.From), To: string(e.To), Reason: e.Reason, Detail: e.Detail}
	if e.Amount != "" {
		ev.Amount = strings.TrimSpace(e.Amount + " " + e.Currency)
	}
	return ev
}

// ApprovalViewOf is the API view of a stored approval (without the request's time and round,
// which its subject's timeline holds).
func ApprovalViewOf(a *record.Approval) *ApprovalView {
	v := &ApprovalView{
		ApprovalID: a.ID, CampaignID: a.CampaignID, Status: string(a.Status), Approvers: a.Approvers,
		Reason: a.Reason, ReasonText: record.Clip(a.ReasonText, 500), Legs: a.Legs,
		ExpiresAt: RFC3339(a.ExpiresAt), EscalatesTo: a.EscalationApprovers,
	}
	if a.Amount != "" {
		v.Amount = strings.TrimSpace(a.Amount + " " + a.Currency)
	}
	if a.Status == record.ApprovalApproved || a.Status == record.ApprovalRejected {
		v.DecidedBy, v.DecidedAt = a.Decider, RFC3339(a.DecidedAt)
	}
	return v
}

// RFC3339 formats a time for an API view, in UTC; the zero time is empty.
func RFC3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}
