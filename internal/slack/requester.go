package slack

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/buyflow/buyflow/internal/approvalcore"
)

// RequesterUpdate is what the person who submitted a buy, a change to a placed buy or a
// campaign is told about one change of its status: the facts of it and, per kind, who decides
// or decided, until when, the seller's media buy id or why it ended.
type RequesterUpdate struct {
	Kind RequesterKind
	// Subject is what changed status: a buy (""), a change to a placed buy or a campaign.
	Subject requesterSubject
	// OperationID is the buy's or the change's operation id, or the campaign id.
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
	// Reason is why the buy ended (failed, rejected, canceled, expired), or why a campaign
	// failed in its own steps.
	Reason string
	// SellerMessage is what the seller said the buy waits for, in its words (KindSellerWaiting,
	// KindSellerInput): untrusted text, escaped and quoted in the message.
	SellerMessage string
	// Link is the buy's API resource (IAM-authenticated, not a signed link).
	Link string

	// BuyID and Before are a change's: the placed buy it changes and its amount before the
	// change (Amount is the amount after it; zero when the change does not move it).
	BuyID  string
	Before approvalcore.Money
	// Name, Legs and Landed are a campaign's: its name, how many legs it has (or the approval
	// covers, while it waits) and how many were placed. Amount is its approval's total while it
	// waits, what the placed legs committed once it ended, and its total budget before.
	Name   string
	Legs   int
	Landed int
}

// requesterSubject is what a requester update is about.
type requesterSubject string

// The subjects besides a buy ("").
const (
	SubjectChange   requesterSubject = "change"
	SubjectCampaign requesterSubject = "campaign"
)

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
	// KindSubmitted and KindPartial are a campaign's: accepted and running; ended with some
	// legs placed and the others not (partially_completed).
	KindSubmitted RequesterKind = "submitted"
	KindPartial   RequesterKind = "partially_completed"
	// KindSellerWaiting and KindSellerInput are a buy's: the seller took it as a long-running
	// task (its people review it), or the seller asks for input before it places it.
	KindSellerWaiting RequesterKind = "seller_waiting"
	KindSellerInput   RequesterKind = "seller_input"
)

