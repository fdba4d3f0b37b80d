package slack

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/buyflow/buyflow/internal/approvalcore"
	"github.com/buyflow/buyflow/internal/charclass"
)

// Message is a Slack message as chat.postMessage, chat.update and incoming
// webhooks accept it. Channel is a channel id or, for a direct message, the
// approver's Slack user id; webhooks ignore it.
type Message struct {
	Channel     string  `json:"channel,omitempty"`
	TS          string  `json:"ts,omitempty"`
	Text        string  `json:"text"`
	Blocks      []Block `json:"blocks,omitempty"`
	UnfurlLinks bool    `json:"unfurl_links"`
	UnfurlMedia bool    `json:"unfurl_media"`
}

// Block is a Block Kit layout block (header, section, context, divider).
type Block struct {
	Type      string  `json:"type"`
	BlockID   string  `json:"block_id,omitempty"`
	Text      *Text   `json:"text,omitempty"`
	Fields    []Text  `json:"fields,omitempty"`
	Accessory *button `json:"accessory,omitempty"`
	// Elements holds a context block's Text elements.
	Elements []Text `json:"elements,omitempty"`
}

// Text is a Block Kit text object.
type Text struct {
	Type string `json:"type"` // "plain_text" or "mrkdwn"
	Text string `json:"text"`
}

// button is a Block Kit link button.
type button struct {
	Type               string `json:"type"` // "button"
	Text               Text   `json:"text"`
	URL                string `json:"url"`
	ActionID           string `json:"action_id"`
	Style              string `json:"style,omitempty"`
	AccessibilityLabel string `json:"accessibility_label,omitempty"`
}

// Review is one approver's way in: their Slack id and their own signed link.
// A link is bound to its approver, so each approver needs their own.
type Review struct {
	// Approver is the approver id the link is bound to; a Slack user id
	// (U… or W…) is rendered as a mention.
	Approver string
	// URL is the signed approval link for that approver.
	URL string
}

// Limits that keep a message inside Slack's Block Kit limits.
const (
	// MaxReviews is the most review buttons one message carries (Slack allows
	// 50 blocks; the rest of the message uses at most 8).
	MaxReviews = 40
	maxURLLen  = 3000
	// Raw rune budgets before escaping; escaping grows text at most 5x
	// ("&" → "&amp;"), which keeps every text under its 2000/3000 limit.
	maxSummaryRunes = 500
	maxFieldRunes   = 300
	maxCommentRunes = 500
	// A package line is at most ~220 runes before escaping, and a section lists at most
	// approvalcore.MaxShownPackages of them (or maxConditions conditions of ~250): under 3000.
	maxProductRunes = 100
	maxConditions   = 5
)

// isSlackUserID reports whether id has the shape of a Slack user id: U or W, then 2–20 of
// [A-Z0-9].
func isSlackUserID(id string) bool {
	return id != "" && (id[0] == 'U' || id[0] == 'W') && slackIDChars.Span(id[1:], 2, 20)
}

var slackIDChars = charclass.Of("A-Z0-9")

