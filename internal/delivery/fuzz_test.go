package delivery

import (
	"encoding/json"
	"math/big"
	"testing"
)

// FuzzSpendLiteral feeds seller-reported spend literals to the reader's parser: it must never
// panic, refuse what is not a number of 0 or more, and keep an accepted literal's exact value.
func FuzzSpendLiteral(f *testing.F) {
	for _, s := range []string{"0", "2999.995", "3000.01", "1e3", "-1", "1e400000", "1e99999999", "0.1000000000001", "abc", "", "12345678901234567890.123"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, literal string) {
		got, ok := decimal(json.Number(literal))
		if !ok {
			return
		}
		want, wok := new(big.Rat).SetString(literal)
		if !wok || want.Sign() < 0 {
			t.Fatalf("decimal(%q) accepted %q", literal, got)
		}
		back, bok := new(big.Rat).SetString(got)
		if !bok {
			t.Fatalf("decimal(%q) = %q, not a decimal", literal, got)
		}
		if back.Cmp(want) != 0 && len(got) < 40 {
			// Only a literal with more than 12 decimals is cut; it then differs by less than 1e-12.
			diff := new(big.Rat).Sub(back, want)
			if diff.Abs(diff).Cmp(big.NewRat(1, 1_000_000_000_000)) >= 0 {
				t.Fatalf("decimal(%q) = %q, off by %s", literal, got, diff.FloatString(15))
			}
		}
	})
}
