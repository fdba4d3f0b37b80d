package record

import (
	"fmt"
	"time"
)

// ApprovalStatus is the state of an approval request.
type ApprovalStatus string

// The approval statuses; every one but pending is final.
const (
	ApprovalPending  ApprovalStatus = "pending"
	ApprovalApproved ApprovalStatus = "approved"
	ApprovalRejected ApprovalStatus = "rejected"
	ApprovalExpired  ApprovalStatus = "expired"
)

// SlackRef locates one Slack message posted for an approval (to update it after the decision).
type SlackRef struct {
	Channel string `dynamodbav:"channel" json:"channel"`
	TS      string `dynamodbav:"ts" json:"ts"`
}

// Approval is a human approval request. Its key is the approval id alone (a link carries only
// the id), so callers must compare Tenant with the caller's tenant where one is known. TaskToken
// is internal: it never leaves AWS.
type Approval struct {
	ID          string `dynamodbav:"approval_id"`
	Tenant      string `dynamodbav:"tenant"`
	OperationID string `dynamodbav:"operation_id"`
	// CampaignID is set, instead of OperationID, on a campaign's approval: one decision for
	// every leg of the campaign.
	CampaignID string `dynamodbav:"campaign_id,omitempty"`
	// Legs are the operations a campaign's approval covers, in the campaign's order: the legs
	// its gate would buy (not a leg governance denied or whose check failed). Amount is their
	// total, the one the gate compared with the policy's threshold.
	Legs                []string `dynamodbav:"legs,omitempty"`
	TaskToken           string   `dynamodbav:"task_token"`
	Approvers           []string `dynamodbav:"approvers,omitempty"`
	EscalationApprovers []string `dynamodbav:"escalation_approvers,omitempty"`
	Requester           string   `dynamodbav:"requester,omitempty"`
	Amount              string   `dynamodbav:"amount,omitempty"`
	Currency            string   `dynamodbav:"currency,omitempty"`
	Reason              string   `dynamodbav:"reason,omitempty"`
	// ReasonText is what the party that asked for the approval said (the seller's
	// input-required message, the governance agent's conditions), shown to the approvers.
	ReasonText    string         `dynamodbav:"reason_text,omitempty"`
	ExpiresAt     time.Time      `dynamodbav:"expires_at"`
	Status        ApprovalStatus `dynamodbav:"status"`
	Decider       string         `dynamodbav:"decider,omitempty"`
	DecidedAt     time.Time      `dynamodbav:"decided_at,omitempty"`
	Comment       string         `dynamodbav:"comment,omitempty"`
	SlackMessages []SlackRef     `dynamodbav:"slack_messages,omitempty"`
	CreatedAt     time.Time      `dynamodbav:"created_at"`
	// DecisionID is the random id of the Decide that recorded the decision (internal): a
	// decision whose response was lost is retried by the SDK and then fails its own condition;
	// finding its id here tells the ledger the decision is in.
	DecisionID string `dynamodbav:"decision_id,omitempty"`
}

// Decision is what an approver (or the timeout path) decides.
type Decision struct {
	Outcome ApprovalStatus // approved, rejected or expired
	By      string
	Comment string
}

// DecisionError reports a decision that lost: Current is the approval as it is now (already
// decided by Current.Decider at Current.DecidedAt, or still pending but expired).
type DecisionError struct{ Current *Approval }

func (e *DecisionError) Error() string {
	if e.Current.Status == ApprovalPending {
		return fmt.Sprintf("record: approval %s expired at %s", e.Current.ID, e.Current.ExpiresAt.Format(time.RFC3339))
	}
	return fmt.Sprintf("record: approval %s already %s by %s at %s", e.Current.ID, e.Current.Status,
		e.Current.Decider, e.Current.DecidedAt.Format(time.RFC3339))
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *DecisionError) Is(target error) bool { return target == ErrConflict }
