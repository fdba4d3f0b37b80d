package money

import (
	"errors"
	"math/big"
	"strings"
	"testing"

	"golang.org/x/text/currency"
)

func TestParse(t *testing.T) {
	tests := []struct {
		lit, cur string
		minor    int64
		reason   Reason
	}{
		{lit: "15000", cur: "USD", minor: 1500000},
		{lit: "5000.5", cur: "USD", minor: 500050},
		{lit: "0.01", cur: "USD", minor: 1},
		{lit: "1.5e3", cur: "USD", minor: 150000},
		{lit: "15E-1", cur: "USD", minor: 150},
		{lit: "1000", cur: "JPY", minor: 1000},
		{lit: "1000.00", cur: "JPY", minor: 1000},
		{lit: "1.250", cur: "KWD", minor: 1250},
		{lit: "9999", cur: "KWD", minor: 9999000},
		{lit: "0", cur: "USD", minor: 0},
		{lit: "-0", cur: "USD", minor: 0},
		{lit: "0e-99", cur: "USD", minor: 0},
		{lit: "1000000000000", cur: "USD", minor: MaxMinor / 10},
		{lit: "1000.50", cur: "JPY", reason: TooPrecise},
		{lit: "1.001", cur: "USD", reason: TooPrecise},
		{lit: "1.2345", cur: "KWD", reason: TooPrecise},
		{lit: "1.00001", cur: "CLF", reason: TooPrecise},
		{lit: "-1", cur: "USD", reason: Negative},
		{lit: "-1e-10000000", cur: "USD", reason: NotANumber},
		{lit: "1e10000000", cur: "USD", reason: NotANumber},
		{lit: "2E9999999", cur: "USD", reason: NotANumber},
		{lit: "1e999", cur: "USD", reason: NotANumber},
		{lit: "1e25", cur: "USD", reason: TooLarge},
		{lit: "1e-999", cur: "USD", reason: NotANumber},
		{lit: "1e-50", cur: "USD", reason: TooPrecise},
		{lit: "10000000000000", cur: "USD", minor: MaxMinor},
		{lit: "10000000000000.01", cur: "USD", reason: TooLarge},
		{lit: "99999999999999999999999", cur: "JPY", reason: TooLarge},
		{lit: strings.Repeat("1", 65), cur: "JPY", reason: NotANumber},
		{lit: "100", cur: "ZZZ", reason: NotACurrency},
		{lit: "100", cur: "usd", reason: NotACurrency},
		{lit: "100", cur: "XAU", reason: NotACurrency},
		{lit: "100", cur: "XXX", reason: NotACurrency},
		{lit: "0x10", cur: "USD", reason: NotANumber},
		{lit: "01", cur: "USD", reason: NotANumber},
		{lit: "1.", cur: "USD", reason: NotANumber},
		{lit: ".5", cur: "USD", reason: NotANumber},
		{lit: "+1", cur: "USD", reason: NotANumber},
		{lit: "1e", cur: "USD", reason: NotANumber},
		{lit: "NaN", cur: "USD", reason: NotANumber},
		{lit: "", cur: "USD", reason: NotANumber},
	}
	for _, tt := range tests {
		got, err := Parse(tt.lit, tt.cur)
		if tt.reason == "" {
			if err != nil || got.Minor != tt.minor || got.Currency != tt.cur {
				t.Errorf("Parse(%q, %s) = %+v, %v; want %d", tt.lit, tt.cur, got, err, tt.minor)
			}
			continue
		}
		var me *Error
		if !errors.As(err, &me) || me.Reason != tt.reason {
			t.Errorf("Parse(%q, %s) = %+v, %v; want %s", tt.lit, tt.cur, got, err, tt.reason)
		} else if me.Error() == "" {
			t.Errorf("Parse(%q, %s): no message", tt.lit, tt.cur)
		}
	}
}

func TestDecimalRoundTrips(t *testing.T) {
	for _, a := range []Amount{{1500000, "USD"}, {1, "USD"}, {1000, "JPY"}, {1250, "KWD"}, {12345, "CLF"}, {0, "EUR"}} {
		s := a.Decimal()
		back, err := ParseDecimal(s, a.Currency)
		if err != nil || back != a {
			t.Errorf("%+v → %q → %+v, %v", a, s, back, err)
		}
	}
	if got := (Amount{2000050, "USD"}).Decimal(); got != "20000.50" {
		t.Errorf("Decimal = %q", got)
	}
	if _, err := ParseDecimal("1e3", "USD"); err == nil {
		t.Error("ParseDecimal took an exponent")
	}
}

