package approvalcore

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// Errors returned by Check and Decide when a request is refused. Match them
// with errors.Is. None of them carries an identifier a caller did not send.
var (
	// ErrWrongApproval means the request names another approval than the one loaded.
	ErrWrongApproval = errors.New("approvalcore: request is for another approval")
	// ErrNotApprover means the approver is not among the approval's approvers
	// or escalation approvers.
	ErrNotApprover = errors.New("approvalcore: not an approver of this request")
	// ErrSelfApproval means the requester tried to decide their own request.
	ErrSelfApproval = errors.New("approvalcore: you cannot approve your own request")
	// ErrInvalidDecision means the decision is neither approve nor reject.
	ErrInvalidDecision = errors.New("approvalcore: decision must be approve or reject")
	// ErrCommentTooLong means the comment is longer than MaxCommentRunes.
	ErrCommentTooLong = errors.New("approvalcore: comment is too long")
	// ErrInvalidComment means the comment is not valid UTF-8 or holds control characters.
	ErrInvalidComment = errors.New("approvalcore: comment has invalid characters")
	// ErrInvalidState means the stored approval is inconsistent (unknown
	// status, or decided with no decider). It is our bug, not the caller's.
	ErrInvalidState = errors.New("approvalcore: stored approval is inconsistent")
)

// MaxCommentRunes is the longest comment an approver may leave.
const MaxCommentRunes = 1000

// Status is the lifecycle state of an approval in the ledger.
type Status string

// Statuses. The only transitions are pending → approved | rejected | expired.
const (
	StatusPending  Status = "pending"
	StatusApproved Status = "approved"
	StatusRejected Status = "rejected"
	StatusExpired  Status = "expired"
)

// ReasonCode says why a buy needs a human approval.
type ReasonCode string

// Reason codes.
const (
	// ReasonPolicyThreshold: the amount is over the policy's approval threshold.
	ReasonPolicyThreshold ReasonCode = "policy_threshold"
	// ReasonGovernanceConditions: the governance agent returned conditions a
	// person has to accept.
	ReasonGovernanceConditions ReasonCode = "governance_conditions"
	// ReasonSellerInputRequired: the seller answered input-required.
	ReasonSellerInputRequired ReasonCode = "seller_input_required"
	// ReasonChangeNeedsApproval: a change to a placed buy needs a person by policy or
	// governance (the reason text says which).
	ReasonChangeNeedsApproval ReasonCode = "change_needs_approval"
	// ReasonCampaignLegs: a campaign needs a person, for legs of it or for its total; each leg
	// says why it asks on its own (Leg.Why), the reason text why the total does.
	ReasonCampaignLegs ReasonCode = "campaign_legs"
)

// Label is a plain-language sentence for the reason code.
func (r ReasonCode) Label() string {
	switch r {
	case ReasonPolicyThreshold:
		return "The amount is over the approval threshold set by policy."
	case ReasonGovernanceConditions:
		return "The governance agent set conditions that need a person to accept them."
	case ReasonSellerInputRequired:
		return "The seller asked for confirmation before going ahead."
	case ReasonChangeNeedsApproval:
		return "This change to a placed buy needs a person to approve it."
	case ReasonCampaignLegs:
		return "This campaign needs a person's approval; one decision covers every leg."
	default:
		return "This buy needs a person to approve it."
	}
}

// Approval is the view of a ledger approval item that the decision rules and
// pages need. It never holds the task token.
type Approval struct {
	ID                  string
	OperationID         string
	Tenant              string
	Approvers           []string
	EscalationApprovers []string
	Requester           string
	Seller              string
	Amount              Money
	Summary             string
	Reason              ReasonCode
	ReasonText          string
	Status              Status
	DecidedBy           string
	DecidedAt           time.Time
	Comment             string
	ExpiresAt           time.Time
	// Purchase is what is bought, from the payload the seller will receive.
	Purchase Purchase
	// Legs are a campaign's media buys, when the approval decides a campaign: one decision
	// for every leg. Amount is then their total.
	Legs []Leg
}

// Leg is one media buy of a campaign, as its approver sees it.
type Leg struct {
	OperationID string
	Seller      string
	PONumber    string
	Amount      Money
	// Why is why this leg asks a person, or that it does not on its own.
	Why string
	// Governance is what the governance agent said of this leg.
	Governance Verdict
}

// IsCampaign reports whether the approval decides a campaign's legs.
func (a Approval) IsCampaign() bool { return len(a.Legs) > 0 }

// Decision is what an approver chose.
type Decision string

// Decisions, as posted by the confirm form's two submit buttons.
const (
	DecisionApprove Decision = "approve"
	DecisionReject  Decision = "reject"
)

// DecisionRequest is one approver's posted decision. ApprovalID comes from
// the request path and Approver from the verified link claims.
type DecisionRequest struct {
	ApprovalID string
	Approver   string
	Decision   Decision
	Comment    string
}

// Result classifies an Outcome.
type Result string

// Results.
const (
	// ResultPending: nothing decided yet; show the confirm form (Check only).
	ResultPending Result = "pending"
	// ResultDecided: this request decides the approval; record it.
	ResultDecided Result = "decided"
	// ResultAlreadyDecided: someone decided earlier; report who and when.
	ResultAlreadyDecided Result = "already_decided"
	// ResultExpired: the approval expired; report when.
	ResultExpired Result = "expired"
)

