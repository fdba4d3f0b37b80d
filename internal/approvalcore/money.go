package approvalcore

import (
	"strconv"
	"strings"

	"github.com/buyflow/buyflow/internal/money"
)

// Money is an amount in the currency's minor units (cents for USD, yen for
// JPY) with its ISO 4217 code.
type Money struct {
	Minor    int64
	Currency string
}

// String formats the amount with its currency code first and grouped
// thousands, e.g. "USD 12,500.00", "JPY 1,000,000", "KWD 1.250".
// The decimals are the currency's ISO 4217 minor unit; a code that is not ISO 4217 prints
// with 2.
func (m Money) String() string {
	code := strings.ToUpper(strings.TrimSpace(m.Currency))
	if code == "" {
		code = "???"
	}
	digits, ok := money.MinorUnits(code)
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
