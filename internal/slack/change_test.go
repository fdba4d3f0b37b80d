package slack

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/approvalcore"
)

func TestRequestMessageOfAChangeListsEachLineNowAndAfter(t *testing.T) {
	a := sampleApproval()
	a.Summary, a.Reason = "Change to media buy mb-1", approvalcore.ReasonChangeNeedsApproval
	a.Purchase = approvalcore.Purchase{Change: &approvalcore.ChangeReview{BuyID: "mb-1", Kind: "budget",
		Before: approvalcore.Money{Minor: 300000, Currency: "USD"}, After: approvalcore.Money{Minor: 1400025, Currency: "USD"},
		Lines: []approvalcore.ChangeLine{{What: "Total budget", Before: "USD 3,000.00", After: "USD 14,000.25"}}},
		Governance: approvalcore.Verdict{Verdict: "approved"}}
	m, err := RequestMessage(a, []Review{{Approver: "U0ALICE01", URL: reviewURL}})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(m)
	for _, want := range []string{"Approval needed: change to a media buy", "*What changes* on mb-1",
		"• Total budget: USD 3,000.00 → USD 14,000.25", "*New spend* USD 11,000.25", "*Governance:* Approved"} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("the message lacks %q: %s", want, raw)
		}
	}
}

func TestStatusMessageOfAChangeNamesTheChange(t *testing.T) {
	a := sampleApproval()
	a.Purchase = approvalcore.Purchase{Change: &approvalcore.ChangeReview{BuyID: "mb-1", Kind: "pause",
		Lines: []approvalcore.ChangeLine{{What: "Delivery", Before: "active", After: "paused"}}}}
	a.Status, a.DecidedBy, a.DecidedAt = approvalcore.StatusRejected, "U0ALICE01", a.ExpiresAt.Add(-time.Hour)
	m, err := StatusMessage(a)
	if err != nil {
		t.Fatal(err)
	}
	if raw, _ := json.Marshal(m); !strings.Contains(string(raw), "Rejected: change to a media buy") {
		t.Errorf("the status message does not name the change: %s", raw)
	}
}