// Outcome is the truthful answer to a view or a decision.
type Outcome struct {
	Result Result
	// Status is the approval's status after this outcome.
	Status Status
	// By is the decider (ResultDecided, ResultAlreadyDecided).
	By string
	// At is when it was decided, or when it expired (ResultExpired).
	At time.Time
	// Comment is the decider's comment, if any.
	Comment string
	// Record is true when the caller must write the transition
	// pending → Status to the ledger (conditionally on status = pending)
	// before it tells Step Functions. If that write loses a race, reload the
	// approval and call Decide again to get the truth.
	Record bool
}

// Message is a one-line account of the outcome, e.g.
// "already approved by alice at 2026-11-30 05:06 UTC".
func (o Outcome) Message() string {
	switch o.Result {
	case ResultPending:
		return "waiting for a decision"
	case ResultDecided:
		return fmt.Sprintf("%s by %s at %s", o.Status, o.By, FormatTime(o.At))
	case ResultAlreadyDecided:
		return fmt.Sprintf("already %s by %s at %s", o.Status, o.By, FormatTime(o.At))
	case ResultExpired:
		return "expired at " + FormatTime(o.At)
	default:
		return string(o.Result)
	}
}

// Check says what approver should see for a, at now, before any decision:
// ResultPending (show the form), ResultAlreadyDecided or ResultExpired. It
// refuses with ErrNotApprover or ErrSelfApproval. Record is always false:
// a GET changes nothing.
func Check(a Approval, approver string, now time.Time) (Outcome, error) {
	o, err := check(a, approver, now)
	o.Record = false
	return o, err
}

func check(a Approval, approver string, now time.Time) (Outcome, error) {
	if approver != "" && approver == a.Requester {
		return Outcome{}, ErrSelfApproval
	}
	if !isApprover(a, approver) {
		return Outcome{}, ErrNotApprover
	}
	switch a.Status {
	case StatusApproved, StatusRejected:
		if a.DecidedBy == "" || a.DecidedAt.IsZero() {
			return Outcome{}, ErrInvalidState
		}
		return Outcome{Result: ResultAlreadyDecided, Status: a.Status, By: a.DecidedBy, At: a.DecidedAt, Comment: a.Comment}, nil
	case StatusExpired:
		return Outcome{Result: ResultExpired, Status: StatusExpired, At: a.ExpiresAt}, nil
	case StatusPending:
		if a.ExpiresAt.IsZero() {
			return Outcome{}, ErrInvalidState
		}
		if !now.Before(a.ExpiresAt) {
			return Outcome{Result: ResultExpired, Status: StatusExpired, At: a.ExpiresAt, Record: true}, nil
		}
		return Outcome{Result: ResultPending, Status: StatusPending}, nil
	default:
		return Outcome{}, ErrInvalidState
	}
}

// Decide applies the decision rules to a posted decision at now.
//
// In order: the request must name a; the approver must not be the requester
// and must be listed (approvers or escalation approvers); an approval that is
// already decided or expired gets the truth (with Record false, or true for a
// pending approval that has just run out); then the decision must be approve
// or reject and the comment at most MaxCommentRunes. A valid decision on a
// pending approval yields ResultDecided with Record true.
//
// The truth comes before input validation so a late click is told what
// happened, whatever it carried.
func Decide(a Approval, d DecisionRequest, now time.Time) (Outcome, error) {
	if d.ApprovalID == "" || d.ApprovalID != a.ID {
		return Outcome{}, ErrWrongApproval
	}
	o, err := check(a, d.Approver, now)
	if err != nil || o.Result != ResultPending {
		return o, err
	}
	var status Status
	switch d.Decision {
	case DecisionApprove:
		status = StatusApproved
	case DecisionReject:
		status = StatusRejected
	default:
		return Outcome{}, ErrInvalidDecision
	}
	comment, err := normalizeComment(d.Comment)
	if err != nil {
		return Outcome{}, err
	}
	return Outcome{Result: ResultDecided, Status: status, By: d.Approver, At: now.UTC(), Comment: comment, Record: true}, nil
}

// isApprover reports whether approver may decide a: listed among the
// approvers or the escalation approvers. The empty id is never an approver.
func isApprover(a Approval, approver string) bool {
	if approver == "" {
		return false
	}
	return slices.Contains(a.Approvers, approver) || slices.Contains(a.EscalationApprovers, approver)
}

// normalizeComment trims surrounding space, turns CRLF into LF and checks the
// comment: valid UTF-8, no control characters other than newline and tab, at
// most MaxCommentRunes runes.
func normalizeComment(s string) (string, error) {
	if !utf8.ValidString(s) {
		return "", ErrInvalidComment
	}
	s = strings.TrimSpace(strings.ReplaceAll(s, "\r\n", "\n"))
	for _, r := range s {
		if (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return "", ErrInvalidComment
		}
	}
	if utf8.RuneCountInString(s) > MaxCommentRunes {
		return "", ErrCommentTooLong
	}
	return s, nil
}

// FormatTime renders t in UTC to the minute, e.g. "2026-11-30 05:06 UTC".
func FormatTime(t time.Time) string {
	return t.UTC().Format("2006-01-02 15:04 UTC")
}
