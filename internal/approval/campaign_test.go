package approval_test

import (
	"testing"

	"github.com/buyflow/buyflow/internal/approval"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/workflow"
)

// The campaign's total is what it would still buy: a leg governance denied (it ended) does not
// count, and an amount that cannot be summed exactly is refused, never guessed.
func TestCampaignTotalReason(t *testing.T) {
	t.Parallel()
	p, err := approval.ParsePolicy([]byte(`{"threshold":"10000.00","currency":"USD","approvers":["U1"]}`))
	if err != nil {
		t.Fatal(err)
	}
	leg := func(id, amount string, st workflow.Status) *ledger.Operation {
		return &ledger.Operation{ID: id, BudgetTotal: amount, Currency: "USD", Status: st}
	}
	c := approval.Campaign{Record: &ledger.Campaign{ID: "cp-1", Currency: "USD"}, Legs: []*ledger.Operation{
		leg("a", "6000.00", workflow.StatusCreating), leg("b", "4000.00", workflow.StatusAwaitingApproval), leg("c", "9000.00", workflow.StatusRejected),
	}}
	if why, err := c.TotalReason(p); err != nil || why != "the campaign's total 10000.00 USD is at or over the approval threshold 10000.00 USD" {
		t.Errorf("TotalReason = %q, %v", why, err)
	}
	c.Legs[1].BudgetTotal = "3999.99"
	if why, err := c.TotalReason(p); err != nil || why != "" {
		t.Errorf("TotalReason of 9999.99 USD still to buy = %q, %v", why, err)
	}
	c.Legs[1].BudgetTotal = "3999.999"
	if why, err := c.TotalReason(p); err == nil {
		t.Errorf("TotalReason of an amount USD cannot hold = %q, want an error", why)
	}
}