// RequestMessage builds the approval request: what is bought, from which
// seller, the amount, why approval is needed, who asked, the deadline and one
// Review button per entry in reviews. For direct messages pass one Review
// (the recipient's); for a shared channel pass all approvers' reviews, and
// note that everyone in the channel then sees every approver's link.
func RequestMessage(a approvalcore.Approval, reviews []Review) (Message, error) {
	if len(reviews) == 0 {
		return Message{}, errors.New("slack: request message needs at least one review link")
	}
	if len(reviews) > MaxReviews {
		return Message{}, fmt.Errorf("slack: request message takes at most %d review links, got %d", MaxReviews, len(reviews))
	}
	blocks := []Block{
		header("Approval needed: " + a.Subject()),
		section(bold(a.Summary, maxSummaryRunes)),
		fields(a),
	}
	blocks = append(blocks, purchaseBlocks(a)...)
	blocks = append(blocks, section("*Why approval is needed*\n"+escape(reasonLine(a), maxFieldRunes*2)))
	for i, r := range reviews {
		u, err := url.Parse(r.URL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || len(r.URL) > maxURLLen {
			return Message{}, fmt.Errorf("slack: review link %d is not an absolute http(s) url of at most %d bytes", i+1, maxURLLen)
		}
		if r.Approver == "" {
			return Message{}, fmt.Errorf("slack: review link %d has no approver", i+1)
		}
		who := person(r.Approver)
		text := "Review and decide. This link is for " + who + " only."
		blocks = append(blocks, Block{
			Type: "section",
			Text: &Text{Type: "mrkdwn", Text: text},
			Accessory: &button{
				Type:               "button",
				Text:               Text{Type: "plain_text", Text: "Review"},
				URL:                r.URL,
				ActionID:           "review-" + strconv.Itoa(i+1),
				Style:              "primary",
				AccessibilityLabel: "Review the media buy and approve or reject it",
			},
		})
	}
	blocks = append(blocks, contextBlock(a, "Nothing is bought until an approver decides. The review page asks before it changes anything."))
	return Message{
		Text:   "Approval needed: " + plain(a.Summary, maxSummaryRunes) + " from " + plain(a.Seller, maxFieldRunes) + ", " + plain(a.Amount.String(), maxFieldRunes),
		Blocks: blocks,
	}, nil
}

// StatusMessage builds the message that replaces a request once the
// approval is decided or expired (bot), or follows it (webhook). It carries
// no review link. It refuses a pending approval.
func StatusMessage(a approvalcore.Approval) (Message, error) {
	var title, line, text string
	switch a.Status {
	case approvalcore.StatusApproved, approvalcore.StatusRejected:
		if a.DecidedBy == "" || a.DecidedAt.IsZero() {
			return Message{}, errors.New("slack: decided approval has no decider or time")
		}
		verb := "Approved"
		if a.Status == approvalcore.StatusRejected {
			verb = "Rejected"
		}
		title = verb + ": " + a.Subject()
		line = "*" + verb + "* by " + person(a.DecidedBy) + " at " + date(a.DecidedAt) + "."
		text = verb + " by " + person(a.DecidedBy) + " at " + approvalcore.FormatTime(a.DecidedAt) + ": " + plain(a.Summary, maxSummaryRunes)
	case approvalcore.StatusExpired:
		title = "Expired: " + a.Subject()
		line = "*Expired* at " + date(a.ExpiresAt) + " with no decision. Nothing was bought."
		text = "Expired at " + approvalcore.FormatTime(a.ExpiresAt) + ": " + plain(a.Summary, maxSummaryRunes)
	default:
		return Message{}, fmt.Errorf("slack: status message needs a decided or expired approval, not %q", plain(string(a.Status), 32))
	}
	if c := strings.TrimSpace(a.Comment); c != "" {
		line += "\n>" + strings.ReplaceAll(escape(c, maxCommentRunes), "\n", "\n>")
	}
	return Message{
		Text: text,
		Blocks: []Block{
			header(title),
			section(line),
			section(bold(a.Summary, maxSummaryRunes)),
			fields(a),
			contextBlock(a, ""),
		},
	}, nil
}

// purchaseBlocks shows what is bought (one line per package, long lists folded, the total)
// and what governance said. Slack has no tables; each line is short enough for a phone.
func purchaseBlocks(a approvalcore.Approval) []Block {
	pu := a.Purchase
	var out []Block
	var b strings.Builder
	switch {
	case a.IsCampaign():
		// A campaign's legs, folded as packages are: one line each, the total last.
		shown, folded := a.Legs, 0
		if len(shown) > approvalcore.MaxShownPackages {
			shown, folded = a.Legs[:approvalcore.MaxShownPackages-1], len(a.Legs)-(approvalcore.MaxShownPackages-1)
		}
		b.WriteString("*What is bought* (" + strconv.Itoa(len(a.Legs)) + " legs, one decision for all)")
		for _, l := range shown {
			b.WriteString("\n• " + escape(l.Seller, 60) + " · " + escape(l.PONumber, 40) + " · " + escape(l.Amount.String(), 30) + " · " + escape(l.Why, 80))
		}
		if folded > 0 {
			b.WriteString("\n• and " + strconv.Itoa(folded) + " more legs")
		}
		b.WriteString("\n*Total* " + escape(a.Amount.String(), 60))
	case pu.Change != nil:
		writeChange(&b, *pu.Change)
	case len(pu.Packages) > 0:
		shown, folded := pu.Shown()
		b.WriteString("*What is bought* (" + strconv.Itoa(len(pu.Packages)) + " package")
		if len(pu.Packages) > 1 {
			b.WriteString("s")
		}
		b.WriteString(")")
		for _, pk := range shown {
			b.WriteString("\n• " + escape(pk.Product, maxProductRunes) + " · " + escape(pk.Flight(), 60) + " · " + escape(pk.Budget.String(), 60))
		}
		if folded > 0 {
			b.WriteString("\n• and " + strconv.Itoa(folded) + " more packages · " + escape(pu.Folded().String(), 60))
		}
		b.WriteString("\n*Total* " + escape(a.Amount.String(), 60))
	case pu.ProposalID != "":
		b.WriteString("*What is bought*\nThe seller's proposal " + escape(pu.ProposalID, maxProductRunes) + ", " + escape(a.Amount.String(), 60) + " in total")
		if f := pu.Flight(); f != "" {
			b.WriteString(" · " + escape(f, 60))
		}
	}
	if b.Len() > 0 {
		out = append(out, section(b.String()))
	}
	if g := governanceBlock(pu.Governance); g != nil {
		out = append(out, *g)
	}
	return out
}

// governanceBlock is what governance said, or nil when it was not recorded.
func governanceBlock(g approvalcore.Verdict) *Block {
	if g.Verdict == "" {
		return nil
	}
	var b strings.Builder
	b.WriteString("*Governance:* " + escape(g.Label(), 60))
	for i, c := range g.Conditions {
		if i == maxConditions {
			b.WriteString("\n• and " + strconv.Itoa(len(g.Conditions)-i) + " more conditions (see the review page)")
			break
		}
		b.WriteString("\n• " + escape(c.Field, maxProductRunes))
		if c.Reason != "" {
			b.WriteString(": " + escape(c.Reason, maxFieldRunes/2))
		}
		if c.NeedsPerson {
			b.WriteString(" _(needs your judgement)_")
		}
	}
	blk := section(b.String())
	return &blk
}

func header(s string) Block {
	return Block{Type: "header", Text: &Text{Type: "plain_text", Text: s}}
}

func section(mrkdwn string) Block {
	return Block{Type: "section", Text: &Text{Type: "mrkdwn", Text: mrkdwn}}
}

func fields(a approvalcore.Approval) Block {
	return Block{Type: "section", Fields: []Text{
		{Type: "mrkdwn", Text: "*Seller*\n" + escape(a.Seller, maxFieldRunes)},
		{Type: "mrkdwn", Text: "*Amount*\n" + escape(a.Amount.String(), maxFieldRunes)},
		{Type: "mrkdwn", Text: "*Requested by*\n" + person(a.Requester)},
		{Type: "mrkdwn", Text: "*Decide before*\n" + date(a.ExpiresAt)},
	}}
}

func contextBlock(a approvalcore.Approval, note string) Block {
	ref := "Reference: " + escape(a.OperationID, maxFieldRunes) + " · approval " + escape(a.ID, maxFieldRunes)
	els := []Text{{Type: "mrkdwn", Text: ref}}
	if note != "" {
		els = append(els, Text{Type: "mrkdwn", Text: note})
	}
	return Block{Type: "context", Elements: els}
}

func reasonLine(a approvalcore.Approval) string {
	s := a.Reason.Label()
	if t := strings.TrimSpace(a.ReasonText); t != "" {
		s += " " + truncate(t, maxFieldRunes)
	}
	return s
}

// bold is escaped user text in bold, or a placeholder if empty.
func bold(s string, max int) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return "_(no summary)_"
	}
	// A "*" inside may end the bold early: a formatting glitch, not an injection.
	return "*" + escape(s, max) + "*"
}

