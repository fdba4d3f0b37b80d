package modify

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/buy"
	"github.com/buyflow/buyflow/internal/money"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/workflow"
)

// state is the buy's delivery state as the seller runs it.
type state string

// The states a placed buy is in, after its changes.
const (
	StateActive   state = record.BuyStateActive
	StatePaused   state = record.BuyStatePaused
	StateCanceled state = record.BuyStateCanceled
)

// Buy is what a change needs to know about the buy it changes: the operation that placed it,
// the seller's current revision and packages, and the change in flight, if any. Where the
// seller does not list the buy, it is buyflow's own record of what it placed (Unlisted).
type Buy struct {
	OperationID string
	// Status is the status of the operation that placed the buy; only a completed one can
	// change.
	Status     workflow.Status
	MediaBuyID string
	Currency   string
	Account    adcp.AccountRef
	// Revision is the seller's revision of the buy: sent with every update as the expected
	// revision, so a change planned on a stale view is refused by the seller (CONFLICT).
	Revision int
	State    state
	// Packages are the seller's packages with their current budgets, in the seller's order.
	Packages []Package
	// Budget is the buy's total as buyflow recorded it: the total when the packages do not
	// tell it (a buy placed without packages, or one whose package budgets the seller never
	// said), so that a threshold on the buy's size is not passed by a total of nothing.
	Budget money.Amount
	// Unlisted says the seller does not list the buy (its get_media_buys answers without it,
	// or, for a cancellation, cannot be read): the change is planned from buyflow's record,
	// and the seller's answer alone confirms it.
	Unlisted bool
	// EndTime is the flight's current end (RFC 3339), when known.
	EndTime string
	// ChangeInFlight is the id of a change under way, empty when none is.
	ChangeInFlight string
}

// Package is one of the seller's packages and its current budget; a budget with no currency is
// one the seller never said (known reports which).
type Package struct {
	ID     string
	Budget money.Amount
}

// known says whether the package's budget is known.
func (p Package) known() bool { return p.Budget.Currency != "" }

// decimal is the budget as the ledger keeps it, "" when it is not known (never a made-up 0).
func (p Package) decimal() string {
	if !p.known() {
		return ""
	}
	return p.Budget.Decimal()
}

// Total is the buy's budget: the sum of its package budgets, the amount the seller commits;
// Budget when the packages cannot say (none, or one whose budget is not known).
func (b Buy) Total() money.Amount {
	sum := money.Amount{Currency: b.Currency}
	for _, p := range b.Packages {
		if !p.known() {
			return b.Budget
		}
		sum = sum.Add(p.Budget)
	}
	if len(b.Packages) == 0 {
		return b.Budget
	}
	return sum
}

// ConflictError is a change the buy cannot take now: the API answers it with 409 and Code.
type ConflictError struct {
	Code    string
	Message string
}

func (e *ConflictError) Error() string { return e.Code + ": " + e.Message }

// The conflict codes.
const (
	CodeNotPlaced      = "not_placed"
	CodeChangeInFlight = "change_in_flight"
	CodeCanceled       = "buy_canceled"
	CodeAlreadyInState = "already_in_state"
)

// codeNoPackages refuses a budget change to a buy that has no package to change.
const codeNoPackages = "no_packages"

// budgetWithoutPackages refuses a budget change to a buy without packages (the seller placed it
// with packages: []): update_media_buy sets budgets package by package, and has no budget for
// the buy as a whole, so there is nothing buyflow could send. Nil for any other change.
func budgetWithoutPackages(b Buy, c Change) error {
	if c.Kind != KindBudget || len(b.Packages) > 0 {
		return nil
	}
	return unprocessable(codeNoPackages, "/budget",
		"media buy %s has no packages: the seller placed it without naming any, and an AdCP seller changes a budget only package by package, so buyflow has no budget it could send. "+
			"Ask the seller to change the budget, or cancel this buy and place a new one with the budget you want", b.OperationID)
}

// ErrConflict matches every *ConflictError with errors.Is.
var ErrConflict = errors.New("modify: the buy cannot take this change now")

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// Admit says whether b can take c now. A buy whose operation has not completed is not placed
// (nothing at the seller to change); a buy with a change under way takes no second one; a
// canceled buy takes nothing (a cancellation is irreversible, at the seller too); pausing a
// paused buy or resuming an active one changes nothing and is refused rather than sent.
func Admit(b Buy, c Change) error {
	switch {
	case b.State == StateCanceled || b.Status == workflow.StatusCanceled:
		verb := "changed"
		if c.Kind == KindResume {
			verb = "resumed"
		}
		return &ConflictError{Code: CodeCanceled, Message: fmt.Sprintf("media buy %s is canceled and cannot be %s: a cancellation is final", b.OperationID, verb)}
	case !b.Status.Placed() || b.MediaBuyID == "":
		return &ConflictError{Code: CodeNotPlaced, Message: fmt.Sprintf("media buy %s is not placed yet (status %s): only a placed buy can change", b.OperationID, b.Status)}
	case b.ChangeInFlight != "":
		return &ConflictError{Code: CodeChangeInFlight, Message: fmt.Sprintf("media buy %s has a change under way (%s); send this one when it has finished", b.OperationID, b.ChangeInFlight)}
	case c.Kind == KindPause && b.State == StatePaused:
		return &ConflictError{Code: CodeAlreadyInState, Message: fmt.Sprintf("media buy %s is already paused", b.OperationID)}
	case c.Kind == KindResume && b.State != StatePaused:
		return &ConflictError{Code: CodeAlreadyInState, Message: fmt.Sprintf("media buy %s is not paused", b.OperationID)}
	}
	return nil
}

