package approvalcore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/buyflow/buyflow/internal/money"
)

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
func (a Approval) Subject() string {
	if a.IsCampaign() {
		return "campaign"
	}
	if a.Purchase.Change != nil {
		return "change to a media buy"
	}
	return "media buy"
}

// AmountLabel names the approval's amount: what the buy commits, or for a change what it
// commits once changed.
func (a Approval) AmountLabel() string {
	if a.Purchase.Change != nil {
		return "Budget after the change"
	}
	return "Amount"
}

// decided is the short noun of the confirm buttons ("Approve this buy").
func (a Approval) decided() string {
	if a.IsCampaign() {
		return "campaign"
	}
	if a.Purchase.Change != nil {
		return "change"
	}
	return "buy"
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
