package approval_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/buyflow/buyflow/internal/approval"
	"github.com/buyflow/buyflow/internal/approvalpolicy"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/workflow"
)

func campaignLeg(id, amount string, st workflow.Status) *record.Operation {
	return &record.Operation{ID: id, BudgetTotal: amount, Currency: "USD", Status: st}
}

// The gate's total is exactly the sum of the legs it is given, and its sentence the policy's
// when that sum is at or over the threshold; an amount that cannot be summed exactly is
// refused, never guessed.
func TestCampaignGate(t *testing.T) {
	t.Parallel()
	p, err := approvalpolicy.Parse([]byte(`{"threshold":"10000.00","currency":"USD","approvers":["U1"]}`))
	if err != nil {
		t.Fatal(err)
	}
	c := approval.Campaign{Record: &record.Campaign{ID: "cp-1", Currency: "USD"}, Legs: []*record.Operation{
		campaignLeg("a", "6000.00", workflow.StatusCreating), campaignLeg("b", "4000.00", workflow.StatusAwaitingApproval),
	}}
	total, why, err := c.Gate(p.NeedsCampaign)
	if err != nil || total.Display() != "USD 10,000.00" || why != "the campaign's total 10000.00 USD is at or over the approval threshold 10000.00 USD" {
		t.Errorf("Gate = %v, %q, %v", total, why, err)
	}
	c.Legs[1].BudgetTotal = "3999.99"
	if total, why, err := c.Gate(p.NeedsCampaign); err != nil || total.Decimal() != "9999.99" || why != "" {
		t.Errorf("Gate of 9999.99 USD = %v, %q, %v", total, why, err)
	}
	c.Legs[1].BudgetTotal = "3999.999"
	if _, why, err := c.Gate(p.NeedsCampaign); err == nil {
		t.Errorf("Gate of an amount USD cannot hold = %q, want an error", why)
	}
}

// An approval covers the legs it names, in the campaign's order; a name that is not a leg of
// the campaign, or a leg named twice, is refused. Open leaves out the legs that ended.
func TestCampaignCovering(t *testing.T) {
	t.Parallel()
	c := approval.Campaign{Record: &record.Campaign{ID: "cp-1", Currency: "USD"}, Legs: []*record.Operation{
		campaignLeg("a", "6000.00", workflow.StatusCreating), campaignLeg("b", "4000.00", workflow.StatusCheckingGovernance),
		campaignLeg("c", "9000.00", workflow.StatusRejected),
	}}
	ids := approval.Campaign.LegIDs
	got, err := c.Covering([]string{"c", "a"})
	if err != nil || !slices.Equal(ids(got), []string{"a", "c"}) {
		t.Errorf("Covering(c, a) = %v, %v", ids(got), err)
	}
	for _, bad := range [][]string{{"a", "x"}, {"a", "a"}} {
		var invalid *workflow.InvalidInputError
		if _, err := c.Covering(bad); !errors.As(err, &invalid) {
			t.Errorf("Covering(%v) = %v, want an InvalidInputError", bad, err)
		}
	}
	if open := ids(c.Open()); !slices.Equal(open, []string{"a", "b"}) {
		t.Errorf("Open = %v", open)
	}
	all, err := c.CoveredBy(&record.Approval{})
	if err != nil || len(all.Legs) != 3 {
		t.Errorf("an approval naming no legs covers %v, %v", ids(all), err)
	}
}