// TestTableAgreesWithCLDR checks the vendored ISO 4217 table against the Unicode CLDR currency
// data that golang.org/x/text carries (a source we did not write). CLDR follows ISO's minor
// units except where it deliberately rounds to whole units for display; those codes are listed
// here, so a typo in the table (JPY with 2 decimals, USD with 0) fails.
func TestTableAgreesWithCLDR(t *testing.T) {
	cldrWholeUnits := map[string]bool{
		"AFN": true, "ALL": true, "AMD": true, "COP": true, "GYD": true, "IDR": true, "IQD": true,
		"IRR": true, "KPW": true, "LAK": true, "LBP": true, "MGA": true, "MMK": true, "MNT": true,
		"MUR": true, "PKR": true, "RSD": true, "SOS": true, "SYP": true, "TZS": true, "UZS": true,
		"YER": true,
	}
	// Codes ISO introduced after the CLDR release x/text bundles.
	newer := map[string]bool{"MRU": true, "SLE": true, "UYW": true, "VED": true, "VES": true, "XCG": true, "ZWG": true}
	for code, digits := range minorUnits {
		u, err := currency.ParseISO(code)
		if err != nil {
			if !newer[code] {
				t.Errorf("%s: not a currency in CLDR: %v", code, err)
			}
			continue
		}
		scale, _ := currency.Standard.Rounding(u)
		if scale != digits && (!cldrWholeUnits[code] || scale != 0) {
			t.Errorf("%s: table says %d decimals, CLDR %d", code, digits, scale)
		}
	}
	for _, c := range []string{"USD", "EUR", "GBP", "JPY", "KWD", "CHF", "CAD", "AUD", "BRL", "INR", "CNY", "MXN"} {
		if _, ok := MinorUnits(c); !ok {
			t.Errorf("%s missing", c)
		}
	}
}

// FuzzParse checks Parse against exact rational arithmetic on every literal it accepts, and
// that it never panics or accepts a value out of bounds.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"15000", "5000.5", "1e10000000", "-1e-10000000", "2E9999999", "1000.50", "1.5e3", "0.001", "-0", "1e999"} {
		f.Add(s, "USD")
		f.Add(s, "JPY")
		f.Add(s, "KWD")
	}
	f.Fuzz(func(t *testing.T, lit, cur string) {
		a, err := Parse(lit, cur)
		if err != nil {
			return
		}
		if a.Minor < 0 || a.Minor > MaxMinor || a.Currency != cur {
			t.Fatalf("Parse(%q, %q) = %+v", lit, cur, a)
		}
		r, ok := new(big.Rat).SetString(lit)
		if !ok {
			t.Fatalf("Parse accepted %q, which is not a number", lit)
		}
		digits, _ := MinorUnits(cur)
		want := new(big.Rat).Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(digits)), nil)))
		if !want.IsInt() || want.Num().Int64() != a.Minor {
			t.Fatalf("Parse(%q, %q) = %d minor units, exact value %s", lit, cur, a.Minor, want.RatString())
		}
	})
}

func TestDisplay(t *testing.T) {
	cases := []struct {
		a    Amount
		want string
	}{
		{Amount{Minor: 1250000, Currency: "USD"}, "USD 12,500.00"},
		{Amount{Minor: 1000000, Currency: "JPY"}, "JPY 1,000,000"},
		{Amount{Minor: 1250, Currency: "KWD"}, "KWD 1.250"},
		{Amount{Minor: 5, Currency: "usd"}, "USD 0.05"},
		{Amount{Minor: -123456, Currency: "EUR"}, "EUR -1,234.56"},
		{Amount{Minor: 100, Currency: "XYZ1"}, "XYZ1 1.00"},
		{Amount{Minor: 1}, "??? 0.01"},
	}
	for _, c := range cases {
		if got := c.a.Display(); got != c.want {
			t.Errorf("%+v.Display() = %q, want %q", c.a, got, c.want)
		}
	}
}

func TestOverBudgetIsExact(t *testing.T) {
	for _, c := range []struct {
		spend, approved string
		over            bool
	}{{"3000.00", "3000.00", false}, {"3000.001", "3000.00", true}, {"2999.999999", "3000", false}, {"x", "1", false}, {"1", "", false}} {
		if got := OverBudget(c.spend, c.approved); got != c.over {
			t.Errorf("OverBudget(%s, %s) = %v", c.spend, c.approved, got)
		}
	}
}
