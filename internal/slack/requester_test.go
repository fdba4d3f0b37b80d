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
			var b strings.Builder
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(m); err != nil {
				t.Fatal(err)
			}
			for _, w := range append(tc.want, "Reference: op-1") {
				if !strings.Contains(b.String(), w) {
					t.Errorf("message lacks %q: %s", w, b.String())
				}
			}
			if strings.Contains(b.String(), "<!here>") || strings.Contains(b.String(), "<@U0BOSS>") {
				t.Errorf("outside text is not escaped: %s", b.String())
			}
			if m.Blocks[0].Type != "header" || m.Blocks[len(m.Blocks)-1].Type != "context" {
				t.Errorf("blocks = %+v, want the approval messages' header … context", m.Blocks)
			}
		})
	}
}
