package approvalcore

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// threePackages is a buy of three packages adding up to USD 12,500.00 whose display package
// has its own end date.
const threePackages = `{"start_time":"2026-01-05T00:00:00Z","end_time":"2026-03-29T23:59:59Z","packages":[` +
	`{"product_id":"ctv_premium_sports","budget":6000},` +
	`{"product_id":"olv_highlights","budget":4250.00},` +
	`{"product_id":"display_run_of_site","budget":2250,"end_time":"2026-02-28T23:59:59Z"}]}`

func TestParsePurchase(t *testing.T) {
	t.Parallel()
	p, err := ParsePurchase([]byte(threePackages), "USD")
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ product, flight, budget string }{
		{"ctv_premium_sports", "2026-01-05 → 2026-03-29", "USD 6,000.00"},
		{"olv_highlights", "2026-01-05 → 2026-03-29", "USD 4,250.00"},
		{"display_run_of_site", "2026-01-05 → 2026-02-28", "USD 2,250.00"},
	}
	if len(p.Packages) != len(want) {
		t.Fatalf("%d packages, want %d", len(p.Packages), len(want))
	}
	for i, w := range want {
		pk := p.Packages[i]
		if pk.Product != w.product || pk.Flight() != w.flight || pk.Budget.String() != w.budget {
			t.Errorf("package %d = %s | %s | %s, want %s | %s | %s", i, pk.Product, pk.Flight(), pk.Budget, w.product, w.flight, w.budget)
		}
	}
	if p.Flight() != "2026-01-05 → 2026-03-29" {
		t.Errorf("buy flight = %q", p.Flight())
	}
}

func TestParsePurchaseRefusesWhatItCannotShowExactly(t *testing.T) {
	t.Parallel()
	for name, payload := range map[string]string{
		"not an object":     `[1,2]`,
		"string budget":     `{"packages":[{"product_id":"a","budget":"10"}]}`,
		"object budget":     `{"packages":[{"product_id":"a","budget":{"amount":10}}]}`,
		"too many decimals": `{"packages":[{"product_id":"a","budget":10.001}]}`,
		"no budget":         `{"packages":[{"product_id":"a"}]}`,
		"truncated":         `{"packages":[{"product_id":"a","budget":1`,
	} {
		if _, err := ParsePurchase([]byte(payload), "USD"); err == nil {
			t.Errorf("%s: accepted %s", name, payload)
		}
	}
	// JPY has no decimals: 10.5 yen is not an amount.
	if _, err := ParsePurchase([]byte(`{"packages":[{"product_id":"a","budget":10.5}]}`), "JPY"); err == nil {
		t.Error("accepted 10.5 JPY")
	}
}

func TestLongPackageListsFold(t *testing.T) {
	t.Parallel()
	var pk []string
	for i := range 25 {
		pk = append(pk, fmt.Sprintf(`{"product_id":"p%02d","budget":100}`, i))
	}
	p, err := ParsePurchase([]byte(`{"packages":[`+strings.Join(pk, ",")+`]}`), "USD")
	if err != nil {
		t.Fatal(err)
	}
	shown, folded := p.Shown()
	if len(shown) != MaxShownPackages-1 || folded != 25-(MaxShownPackages-1) {
		t.Fatalf("shown %d, folded %d", len(shown), folded)
	}
	if got, want := p.Folded(), (Money{Minor: int64(folded) * 10000, Currency: "USD"}); got != want {
		t.Errorf("folded budgets = %s, want %s", got, want)
	}
	a := pendingApproval()
	a.Purchase = p
	a.Amount = Money{Minor: 250000, Currency: "USD"}
	var buf bytes.Buffer
	if err := RenderConfirm(&buf, ConfirmPage{Approval: a, Approver: "alice", Signed: signedFixture(t)}); err != nil {
		t.Fatal(err)
	}
	html := buf.String()
	if n := strings.Count(html, "<tr><td>p"); n != MaxShownPackages-1 {
		t.Errorf("page lists %d package rows, want %d", n, MaxShownPackages-1)
	}
	if !strings.Contains(html, fmt.Sprintf("and %d more packages", folded)) || !strings.Contains(html, "USD 2,500.00") {
		t.Error("page does not fold the rest of the packages into one line with their budget and show the total")
	}
}

func FuzzParsePurchase(f *testing.F) {
	f.Add([]byte(threePackages), "USD")
	f.Add([]byte(`{"proposal_id":"p","packages":[]}`), "JPY")
	f.Add([]byte(`{"packages":[{"budget":1e400}]}`), "KWD")
	f.Fuzz(func(t *testing.T, payload []byte, currency string) {
		p, err := ParsePurchase(payload, currency)
		if err != nil {
			return
		}
		for _, pk := range p.Packages {
			if pk.Budget.Currency != currency {
				t.Fatalf("package budget in %q, buy in %q", pk.Budget.Currency, currency)
			}
			_ = pk.Flight()
		}
		// Whatever it read renders.
		a := pendingApproval()
		a.Purchase = p
		writePurchase(&strings.Builder{}, a)
	})
}