// RequesterMessage builds the requester's message for u, with the approval messages' Block
// Kit conventions: a header, the line that says what happened, the buy's fields, a context
// with the reference. Every text from outside (seller, reason, comment, ids) is escaped.
func RequesterMessage(u RequesterUpdate) (Message, error) {
	if u.OperationID == "" {
		return Message{}, errors.New("slack: requester message needs the operation id")
	}
	switch u.Subject {
	case SubjectChange:
		return changeMessage(u)
	case SubjectCampaign:
		return campaignMessage(u)
	case "":
	default:
		return Message{}, fmt.Errorf("slack: no requester message about %q", plain(string(u.Subject), 32))
	}
	var title, line string
	var err error
	switch u.Kind {
	case KindAwaitingApproval:
		title = "Waiting for approval: your media buy"
		if line, err = waitingLine(u, "Your buy", "it", "Nothing is bought before."); err != nil {
			return Message{}, err
		}
	case KindApproved:
		title = "Approved: your media buy"
		if line, err = approvedLine(u, "buyflow now places it with the seller."); err != nil {
			return Message{}, err
		}
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
	case KindSellerWaiting:
		title = "Waiting for the seller: your media buy"
		line = "*" + escape(u.Seller, maxFieldRunes) + "* took your buy for review by its people, which can take days; nothing is placed yet."
		if strings.TrimSpace(u.SellerMessage) != "" {
			line = quoted(line+" The seller says:", u.SellerMessage)
		}
	case KindSellerInput:
		title = "The seller asks for input: your media buy"
		line = "*" + escape(u.Seller, maxFieldRunes) + "* asks for input before it places your buy; nothing is placed yet."
		if strings.TrimSpace(u.SellerMessage) != "" {
			line = quoted(line+" The seller says:", u.SellerMessage)
		}
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
	return requesterMessage(u, title, line, "PO "+plain(u.PONumber, maxFieldRunes)+", "+plain(u.Amount.String(), maxFieldRunes), []Text{
		{Type: "mrkdwn", Text: "*PO number*\n" + escape(orUnknown(u.PONumber), maxFieldRunes)},
		{Type: "mrkdwn", Text: "*Seller*\n" + escape(u.Seller, maxFieldRunes)},
		{Type: "mrkdwn", Text: "*Amount*\n" + escape(u.Amount.String(), maxFieldRunes)},
	}), nil
}

// changeMessage is the requester's message about a change to a placed buy: waiting for its
// approval, applied (before -> after), or not applied (the buy stays as it was).
func changeMessage(u RequesterUpdate) (Message, error) {
	if u.BuyID == "" {
		return Message{}, errors.New("slack: a change's message needs the buy it changes")
	}
	moves := u.Before.String() + " → " + u.Amount.String()
	if u.Amount.Currency == "" || u.Amount == u.Before {
		moves = u.Before.String() + " (unchanged)"
	}
	var title, line string
	var err error
	switch u.Kind {
	case KindAwaitingApproval:
		title = "Waiting for approval: your change to a media buy"
		if line, err = waitingLine(u, "Your change ("+escape(moves, maxFieldRunes)+")", "it", "The buy stays as it is before."); err != nil {
			return Message{}, err
		}
	case KindApproved:
		title = "Approved: your change to a media buy"
		if line, err = approvedLine(u, "buyflow now sends it to the seller."); err != nil {
			return Message{}, err
		}
	case KindPlaced:
		title = "Applied: your change to a media buy"
		line = "*Applied* by " + escape(u.Seller, maxFieldRunes) + ": the budget is now " + escape(moves, maxFieldRunes) + "."
	case KindFailed, KindRejected, KindCanceled, KindExpired:
		title = "Not applied: your change to a media buy"
		why := escape(orUnknown(u.Reason), maxFieldRunes*2)
		switch {
		case u.Kind == KindRejected && u.DecidedBy != "":
			why = "rejected by " + person(u.DecidedBy) + " at " + date(u.DecidedAt) + "."
		case u.Kind == KindExpired:
			why = "no approver decided in time."
		}
		line = "*Not applied*: " + why + " The buy stays as it was, at " + escape(u.Before.String(), maxFieldRunes) + "."
	default:
		return Message{}, fmt.Errorf("slack: no requester message for a change %q", plain(string(u.Kind), 32))
	}
	return requesterMessage(u, title, line, "media buy "+plain(u.BuyID, maxFieldRunes)+", "+plain(moves, maxFieldRunes), []Text{
		{Type: "mrkdwn", Text: "*Media buy*\n" + escape(u.BuyID, maxFieldRunes)},
		{Type: "mrkdwn", Text: "*PO number*\n" + escape(orUnknown(u.PONumber), maxFieldRunes)},
		{Type: "mrkdwn", Text: "*Seller*\n" + escape(u.Seller, maxFieldRunes)},
		{Type: "mrkdwn", Text: "*Budget*\n" + escape(moves, maxFieldRunes)},
	}), nil
}

// campaignMessage is the requester's message about a campaign: submitted, waiting for its one
// approval, or ended with how many legs were placed and what they committed.
func campaignMessage(u RequesterUpdate) (Message, error) {
	if u.Legs < 1 {
		return Message{}, errors.New("slack: a campaign's message needs its legs")
	}
	legs := plural(u.Legs, "leg")
	placed := strconv.Itoa(u.Landed) + " of " + legs + " placed"
	amountLabel, legsLabel := "Committed", placed
	var title, line string
	var err error
	switch u.Kind {
	case KindSubmitted:
		title = "Submitted: your campaign"
		line = "Your campaign of " + legs + " (" + escape(u.Amount.String(), maxFieldRunes) + ") is under way: each leg is checked with governance, then placed."
		amountLabel, legsLabel = "Total budget", legs
	case KindAwaitingApproval:
		title = "Waiting for approval: your campaign"
		if line, err = waitingLine(u, "Your campaign", legs+" ("+escape(u.Amount.String(), maxFieldRunes)+") in one decision", "Nothing is bought before."); err != nil {
			return Message{}, err
		}
		amountLabel, legsLabel = "Total to approve", legs
	case KindPlaced:
		title = "Completed: your campaign"
		line = "*Completed*: every leg was placed (" + placed + "), committing " + escape(u.Amount.String(), maxFieldRunes) + "."
	case KindPartial:
		title = "Partially completed: your campaign"
		line = "*Partially completed*: " + placed + ", committing " + escape(u.Amount.String(), maxFieldRunes) + "; the others were not bought."
	case KindFailed:
		title = "Failed: your campaign"
		line = "*Failed*: " + placed + "; nothing is committed."
		if strings.TrimSpace(u.Reason) != "" {
			// A campaign that failed in its own steps: its reason says where it stopped and
			// what its legs committed, which may not be nothing.
			line = "*Failed*: " + escape(u.Reason, maxFieldRunes*2)
		}
	case KindCanceled:
		title = "Canceled: your campaign"
		line = "*Canceled*: nothing was bought (" + placed + ")."
	default:
		return Message{}, fmt.Errorf("slack: no requester message for a campaign %q", plain(string(u.Kind), 32))
	}
	name := u.Name
	if strings.TrimSpace(name) == "" {
		name = u.OperationID
	}
	return requesterMessage(u, title, line, plain(name, maxFieldRunes)+", "+plain(legsLabel, maxFieldRunes)+", "+plain(u.Amount.String(), maxFieldRunes), []Text{
		{Type: "mrkdwn", Text: "*Campaign*\n" + escape(name, maxFieldRunes)},
		{Type: "mrkdwn", Text: "*Legs*\n" + escape(legsLabel, maxFieldRunes)},
		{Type: "mrkdwn", Text: "*" + amountLabel + "*\n" + escape(u.Amount.String(), maxFieldRunes)},
	}), nil
}

// requesterMessage lays a requester's message out as the approval messages are: a header, the
// line that says what happened, the fields, a context with the reference.
func requesterMessage(u RequesterUpdate, title, line, summary string, fields []Text) Message {
	line = withComment(line, u.Comment)
	ref := "Reference: " + escape(u.OperationID, maxFieldRunes)
	if u.Link != "" {
		ref += " · " + escape(u.Link, maxURLLen/2)
	}
	return Message{
		Text: plain(title, maxSummaryRunes) + " (" + summary + ")",
		Blocks: []Block{
			header(title),
			section(line),
			{Type: "section", Fields: fields},
			{Type: "context", Elements: []Text{{Type: "mrkdwn", Text: ref}}},
		},
	}
}

// withComment adds the approver's comment, quoted, to line.
func withComment(line, comment string) string {
	return quoted(line, comment)
}

// quoted adds text from outside (an approver's comment, a seller's message), escaped and
// bounded, as a quote under line; blank text adds nothing.
func quoted(line, text string) string {
	if c := strings.TrimSpace(text); c != "" {
		return line + "\n>" + strings.ReplaceAll(escape(c, maxCommentRunes), "\n", "\n>")
	}
	return line
}

// waitingLine says that subject waits for u's approvers to approve what, until u's deadline,
// then what holds meanwhile; an update without approvers or a deadline is refused.
func waitingLine(u RequesterUpdate, subject, what, meanwhile string) (string, error) {
	if len(u.Approvers) == 0 || u.Until.IsZero() {
		return "", errors.New("slack: a pending approval needs its approvers and deadline")
	}
	who := make([]string, 0, len(u.Approvers))
	for _, a := range u.Approvers {
		who = append(who, person(a))
	}
	return subject + " waits for *" + strings.Join(who, ", ") + "* to approve " + what + ", until " + date(u.Until) + ". " + meanwhile, nil
}

// approvedLine says who approved u and when, then what buyflow does next.
func approvedLine(u RequesterUpdate, next string) (string, error) {
	if u.DecidedBy == "" {
		return "", errors.New("slack: an approval needs its approver")
	}
	return "*Approved* by " + person(u.DecidedBy) + " at " + date(u.DecidedAt) + ". " + next, nil
}

// plural is "1 leg", "3 legs".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

func orUnknown(s string) string {
	if strings.TrimSpace(s) == "" {
		return "(no reason recorded)"
	}
	return s
}
