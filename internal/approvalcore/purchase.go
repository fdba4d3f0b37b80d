package approvalcore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/buyflow/buyflow/internal/money"
)

// Purchase is what an approver is asked to buy, read from the create_media_buy payload that
// governance checked and the seller will receive: its packages (or the proposal it accepts),
// its flight, and what governance said about it. The pages and Slack messages show it so that
// what the approver sees is what the seller gets.
type Purchase struct {
	// Packages are the packages in the order the seller receives them.
	Packages []Package
	// ProposalID is set for a proposal buy, which commits total_budget without packages.
	ProposalID string
	// Start and End are the buy's flight (start_time may be "asap"), as sent.
	Start, End string
	// Governance is what the governance agent said; zero when it was not recorded.
	Governance Verdict
	// Change, when set, is a change to a placed buy that the approver decides instead of a
	// new buy (Packages, ProposalID and the flight are then empty).
	Change *ChangeReview
}

// Package is one package of the buy.
type Package struct {
	Product string
	// Start and End are the package's own flight when it has one, else the buy's.
	Start, End string
	Budget     Money
}

// Verdict is the governance agent's answer that let the buy reach an approver.
type Verdict struct {
	// Verdict is approved or conditions (denied buys never reach an approver).
	Verdict    string
	Conditions []Condition
}

// Condition is one governance condition: the field it is about and why.
type Condition struct {
	Field  string
	Reason string
	// NeedsPerson is true when governance gave no value a machine could apply.
	NeedsPerson bool
}

// MaxShownPackages is how many package rows a page or message lists before it folds the rest
// into one "and N more" line (their budgets still count in the total).
const MaxShownPackages = 10

