package campaign

import (
	"testing"

	"github.com/buyflow/buyflow/internal/money"
	"github.com/buyflow/buyflow/internal/workflow"
)

func usd(t *testing.T, s string) money.Amount {
	t.Helper()
	a, err := money.ParseDecimal(s, "USD")
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestDecide(t *testing.T) {
	const (
		done     = workflow.StatusCompleted
		failed   = workflow.StatusFailed
		rejected = workflow.StatusRejected
		canceled = workflow.StatusCanceled
		working  = workflow.StatusWorking
		paused   = workflow.StatusPaused
	)
	cases := []struct {
		name      string
		statuses  []workflow.Status
		want      Status
		committed string
		bySeller  []string
	}{
		{"all completed", []workflow.Status{done, done, done}, Completed, "22500.00", []string{"8500.25", "9000.00", "4999.75"}},
		{"one still working", []workflow.Status{done, working, done}, Running, "13500.00", []string{"8500.25", "0.00", "4999.75"}},
		{"one failed", []workflow.Status{done, failed, done}, PartiallyCompleted, "13500.00", []string{"8500.25", "0.00", "4999.75"}},
		{"one denied by governance", []workflow.Status{rejected, done, done}, PartiallyCompleted, "13999.75", []string{"0.00", "9000.00", "4999.75"}},
		{"compensated after a failure", []workflow.Status{canceled, failed, canceled}, Failed, "0.00", []string{"0.00", "0.00", "0.00"}},
		{"all canceled", []workflow.Status{canceled, canceled, canceled}, Canceled, "0.00", []string{"0.00", "0.00", "0.00"}},
		{"all rejected", []workflow.Status{rejected, rejected, rejected}, Failed, "0.00", []string{"0.00", "0.00", "0.00"}},
		// A leg a change paused before the campaign settled is still placed and committed.
		{"one paused since", []workflow.Status{done, paused, done}, Completed, "22500.00", []string{"8500.25", "9000.00", "4999.75"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			amounts := []string{"8500.25", "9000.00", "4999.75"}
			var legs []LegState
			for i, st := range c.statuses {
				legs = append(legs, LegState{SellerID: []string{"a", "b", "c"}[i], Status: st, Amount: usd(t, amounts[i])})
			}
			o := Decide("USD", legs)
			if o.Status != c.want || o.Committed.Decimal() != c.committed || len(o.BySeller) != 3 {
				t.Fatalf("outcome = %+v, want %s committing %s", o, c.want, c.committed)
			}
			for i, sa := range o.BySeller {
				if sa.Amount.Decimal() != c.bySeller[i] {
					t.Errorf("seller %s committed %s, want %s", sa.SellerID, sa.Amount.Decimal(), c.bySeller[i])
				}
			}
		})
	}
}

// Two legs at one seller add up under that seller, in the order sellers first appear.
func TestDecideSumsPerSeller(t *testing.T) {
	o := Decide("USD", []LegState{
		{SellerID: "b", Status: workflow.StatusCompleted, Amount: usd(t, "0.10")},
		{SellerID: "a", Status: workflow.StatusCompleted, Amount: usd(t, "0.20")},
		{SellerID: "b", Status: workflow.StatusCompleted, Amount: usd(t, "0.20")},
	})
	if len(o.BySeller) != 2 || o.BySeller[0].SellerID != "b" || o.BySeller[0].Amount.Decimal() != "0.30" || o.Committed.Decimal() != "0.50" {
		t.Fatalf("outcome = %+v", o)
	}
}
