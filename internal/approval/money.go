package approval

import (
	"strconv"
	"strings"
)

// Money is an amount in the currency's minor units (cents for USD, yen for
// JPY) with its ISO 4217 code.
type Money struct {
	Minor    int64
	Currency string
}

// minorDigits lists ISO 4217 currencies whose minor unit is not 2 digits.
var minorDigits = map[string]int{
	"BIF": 0, "CLP": 0, "DJF": 0, "GNF": 0, "ISK": 0, "JPY": 0, "KMF": 0, "KRW": 0,
	"PYG": 0, "RWF": 0, "UGX": 0, "UYI": 0, "VND": 0, "VUV": 0, "XAF": 0, "XOF": 0, "XPF": 0,
	"BHD": 3, "IQD": 3, "JOD": 3, "KWD": 3, "LYD": 3, "OMR": 3, "TND": 3,
	"CLF": 4, "UYW": 4,
}

// String formats the amount with its currency code first and grouped
// thousands, e.g. "USD 12,500.00", "JPY 1,000,000", "KWD 1.250".
// Currencies not listed as exceptions are assumed to have 2 minor digits.
func (m Money) String() string {
	code := strings.ToUpper(strings.TrimSpace(m.Currency))
	if code == "" {
		code = "???"
	}
	digits, ok := minorDigits[code]
	if !ok {
		digits = 2
	}
	neg := m.Minor < 0
	u := uint64(m.Minor)
	if neg {
		u = -u // two's complement: correct for math.MinInt64 too
	}
	s := strconv.FormatUint(u, 10)
	if len(s) <= digits {
		s = strings.Repeat("0", digits-len(s)+1) + s
	}
	whole, frac := s[:len(s)-digits], s[len(s)-digits:]
	var b strings.Builder
	b.WriteString(code)
	b.WriteByte(' ')
	if neg {
		b.WriteByte('-')
	}
	for i, c := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if digits > 0 {
		b.WriteByte('.')
		b.WriteString(frac)
	}
	return b.String()
}
