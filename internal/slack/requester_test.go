package slack

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/approvalcore"
)

func TestRequesterMessage(t *testing.T) {
	at := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	base := RequesterUpdate{OperationID: "op-1", PONumber: "PO-1", Seller: "seller-a", Amount: approvalcore.Money{Minor: 1500000, Currency: "USD"}}
	with := func(f func(*RequesterUpdate)) RequesterUpdate { u := base; f(&u); return u }
	for _, tc := range []struct {
		name string
		u    RequesterUpdate
		want []string
		err  bool
	}{
		{"pending", with(func(u *RequesterUpdate) {
			u.Kind, u.Approvers, u.Until = KindAwaitingApproval, []string{"U0A", "finance@example.com"}, at
		}),
			[]string{"Waiting for approval", "<@U0A>", "finance@example.com", "<!date^1777626000^"}, false},
		{"pending without approvers", with(func(u *RequesterUpdate) { u.Kind, u.Until = KindAwaitingApproval, at }), nil, true},
		{"approved", with(func(u *RequesterUpdate) { u.Kind, u.DecidedBy, u.DecidedAt = KindApproved, "U0A", at }), []string{"Approved", "by <@U0A>"}, false},
		{"approved by nobody", with(func(u *RequesterUpdate) { u.Kind = KindApproved }), nil, true},
		{"rejected by governance", with(func(u *RequesterUpdate) { u.Kind, u.Reason = KindRejected, "denied <@U0BOSS> & <!here>" }),
			[]string{"Rejected", "denied &lt;@U0BOSS&gt; &amp; &lt;!here&gt;"}, false},
		{"placed", with(func(u *RequesterUpdate) { u.Kind, u.MediaBuyID = KindPlaced, "mb-<77>" }), []string{"Placed", "mb-&lt;77&gt;", "USD 15,000.00", "PO-1"}, false},
		{"placed without id", with(func(u *RequesterUpdate) { u.Kind = KindPlaced }), nil, true},
		{"failed", with(func(u *RequesterUpdate) { u.Kind = KindFailed }), []string{"Failed", "(no reason recorded)"}, false},
		{"canceled", with(func(u *RequesterUpdate) { u.Kind, u.Reason = KindCanceled, "governance findings" }), []string{"Canceled", "governance findings"}, false},
		{"expired", with(func(u *RequesterUpdate) { u.Kind = KindExpired }), []string{"Expired"}, false},
		{"seller's people at work", with(func(u *RequesterUpdate) {
			u.Kind, u.SellerMessage = KindSellerWaiting, "IO review <!here>\nby <@U0BOSS>"
		}), []string{"Waiting for the seller", "*seller-a* took your buy for review", ">IO review &lt;!here&gt;\\n>by &lt;@U0BOSS&gt;"}, false},
		{"seller asks for input", with(func(u *RequesterUpdate) { u.Kind, u.SellerMessage = KindSellerInput, "confirm the dates" }),
			[]string{"asks for input", "confirm the dates"}, false},
		{"seller without words", with(func(u *RequesterUpdate) { u.Kind, u.SellerMessage = KindSellerWaiting, " " }),
			[]string{"took your buy for review", "nothing is placed yet."}, false},
		{"unknown kind", with(func(u *RequesterUpdate) { u.Kind = "working" }), nil, true},
		{"no operation", RequesterUpdate{Kind: KindFailed}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := RequesterMessage(tc.u)
			if (err != nil) != tc.err {
				t.Fatalf("err = %v", err)
			}
			if err != nil {
				return
			}
			b := render(t, m)
			for _, w := range append(tc.want, "Reference: op-1") {
				if !strings.Contains(b, w) {
					t.Errorf("message lacks %q: %s", w, b)
				}
			}
			if strings.Contains(b, "<!here>") || strings.Contains(b, "<@U0BOSS>") {
				t.Errorf("outside text is not escaped: %s", b)
			}
			if m.Blocks[0].Type != "header" || m.Blocks[len(m.Blocks)-1].Type != "context" {
				t.Errorf("blocks = %+v, want the approval messages' header … context", m.Blocks)
			}
		})
	}
}

