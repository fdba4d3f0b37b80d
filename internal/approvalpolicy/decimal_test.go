package approvalpolicy

import (
	"regexp"
	"testing"
)

// FuzzIsDecimal holds the hand-written decimal check to the pattern it replaced.
func FuzzIsDecimal(f *testing.F) {
	decimalRE := regexp.MustCompile(`^[0-9]{1,18}(\.[0-9]{1,6})?$`)
	for _, s := range []string{"10000.00", "0", "1.", ".5", "123456789012345678.123456", "1234567890123456789", "1.1234567", "1.2.3", "١٢"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := isDecimal(s), decimalRE.MatchString(s); got != want {
			t.Fatalf("isDecimal(%q) = %v, the pattern says %v", s, got, want)
		}
	})
}
