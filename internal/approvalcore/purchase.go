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
