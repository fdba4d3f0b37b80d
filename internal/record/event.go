package record

import (
	"encoding/json"
	"time"
	"unicode/utf8"

	"github.com/buyflow/buyflow/internal/workflow"
)

// The event types of an operation's timeline: finance's contract, so every writer names its
// events from this one list.
const (
	// Written by the ledger itself.
	EventCreated    = "created"    // the operation was created (submit)
	EventTransition = "transition" // a status change without a more specific type
	EventUpdate     = "update"     // fields changed without a status change
	EventDecision   = "decision"   // an approver's decision (approve)

	// The governance stage.
	EventGovernanceCheck = "governance_check" // detail: verdict, decision, conditions; read by the approval page
	EventOutcomeReport   = "outcome_report"   // report_plan_outcome sent
	EventFailure         = "failure"          // the workflow's Catch recorded a failure
	EventLockReleased    = "lock_released"    // the business-key (PO number) lock was released

	// The create stage.
	EventSellerCall       = "seller_call"        // create_media_buy (or its resend) answered
	EventLapsedClaimCheck = "lapsed_claim_check" // get_media_buys asked whether a lapsed create or change was executed
	EventCancel           = "cancel"             // update_media_buy cancel (compensation)

	// Any stage that calls an agent.
	// EventAgentUnavailable records a call not sent because the agent's circuit breaker is
	// open: detail agent_id, role (seller or governance), since (the breaker opened),
	// retry_at; the buy waits and tries again. Read by the buy's projection.
	EventAgentUnavailable = "agent_unavailable"

	// The seller wait: the poll stage, the webhook receiver and the sweep.
	EventPoll    = "poll"    // a get_task_status answer or failure
	EventWebhook = "webhook" // a seller webhook (applied, stale or ignored)
	EventWake    = "wake"    // a parked AwaitSeller token was completed; detail.by says who
	// EventLostTask ends an operation whose seller no longer knows its task
	// (REFERENCE_NOT_FOUND past sellertask.LostTaskGrace): the failing transition, with the
	// finding for a person in reason and detail (seller, po_number, task_id, lost_since,
	// may_exist, check). The seller may hold an order buyflow has no media buy id for.
	EventLostTask = "lost_task"

	// The reconciliation sweep.
	EventReconcile = "reconcile" // an update applied, a failure or a stuck mark by the sweep
	EventOrphan    = "orphan"    // a seller task no operation waits on (on the orphan pseudo-operation)

	// The approval step (notify, approve).
	EventApprovalRequested = "approval_requested" // detail: approval_id; read by the buy's projection and the governance stage
	EventApprovalExpired   = "approval_expired"
	EventApprovalRefused   = "approval_refused"
	// EventApprovalViewed records a GET of a validly signed link: who the link is for, from
	// where, with which user agent (a Slack unfurler or mail scanner shows up here), and what
	// the page said. It is audit only: it never changes the approval.
	EventApprovalViewed = "approval_viewed"

	// A change to a placed buy (modify), on the timeline of the buy it changes and of the change.
	EventModificationRequested       = "modification_requested"
	EventModificationGovernanceCheck = "modification_governance_check"
	EventModificationSellerCall      = "modification_seller_call" // update_media_buy answered
	EventModificationApplied         = "modification_applied"     // the seller's new revision recorded
	EventModificationEnded           = "modification_ended"       // rejected, failed or expired
	EventModificationOutcomeReport   = "modification_outcome_report"

	// The delivery read after each sweep: a new snapshot, spend against the approved budget.
	EventDelivery = "delivery"

	// A campaign's own timeline opens with its submit (shown by GET /v1/campaigns/{id}/events).
	EventCampaignSubmitted = "campaign_submitted"
)

// EventDetail encodes v as an event's Detail; a value that does not encode leaves no detail
// (the event is a record of a step that already happened and must not fail it).
func EventDetail(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

// Clip bounds untrusted text (a seller's message, an error) to at most n bytes before it goes
// into an event, a reason or an output, cutting at a character boundary and marking the cut
// with "…".
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// Event is one entry of an operation's append-only audit timeline.
type Event struct {
	At   time.Time `dynamodbav:"at" json:"at"`
	Type string    `dynamodbav:"type" json:"type"`
	// Actor is who caused the event (a principal, "seller:<id>", "approver:<id>", "system").
	Actor string          `dynamodbav:"actor,omitempty" json:"actor,omitempty"`
	From  workflow.Status `dynamodbav:"from,omitempty" json:"from,omitempty"`
	To    workflow.Status `dynamodbav:"to,omitempty" json:"to,omitempty"`
	// Version is the operation version the event produced, when known.
	Version  int64  `dynamodbav:"version,omitempty" json:"version,omitempty"`
	Amount   string `dynamodbav:"amount,omitempty" json:"amount,omitempty"`
	Currency string `dynamodbav:"currency,omitempty" json:"currency,omitempty"`
	Reason   string `dynamodbav:"reason,omitempty" json:"reason,omitempty"`
	// Detail is free-form JSON (call arguments summary, webhook task id, decision comment...).
	Detail json.RawMessage `dynamodbav:"detail,omitempty" json:"detail,omitempty"`
}
