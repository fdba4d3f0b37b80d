package modify

import (
	"encoding/json"
	"testing"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/approvalcore"
	"github.com/buyflow/buyflow/internal/record"
)

// What an approver of a change is shown: one line per thing that changes, read back exactly.
func TestReviewRecordShowsEachLineNowAndAfter(t *testing.T) {
	r := &run{parent: &record.Operation{ID: "mb-1", MediaBuyID: "mb_9", Currency: "USD"}}
	two := []record.PackageBudget{{PackageID: "pkg_a", Budget: "15000.00"}, {PackageID: "pkg_b", Budget: "5000.50"}}
	res := &adcp.GovernanceResult{Verdict: adcp.VerdictConditions, Conditions: []adcp.Condition{
		{Field: "budget", Reason: "pacing", RequiredValue: json.RawMessage(" null ")}, {Field: "end_time", RequiredValue: json.RawMessage(`"2027-04-30"`)}}}
	for _, tc := range []struct {
		name   string
		change Change
		plan   frozenPlan
		want   []approvalcore.ChangeLine
	}{
		{"a package budget", Change{Kind: KindBudget}, frozenPlan{Before: "20000.50", After: "22000.50", PackagesBefore: two,
			Packages: []record.PackageBudget{two[0], {PackageID: "pkg_b", Budget: "7000.50"}}, StateBefore: StateActive, State: StateActive},
			[]approvalcore.ChangeLine{{What: "Total budget", Before: "USD 20,000.50", After: "USD 22,000.50"}, {What: "Package pkg_b", Before: "USD 5,000.50", After: "USD 7,000.50"}}},
		{"a new end date", Change{Kind: KindEndTime}, frozenPlan{Before: "3000.00", After: "3000.00", EndTimeBefore: "2027-03-31T23:59:59Z",
			EndTime: "2027-04-30T23:59:59Z", StateBefore: StateActive, State: StateActive},
			[]approvalcore.ChangeLine{{What: "End of the flight", Before: "2027-03-31T23:59:59Z", After: "2027-04-30T23:59:59Z"}}},
		{"a pause", Change{Kind: KindPause}, frozenPlan{Before: "3000.00", After: "3000.00", StateBefore: StateActive, State: StatePaused},
			[]approvalcore.ChangeLine{{What: "Delivery", Before: "active", After: "paused"}}},
	} {
		r.change = tc.change
		raw, err := json.Marshal(reviewRecord(r, &tc.plan, res))
		if err != nil {
			t.Fatal(err)
		}
		c, v, err := approvalcore.ParseChange(raw)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(c.Lines) != len(tc.want) {
			t.Fatalf("%s: lines %+v, want %+v", tc.name, c.Lines, tc.want)
		}
		for i := range tc.want {
			if c.Lines[i] != tc.want[i] {
				t.Errorf("%s: line %d = %+v, want %+v", tc.name, i, c.Lines[i], tc.want[i])
			}
		}
		if len(v.Conditions) != 2 || !v.Conditions[0].NeedsPerson || v.Conditions[1].NeedsPerson {
			t.Errorf("%s: conditions %+v: the first has no value a machine could apply, the second has one", tc.name, v.Conditions)
		}
	}
}