// person renders an approver or requester id: a Slack user id as a mention,
// anything else as escaped text.
func person(id string) string {
	if isSlackUserID(id) {
		return "<@" + id + ">"
	}
	if id == "" {
		return "_(unknown)_"
	}
	return escape(id, maxFieldRunes)
}

// date renders t with Slack's date formatting (shown in the reader's time
// zone) and a UTC fallback.
func date(t time.Time) string {
	if t.IsZero() {
		return "_(not set)_"
	}
	return "<!date^" + strconv.FormatInt(t.Unix(), 10) + "^{date_short_pretty} {time}|" + approvalcore.FormatTime(t) + ">"
}

// escape truncates s to max runes and escapes the three characters Slack's
// mrkdwn gives meaning to (&, <, >): with them escaped no user text can
// mention @channel or forge a link.
func escape(s string, max int) string {
	s = truncate(s, max)
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// plain is escape for the notification fallback text, which Slack also
// parses as mrkdwn.
func plain(s string, max int) string { return escape(strings.TrimSpace(s), max) }

func truncate(s string, max int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	r := []rune(s)
	return string(r[:max-1]) + "…"
}

// marshal encodes v as JSON without HTML escaping: Slack reads "<" as
// mrkdwn syntax either way, and the plain form is easier to read in goldens.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