// Planned is a change ready to check and send: the exact update_media_buy arguments (without
// idempotency_key and governance_context, which the intent and the check add) and the buy as
// it will be once the seller applies them.
type Planned struct {
	Change Change
	// Args are the update_media_buy arguments governance checks and the seller receives.
	Args adcp.UpdateMediaBuyRequest
	// Before and After are the buy's budget before and after the change (equal unless the
	// change is a budget change).
	Before, After money.Amount
	// Packages are the package budgets after the change.
	Packages []Package
	// State is the buy's state after the change.
	State state
	// Summary says what changes in words (check_governance's modification_summary).
	Summary string
}

// Increase is how much the change adds to the budget (zero for a decrease or no budget change).
func (p Planned) Increase() money.Amount {
	d := p.After.Minor - p.Before.Minor
	if d < 0 {
		d = 0
	}
	return money.Amount{Minor: d, Currency: p.After.Currency}
}

// Plan builds the update_media_buy arguments of c against b and the buy after it. It refuses
// (a *buy.RequestError, 422) amounts that are not money in the buy's currency, a package
// the buy does not have, a total for a buy of several packages (the split would be buyflow's
// guess), a budget change to a buy without packages or whose package budgets are not known,
// and an end date in the past. operationID is echoed in context, so the seller's answers and
// buyflow's timeline name the same change. The revision is sent only when it is the seller's
// own: buyflow's count for an unlisted buy is not, and a seller would refuse every change
// after the first as stale.
func Plan(b Buy, c Change, changeID string, now time.Time) (Planned, error) {
	p := Planned{Change: c, Before: b.Total(), State: b.State, Packages: append([]Package(nil), b.Packages...)}
	rev := b.Revision
	p.Args = adcp.UpdateMediaBuyRequest{Account: b.Account, MediaBuyID: b.MediaBuyID, Context: echo(c.Context, b.OperationID, changeID)}
	if rev > 0 && !b.Unlisted {
		p.Args.Revision = &rev
	}
	switch c.Kind {
	case KindBudget:
		if err := planBudget(&p, b, c); err != nil {
			return Planned{}, err
		}
	case KindEndTime:
		end, err := time.Parse(time.RFC3339, c.EndTime)
		if err != nil {
			return Planned{}, unprocessable("invalid_end_time", "/end_time", "end_time must be an RFC 3339 date-time")
		}
		if !end.After(now) {
			return Planned{}, unprocessable("end_time_in_past", "/end_time", "end_time %s is not in the future", c.EndTime)
		}
		p.Args.EndTime = c.EndTime
		p.Summary = "end date moved to " + c.EndTime
		if b.EndTime != "" {
			p.Summary = "end date moved from " + b.EndTime + " to " + c.EndTime
		}
	case KindPause, KindResume:
		paused := c.Kind == KindPause
		p.Args.Paused = &paused
		p.State, p.Summary = StateActive, "delivery resumed"
		if paused {
			p.State, p.Summary = StatePaused, "delivery paused"
		}
	case KindCancel:
		p.Args.Canceled = true
		p.Args.CancellationReason = c.Reason
		p.State, p.Summary = StateCanceled, "buy canceled: "+c.Reason
	default:
		return Planned{}, unprocessable("unknown_change", "", "unknown change %q", c.Kind)
	}
	p.After = Buy{Currency: b.Currency, Packages: p.Packages, Budget: b.Budget}.Total()
	return p, nil
}

// echo is update_media_buy's context: the buyer's context with buyflow's operation and change
// ids, so that the seller's answers and the timeline name the same change.
func echo(buyer json.RawMessage, operationID, changeID string) json.RawMessage {
	m := map[string]json.RawMessage{}
	if len(buyer) > 0 {
		_ = json.Unmarshal(buyer, &m) // checked by ParsePatch / ParseCancel
	}
	m["operation_id"], _ = json.Marshal(operationID)
	m["change_id"], _ = json.Marshal(changeID)
	out, _ := json.Marshal(m)
	return out
}

