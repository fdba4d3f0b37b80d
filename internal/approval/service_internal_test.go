package approval

import (
	"testing"

	"github.com/buyflow/buyflow/internal/approvalcore"
)

func TestToMoney(t *testing.T) {
	t.Parallel()
	cases := []struct {
		amount, currency string
		want             approvalcore.Money
	}{
		{"12500.00", "USD", approvalcore.Money{Minor: 1250000, Currency: "USD"}},
		{"12500", "USD", approvalcore.Money{Minor: 1250000, Currency: "USD"}},
		{"1000000", "JPY", approvalcore.Money{Minor: 1000000, Currency: "JPY"}},
		{"1.250", "KWD", approvalcore.Money{Minor: 1250, Currency: "KWD"}},
		// Never rounded: an amount with more decimals than its currency is not shown at all.
		{"1.2505", "KWD", approvalcore.Money{Currency: "KWD"}},
		{"1000.50", "JPY", approvalcore.Money{Currency: "JPY"}},
		{"0.005", "USD", approvalcore.Money{Currency: "USD"}},
		{"oops", "USD", approvalcore.Money{Currency: "USD"}},
	}
	for _, tc := range cases {
		if got := ToMoney(tc.amount, tc.currency); got != tc.want {
			t.Errorf("toMoney(%q, %q) = %+v, want %+v", tc.amount, tc.currency, got, tc.want)
		}
	}
}