func render(t *testing.T, m Message) string {
	t.Helper()
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// A change's texts say what the budget moves from and to, exactly, and that the buy stays as
// it was when the change is not applied; a campaign's say how many legs landed and the total.
func TestRequesterMessageOfAChangeAndACampaign(t *testing.T) {
	at := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	usd := func(minor int64) approvalcore.Money { return approvalcore.Money{Minor: minor, Currency: "USD"} }
	change := RequesterUpdate{Subject: SubjectChange, OperationID: "chg-1", BuyID: "mb-1", PONumber: "PO-1", Seller: "seller-a",
		Before: usd(300000), Amount: usd(1400025)}
	camp := RequesterUpdate{Subject: SubjectCampaign, OperationID: "cp-1", Name: "Spring <launch>", Legs: 3, Amount: usd(2250000)}
	with := func(u RequesterUpdate, f func(*RequesterUpdate)) RequesterUpdate { f(&u); return u }
	for _, tc := range []struct {
		name string
		u    RequesterUpdate
		want []string
		err  bool
	}{
		{"change waits", with(change, func(u *RequesterUpdate) { u.Kind, u.Approvers, u.Until = KindAwaitingApproval, []string{"U0A"}, at }),
			[]string{"Waiting for approval: your change", "USD 3,000.00 → USD 14,000.25", "<@U0A>", "The buy stays as it is before", "mb-1"}, false},
		{"change applied", with(change, func(u *RequesterUpdate) { u.Kind = KindPlaced }),
			[]string{"Applied: your change", "the budget is now USD 3,000.00 → USD 14,000.25"}, false},
		{"change applied, budget unchanged", with(change, func(u *RequesterUpdate) { u.Kind, u.Amount = KindPlaced, usd(300000) }),
			[]string{"USD 3,000.00 (unchanged)"}, false},
		{"change rejected", with(change, func(u *RequesterUpdate) {
			u.Kind, u.DecidedBy, u.DecidedAt, u.Comment = KindRejected, "U0A", at, "not this quarter"
		}),
			[]string{"Not applied", "rejected by <@U0A>", "stays as it was, at USD 3,000.00", ">not this quarter"}, false},
		{"change failed", with(change, func(u *RequesterUpdate) { u.Kind, u.Reason = KindFailed, "seller <!here> refused" }),
			[]string{"Not applied", "seller &lt;!here&gt; refused"}, false},
		{"change without its buy", with(change, func(u *RequesterUpdate) { u.Kind, u.BuyID = KindPlaced, "" }), nil, true},
		{"campaign submitted", with(camp, func(u *RequesterUpdate) { u.Kind = KindSubmitted }),
			[]string{"Submitted: your campaign", "3 legs (USD 22,500.00)", "Spring &lt;launch&gt;", "Total budget"}, false},
		{"campaign waits", with(camp, func(u *RequesterUpdate) {
			u.Kind, u.Legs, u.Amount, u.Approvers, u.Until = KindAwaitingApproval, 2, usd(1000025), []string{"U0A"}, at
		}),
			[]string{"Waiting for approval: your campaign", "approve 2 legs (USD 10,000.25) in one decision", "Total to approve"}, false},
		{"campaign completed", with(camp, func(u *RequesterUpdate) { u.Kind, u.Landed = KindPlaced, 3 }),
			[]string{"Completed: your campaign", "3 of 3 legs placed", "committing USD 22,500.00"}, false},
		{"campaign partial", with(camp, func(u *RequesterUpdate) { u.Kind, u.Landed, u.Amount = KindPartial, 2, usd(1000025) }),
			[]string{"Partially completed", "2 of 3 legs placed", "USD 10,000.25"}, false},
		{"campaign failed", with(camp, func(u *RequesterUpdate) { u.Kind = KindFailed }), []string{"Failed: your campaign", "0 of 3 legs placed"}, false},
		{"campaign failed in its own steps", with(camp, func(u *RequesterUpdate) {
			u.Kind, u.Landed, u.Reason = KindFailed, 1, "The campaign stopped after its legs were handed to their own media buys: a step <failed>. 1 of its 3 legs placed."
		}),
			[]string{"Failed: your campaign", "*Failed*: The campaign stopped after its legs were handed", "a step &lt;failed&gt;", "1 of 3 legs placed"}, false},
		{"campaign canceled", with(camp, func(u *RequesterUpdate) { u.Kind = KindCanceled }), []string{"Canceled: your campaign", "nothing was bought"}, false},
		{"campaign without legs", with(camp, func(u *RequesterUpdate) { u.Kind, u.Legs = KindSubmitted, 0 }), nil, true},
		{"campaign placed a buy", with(camp, func(u *RequesterUpdate) { u.Kind = KindExpired }), nil, true},
		{"unknown subject", with(camp, func(u *RequesterUpdate) { u.Kind, u.Subject = KindPlaced, "invoice" }), nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := RequesterMessage(tc.u)
			if (err != nil) != tc.err {
				t.Fatalf("err = %v", err)
			}
			if err != nil {
				return
			}
			b := render(t, m)
			for _, w := range append(tc.want, "Reference: "+tc.u.OperationID) {
				if !strings.Contains(b, w) {
					t.Errorf("message lacks %q: %s", w, b)
				}
			}
			if strings.Contains(b, "<!here>") || strings.Contains(b, "<launch>") {
				t.Errorf("outside text is not escaped: %s", b)
			}
		})
	}
}
