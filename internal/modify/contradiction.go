package modify

import (
	"fmt"
	"strings"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/money"
)

// codeContradicted is the error code of a change the seller answered with success while its
// answer shows the buy not as the change asked: the change is not recorded as applied.
const codeContradicted = "seller_contradicted"

// contradiction judges a success answer to the change's update against its plan. Sellers
// answer success and leave the buy as it was (the official SDK's broadcast example answers a
// cancel with the buy still active), so success alone does not say the change happened: the
// answer's media-buy status, and its package budgets when the change set budgets, must agree
// with the plan. What the answer leaves out says nothing. It returns the finding for a person
// ("" when the answer agrees) and the buy's state as the answer reports it ("" when it says
// none).
func contradiction(c Change, p *frozenPlan, res *adcp.MediaBuyResult, seller, mediaBuyID, currency string) (finding string, reported state) {
	var what []string
	if st, ok := sellerState(res.MediaBuyStatus); ok {
		reported = st
		if st != p.State {
			what = append(what, fmt.Sprintf("the buy %s (media buy status %q), not %s", st, res.MediaBuyStatus, p.State))
		}
	}
	if len(p.Args.Packages) > 0 {
		for _, got := range res.Packages {
			want, ok := plannedBudget(p, got.PackageID)
			if got.Budget == "" || !ok {
				continue
			}
			amt, err := money.Parse(string(got.Budget), currency)
			switch {
			case err != nil:
				what = append(what, fmt.Sprintf("package %s with a budget it cannot be read as (%q), not %s %s", got.PackageID, got.Budget, want, currency))
			case amt.Decimal() != want:
				what = append(what, fmt.Sprintf("package %s at %s %s, not the %s %s asked", got.PackageID, amt.Decimal(), currency, want, currency))
			}
		}
	}
	if len(what) == 0 {
		return "", reported
	}
	answer := "its answer"
	if res.Revision > 0 {
		answer = fmt.Sprintf("its answer (revision %d)", res.Revision)
	}
	asked := string(c.Kind)
	switch c.Kind {
	case KindBudget:
		asked = "budget change"
	case KindEndTime:
		asked = "new end date"
	}
	return fmt.Sprintf("seller %s answered the %s of media buy %s with success, but %s shows %s: the change is not recorded as applied. "+
		"Check the buy at the seller, then send the change again or settle it there with the seller",
		seller, asked, mediaBuyID, answer, strings.Join(what, "; ")), reported
}

// plannedBudget is the budget the plan gives package id after the change (a decimal).
func plannedBudget(p *frozenPlan, id string) (string, bool) {
	for _, pk := range p.Packages {
		if pk.PackageID == id {
			return pk.Budget, true
		}
	}
	return "", false
}