// ParsePurchase reads the packages and flight of a create_media_buy payload whose amounts are
// in currency. Every budget is read exactly; a payload it cannot read fully is an error, so
// that an approver is never shown part of a buy as if it were all of it.
func ParsePurchase(payload []byte, currency string) (Purchase, error) {
	var mb struct {
		ProposalID string `json:"proposal_id"`
		Start      string `json:"start_time"`
		End        string `json:"end_time"`
		Packages   []struct {
			Product string          `json:"product_id"`
			Budget  json.RawMessage `json:"budget"`
			Start   string          `json:"start_time"`
			End     string          `json:"end_time"`
		} `json:"packages"`
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	if err := dec.Decode(&mb); err != nil {
		return Purchase{}, errors.New("approval purchase: payload is not a create_media_buy object")
	}
	p := Purchase{ProposalID: mb.ProposalID, Start: mb.Start, End: mb.End}
	for i, pk := range mb.Packages {
		var n json.Number
		raw := bytes.TrimSpace(pk.Budget)
		if len(raw) == 0 || raw[0] == '"' || json.Unmarshal(raw, &n) != nil {
			return Purchase{}, fmt.Errorf("approval purchase: package %d budget is not a number", i)
		}
		a, err := money.Parse(n.String(), currency)
		if err != nil {
			return Purchase{}, fmt.Errorf("approval purchase: package %d budget: %w", i, err)
		}
		pkg := Package{Product: pk.Product, Start: orElse(pk.Start, mb.Start), End: orElse(pk.End, mb.End),
			Budget: Money{Minor: a.Minor, Currency: currency}}
		p.Packages = append(p.Packages, pkg)
	}
	return p, nil
}

// Flight is the package's flight as one line, e.g. "2026-03-01 → 2026-03-31". An RFC 3339
// time is shown as its date (in the offset it was written in); anything else as sent.
func (p Package) Flight() string {
	return flight(p.Start, p.End)
}

// Flight is the buy's flight as one line.
func (p Purchase) Flight() string { return flight(p.Start, p.End) }

// Shown returns the packages to list and how many are folded.
func (p Purchase) Shown() ([]Package, int) {
	if len(p.Packages) <= MaxShownPackages {
		return p.Packages, 0
	}
	return p.Packages[:MaxShownPackages-1], len(p.Packages) - (MaxShownPackages - 1)
}

// Folded returns the sum of the budgets of the packages Shown folds.
func (p Purchase) Folded() Money {
	shown, n := p.Shown()
	var m Money
	if n == 0 {
		return m
	}
	m.Currency = p.Packages[0].Budget.Currency
	for _, pk := range p.Packages[len(shown):] {
		m.Minor += pk.Budget.Minor
	}
	return m
}

// Label is the verdict in words, e.g. "Approved with 2 conditions".
func (v Verdict) Label() string {
	switch v.Verdict {
	case "":
		return ""
	case "approved":
		return "Approved"
	case "conditions":
		n := len(v.Conditions)
		if n == 1 {
			return "Approved with 1 condition"
		}
		return fmt.Sprintf("Approved with %d conditions", n)
	default:
		return v.Verdict
	}
}

func flight(start, end string) string {
	s, e := day(start), day(end)
	switch {
	case s == "" && e == "":
		return ""
	case e == "":
		return "from " + s
	case s == "":
		return "until " + e
	}
	return s + " → " + e
}

// day shortens an RFC 3339 time to its date; "asap" and anything else stay as they are.
func day(t string) string {
	t = strings.TrimSpace(t)
	if len(t) > 10 && t[4] == '-' && t[7] == '-' && (t[10] == 'T' || t[10] == 't') {
		return t[:10]
	}
	return t
}

func orElse(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Change is a change to a placed buy put before an approver: the buy it changes, each line
// that changes (before and after, as the seller will be asked), the budget before and after,
// and what governance said. The stage that asks for the approval stores it once, as
// ChangeRecord, and every page and message reads it back with ParseChange, so what an
// approver sees is what was checked and will be sent.
type ChangeReview struct {
	// BuyID is the operation of the placed buy; MediaBuyID the seller's id for it.
	BuyID, MediaBuyID string
	// Kind is budget, end_time, pause, resume or cancel.
	Kind string
	// Summary says what changes in words.
	Summary string
	// Before and After are the buy's budget before and after the change.
	Before, After Money
	// Lines are what changes, in the order shown.
	Lines []ChangeLine
}

// ChangeLine is one thing a change changes, before and after, ready to show.
type ChangeLine struct {
	What, Before, After string
}

// Increase is how much the change adds to the budget; zero when it adds nothing.
func (c ChangeReview) Increase() Money {
	d := c.After.Minor - c.Before.Minor
	if d < 0 || c.After.Currency != c.Before.Currency {
		d = 0
	}
	return Money{Minor: d, Currency: c.After.Currency}
}

// ChangeRecord is the stored form of a Change: amounts are decimal strings in Currency, read
// exactly by ParseChange.
type ChangeRecord struct {
	BuyID      string `json:"buy_operation_id"`
	MediaBuyID string `json:"media_buy_id"`
	Kind       string `json:"kind"`
	Summary    string `json:"summary"`
	Currency   string `json:"currency"`
	// BudgetBefore and BudgetAfter are the buy's total budget before and after the change.
	BudgetBefore string             `json:"budget_before"`
	BudgetAfter  string             `json:"budget_after"`
	Lines        []ChangeRecordLine `json:"lines"`
	Governance   VerdictRecord      `json:"governance"`
}

// ChangeRecordLine is one line of a ChangeRecord. Amount marks Before and After as decimal
// amounts in the record's currency; other lines are shown as written.
type ChangeRecordLine struct {
	What   string `json:"what"`
	Before string `json:"before"`
	After  string `json:"after"`
	Amount bool   `json:"amount,omitempty"`
}

// VerdictRecord is the stored form of a Verdict.
type VerdictRecord struct {
	Verdict    string            `json:"verdict"`
	Conditions []ConditionRecord `json:"conditions,omitempty"`
}

// ConditionRecord is the stored form of a Condition.
type ConditionRecord struct {
	Field       string `json:"field"`
	Reason      string `json:"reason,omitempty"`
	NeedsPerson bool   `json:"needs_person,omitempty"`
}

// maxChangeLines bounds the lines a change shows (a budget change sets at most 100 packages,
// plus its total).
const maxChangeLines = 120

// ParseChange reads a stored ChangeRecord. Every amount is read exactly in the record's
// currency; a record it cannot read fully is an error, so that an approver is never shown
// part of a change as if it were all of it. The governance verdict is returned beside it, as
// a Purchase carries it.
func ParseChange(raw []byte) (ChangeReview, Verdict, error) {
	var r ChangeRecord
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return ChangeReview{}, Verdict{}, fmt.Errorf("approval change: not a change record: %w", err)
	}
	if r.BuyID == "" || r.Kind == "" {
		return ChangeReview{}, Verdict{}, errors.New("approval change: the record names no buy or kind")
	}
	if len(r.Lines) == 0 || len(r.Lines) > maxChangeLines {
		return ChangeReview{}, Verdict{}, fmt.Errorf("approval change: %d lines; a change shows 1 to %d", len(r.Lines), maxChangeLines)
	}
	amount := func(s, what string) (Money, error) {
		a, err := money.ParseDecimal(strings.TrimSpace(s), r.Currency)
		if err != nil {
			return Money{}, fmt.Errorf("approval change: %s %q: %w", what, s, err)
		}
		return Money{Minor: a.Minor, Currency: a.Currency}, nil
	}
	c := ChangeReview{BuyID: r.BuyID, MediaBuyID: r.MediaBuyID, Kind: r.Kind, Summary: r.Summary}
	var err error
	if c.Before, err = amount(r.BudgetBefore, "budget before"); err != nil {
		return ChangeReview{}, Verdict{}, err
	}
	if c.After, err = amount(r.BudgetAfter, "budget after"); err != nil {
		return ChangeReview{}, Verdict{}, err
	}
	for _, l := range r.Lines {
		line := ChangeLine{What: l.What, Before: l.Before, After: l.After}
		if l.Amount {
			b, err := amount(l.Before, l.What)
			if err != nil {
				return ChangeReview{}, Verdict{}, err
			}
			a, err := amount(l.After, l.What)
			if err != nil {
				return ChangeReview{}, Verdict{}, err
			}
			line.Before, line.After = b.String(), a.String()
		}
		c.Lines = append(c.Lines, line)
	}
	v := Verdict{Verdict: r.Governance.Verdict}
	for _, cond := range r.Governance.Conditions {
		v.Conditions = append(v.Conditions, Condition(cond))
	}
	return c, v, nil
}

// Subject names what the approval decides, for titles and sentences: "media buy", "change
// to a media buy" or "campaign".
func (a Approval) Subject() string { return a.naming("campaign", "change to a media buy", "media buy") }

// AmountLabel names the approval's amount: what the buy commits, or for a change what it
// commits once changed.
func (a Approval) AmountLabel() string {
	if a.Purchase.Change != nil {
		return "Budget after the change"
	}
	return "Amount"
}

// decided is the short noun of the confirm buttons ("Approve this buy").
func (a Approval) decided() string { return a.naming("campaign", "change", "buy") }

// naming is the name of what the approval decides among a campaign's, a change's and a buy's.
func (a Approval) naming(campaign, change, buy string) string {
	switch {
	case a.IsCampaign():
		return campaign
	case a.Purchase.Change != nil:
		return change
	}
	return buy
}

// writeChange writes what a change changes: one row per line (what, now, after the change)
// and, for new spend, how much it adds.
func writeChange(b *strings.Builder, c ChangeReview) {
	b.WriteString("<section aria-labelledby=\"changes\">\n<h2 id=\"changes\">What changes</h2>\n")
	if c.Summary != "" {
		b.WriteString("<p>" + esc(c.Summary) + "</p>\n")
	}
	b.WriteString("<table>\n<caption>The placed buy " + esc(c.BuyID))
	if c.MediaBuyID != "" {
		b.WriteString(" (seller's id " + esc(c.MediaBuyID) + ")")
	}
	b.WriteString("</caption>\n<thead><tr><th scope=\"col\">What</th><th scope=\"col\" class=\"num\">Now</th><th scope=\"col\" class=\"num\">After the change</th></tr></thead>\n<tbody>\n")
	for _, l := range c.Lines {
		b.WriteString("<tr><td>" + breakable(l.What) + "</td><td class=\"num\">" + esc(l.Before) + "</td><td class=\"num\">" + esc(l.After) + "</td></tr>\n")
	}
	b.WriteString("</tbody>\n</table>\n")
	if inc := c.Increase(); inc.Minor > 0 {
		b.WriteString("<p>The change adds " + esc(inc.String()) + " of new spend.</p>\n")
	}
	b.WriteString("</section>\n")
}