func planBudget(p *Planned, b Buy, c Change) error {
	type update struct {
		PackageID string      `json:"package_id"`
		Budget    json.Number `json:"budget"`
	}
	if err := budgetWithoutPackages(b, c); err != nil {
		return err
	}
	for _, pk := range b.Packages {
		if !pk.known() {
			// The total before the change, and so what it adds, would be buyflow's guess.
			return unprocessable("package_budget_unknown", "/budget",
				"buyflow does not know the budget of package %q of media buy %s: the seller did not say it when it placed the buy and does not list the buy, so the change cannot be planned. "+
					"Ask the seller to change the budget", pk.ID, b.OperationID)
		}
	}
	var ups []update
	set := func(i int, literal, field string) error {
		amt, err := money.Parse(literal, b.Currency)
		if err != nil {
			return unprocessable("invalid_budget", field, "%v", err)
		}
		p.Packages[i].Budget = amt
		ups = append(ups, update{PackageID: b.Packages[i].ID, Budget: json.Number(amt.Decimal())})
		return nil
	}
	if c.Total != "" {
		if len(b.Packages) != 1 {
			return unprocessable("total_needs_packages", "/budget/total",
				"media buy %s has %d packages: send budget.packages with each package's new budget, so the split is yours, not buyflow's guess", b.OperationID, len(b.Packages))
		}
		if err := set(0, c.Total.String(), "/budget/total"); err != nil {
			return err
		}
	}
	for i, pb := range c.Packages {
		j := packageIndex(b.Packages, pb.PackageID)
		if j < 0 {
			return unprocessable("unknown_package", fmt.Sprintf("/budget/packages/%d/package_id", i),
				"media buy %s has no package %q (its packages: %s)", b.OperationID, pb.PackageID, packageIDs(b.Packages))
		}
		if err := set(j, pb.Budget.String(), fmt.Sprintf("/budget/packages/%d/budget", i)); err != nil {
			return err
		}
	}
	raw := make([]json.RawMessage, len(ups))
	for i, u := range ups {
		b, err := json.Marshal(u)
		if err != nil {
			return fmt.Errorf("modify: encode package update: %w", err)
		}
		raw[i] = b
	}
	p.Args.Packages = raw
	after := Buy{Currency: b.Currency, Packages: p.Packages}.Total()
	if after.Minor > money.MaxMinor {
		return unprocessable("invalid_budget", "/budget", "the package budgets add up to more than any amount buyflow accepts")
	}
	p.Summary = fmt.Sprintf("budget %s %s → %s %s", p.Before.Decimal(), b.Currency, after.Decimal(), b.Currency)
	return nil
}

func packageIndex(ps []Package, id string) int {
	for i, p := range ps {
		if p.ID == id {
			return i
		}
	}
	return -1
}

func packageIDs(ps []Package) string {
	ids := make([]string, len(ps))
	for i, p := range ps {
		ids[i] = fmt.Sprintf("%q", p.ID)
	}
	return strings.Join(ids, ", ")
}

// RequestError is the error type of a refused change request (an alias kept so that callers
// of this package need not import mediabuy to match it).
type RequestError = buy.RequestError

// Policy says which changes to a placed buy need a person before they are sent. The zero
// Policy asks for none.
type Policy struct {
	// Increase, when set, is the largest budget increase sent without a person: an increase is
	// new spend (a decrease, a pause or a cancellation spends nothing).
	Increase *money.Amount
	// Any, when set, makes every change to a buy whose budget, before or after the change, is
	// at or over it need a person: a large buy is not changed by a script alone.
	Any *money.Amount
}

// NewPolicy reads the change approval policy: increase and any are decimals in currency, each
// empty for none.
func NewPolicy(increase, any, currency string) (Policy, error) {
	var p Policy
	for _, f := range []struct {
		raw  string
		into **money.Amount
		name string
	}{{increase, &p.Increase, "change_increase_threshold"}, {any, &p.Any, "change_any_threshold"}} {
		if f.raw == "" {
			continue
		}
		amt, err := money.ParseDecimal(f.raw, currency)
		if err != nil {
			return Policy{}, fmt.Errorf("config: the approval policy's %s: %w", f.name, err)
		}
		*f.into = &amt
	}
	return p, nil
}

// Needs says whether a person must approve p before it is sent, and why in a sentence. An
// amount in another currency than the policy's needs a person: the gate fails closed.
func (pol Policy) Needs(p Planned) (bool, string) {
	if a := pol.Any; a != nil {
		largest := p.Before
		if p.After.Minor > largest.Minor {
			largest = p.After
		}
		switch {
		case largest.Currency != a.Currency:
			return true, fmt.Sprintf("the buy's budget is in %s and the approval policy's threshold for any change in %s", largest.Currency, a.Currency)
		case largest.Minor >= a.Minor:
			return true, fmt.Sprintf("the buy's budget of %s %s is at or over %s %s, from which every change needs a person", largest.Decimal(), largest.Currency, a.Decimal(), a.Currency)
		}
	}
	inc := p.Increase()
	switch t := pol.Increase; {
	case t == nil || inc.Minor == 0:
		return false, ""
	case t.Currency != inc.Currency:
		return true, fmt.Sprintf("the budget increase of %s %s is in another currency than the approval threshold (%s)", inc.Decimal(), inc.Currency, t.Currency)
	case inc.Minor > t.Minor:
		return true, fmt.Sprintf("the budget increase of %s %s is over the approval threshold of %s %s", inc.Decimal(), inc.Currency, t.Decimal(), t.Currency)
	}
	return false, ""
}
