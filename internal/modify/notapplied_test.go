package modify

import (
	"strings"
	"testing"

	"github.com/buyflow/buyflow/internal/adcp"
)

// A cancellation is judged by the media-buy status the seller answered: a buy still live there
// (the @adcp/sdk broadcast example answers active) is not a canceled buy; a status that leaves
// nothing running, or no status at all, says nothing against it; other changes are not judged.
func TestNotApplied(t *testing.T) {
	cancel, pause := &frozenPlan{State: StateCanceled}, &frozenPlan{State: StatePaused}
	for _, tc := range []struct {
		plan   *frozenPlan
		status string
		want   bool
	}{
		{cancel, "active", true},
		{cancel, "pending_start", true},
		{cancel, "paused", true},
		{cancel, "canceled", false},
		{cancel, "completed", false},
		{cancel, "rejected", false},
		{cancel, "", false},
		{pause, "active", false},
	} {
		why := notApplied(tc.plan, &adcp.MediaBuyResult{MediaBuyStatus: tc.status}, "mb_1")
		if (why != "") != tc.want {
			t.Errorf("plan %s answered %q: %q", tc.plan.State, tc.status, why)
		}
		if tc.want && (!strings.Contains(why, `media buy status "`+tc.status+`"`) || !strings.Contains(why, "mb_1")) {
			t.Errorf("the reason %q does not quote the seller's answer", why)
		}
	}
}
