package slack

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/buyflow/buyflow/internal/approvalcore"
)

// RequesterUpdate is what the person who submitted a buy is told about one change of its
// status: the facts of the buy and, per kind, who decides or decided, until when, the seller's
// media buy id or why it ended.
type RequesterUpdate struct {
	Kind        RequesterKind
	OperationID string
	PONumber    string
	Seller      string
	Amount      approvalcore.Money
	// Approvers and Until: who must approve and the deadline (KindAwaitingApproval).
	Approvers []string
	Until     time.Time
	// DecidedBy, DecidedAt and Comment: the approver's decision (KindApproved, and KindRejected
	// when a person rejected it).
	DecidedBy string
	DecidedAt time.Time
	Comment   string
	// MediaBuyID is the seller's id of the placed buy (KindPlaced).
	MediaBuyID string
	// Reason is why the buy ended (failed, rejected, canceled, expired).
	Reason string
	// Link is the buy's API resource (IAM-authenticated, not a signed link).
	Link string
}

// RequesterKind is which update it is.
type RequesterKind string

// The updates a requester gets.
const (
	KindAwaitingApproval RequesterKind = "awaiting_approval"
	KindApproved         RequesterKind = "approved"
	KindRejected         RequesterKind = "rejected"
	KindPlaced           RequesterKind = "placed"
	KindFailed           RequesterKind = "failed"
	KindCanceled         RequesterKind = "canceled"
	KindExpired          RequesterKind = "expired"
)

// RequesterMessage builds the requester's message for u, with the approval messages' Block
// Kit conventions: a header, the line that says what happened, the buy's fields, a context
// with the reference. Every text from outside (seller, reason, comment, ids) is escaped.
func RequesterMessage(u RequesterUpdate) (Message, error) {
	if u.OperationID == "" {
		return Message{}, errors.New("slack: requester message needs the operation id")
	}
	var title, line string
	switch u.Kind {
	case KindAwaitingApproval:
		if len(u.Approvers) == 0 || u.Until.IsZero() {
			return Message{}, errors.New("slack: a pending approval needs its approvers and deadline")
		}
		who := make([]string, 0, len(u.Approvers))
		for _, a := range u.Approvers {
			who = append(who, person(a))
		}
		title = "Waiting for approval: your media buy"
		line = "Your buy waits for *" + strings.Join(who, ", ") + "* to approve it, until " + date(u.Until) + ". Nothing is bought before."
	case KindApproved:
		if u.DecidedBy == "" {
			return Message{}, errors.New("slack: an approval needs its approver")
		}
		title = "Approved: your media buy"
		line = "*Approved* by " + person(u.DecidedBy) + " at " + date(u.DecidedAt) + ". buyflow now places it with the seller."
	case KindRejected:
		title = "Rejected: your media buy"
		if u.DecidedBy != "" {
			line = "*Rejected* by " + person(u.DecidedBy) + " at " + date(u.DecidedAt) + ". Nothing was bought."
		} else {
			line = "*Rejected*: " + escape(orUnknown(u.Reason), maxFieldRunes*2) + " Nothing was bought."
		}
	case KindPlaced:
		if u.MediaBuyID == "" {
			return Message{}, errors.New("slack: a placed buy needs the seller's media buy id")
		}
		title = "Placed: your media buy"
		line = "*Placed* with " + escape(u.Seller, maxFieldRunes) + ": the seller's media buy id is `" + escape(u.MediaBuyID, maxFieldRunes) + "`."
	case KindFailed:
		title = "Failed: your media buy"
		line = "*Failed*: " + escape(orUnknown(u.Reason), maxFieldRunes*2)
	case KindCanceled:
		title = "Canceled: your media buy"
		line = "*Canceled*: " + escape(orUnknown(u.Reason), maxFieldRunes*2)
	case KindExpired:
		title = "Expired: your media buy"
		line = "*Expired*: no approver decided in time. Nothing was bought."
	default:
		return Message{}, fmt.Errorf("slack: no requester message for %q", plain(string(u.Kind), 32))
	}
	if c := strings.TrimSpace(u.Comment); c != "" {
		line += "\n>" + strings.ReplaceAll(escape(c, maxCommentRunes), "\n", "\n>")
	}
	ref := "Reference: " + escape(u.OperationID, maxFieldRunes)
	if u.Link != "" {
		ref += " · " + escape(u.Link, maxURLLen/2)
	}
	return Message{
		Text: plain(title, maxSummaryRunes) + " (PO " + plain(u.PONumber, maxFieldRunes) + ", " + plain(u.Amount.String(), maxFieldRunes) + ")",
		Blocks: []Block{
			header(title),
			section(line),
			{Type: "section", Fields: []Text{
				{Type: "mrkdwn", Text: "*PO number*\n" + escape(orUnknown(u.PONumber), maxFieldRunes)},
				{Type: "mrkdwn", Text: "*Seller*\n" + escape(u.Seller, maxFieldRunes)},
				{Type: "mrkdwn", Text: "*Amount*\n" + escape(u.Amount.String(), maxFieldRunes)},
			}},
			{Type: "context", Elements: []Text{{Type: "mrkdwn", Text: ref}}},
		},
	}, nil
}

func orUnknown(s string) string {
	if strings.TrimSpace(s) == "" {
		return "(no reason recorded)"
	}
	return s
}
