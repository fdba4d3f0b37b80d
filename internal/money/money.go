// Package money holds exact amounts of money in ISO 4217 currencies: an amount is an integer
// count of the currency's minor units (cents for USD, yen for JPY, fils for KWD), parsed from a
// decimal literal without rounding and never through a float.
package money

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/buyflow/buyflow/internal/jsonnum"
)

// MaxMinor bounds an amount: 10^15 minor units (ten trillion dollars, a quadrillion yen). No
// media buy comes near it; a sum of amounts under it cannot overflow an int64.
const MaxMinor = 1_000_000_000_000_000

// Amount is an exact amount: Minor units of Currency.
type Amount struct {
	Minor    int64
	Currency string
}

// MinorUnits returns how many decimals an amount in the ISO 4217 currency code may carry, and
// whether code is a current ISO 4217 currency at all (upper case, as the standard writes it).
func MinorUnits(code string) (int, bool) {
	d, ok := minorUnits[code]
	return d, ok
}

// Reason says why a literal is not an amount.
type Reason string

// Reasons Parse refuses a literal for.
const (
	NotACurrency Reason = "not_a_currency"
	NotANumber   Reason = "not_a_number"
	Negative     Reason = "negative"
	TooPrecise   Reason = "too_precise"
	TooLarge     Reason = "too_large"
)

// Error is a literal that is not an amount in its currency.
type Error struct {
	Reason   Reason
	Literal  string
	Currency string
	// Digits is the currency's minor unit (for TooPrecise).
	Digits int
	// Err says why a literal is not a number (for NotANumber), when it is one but over
	// jsonnum's bounds.
	Err error
}

func (e *Error) Error() string {
	lit := e.Literal
	if len(lit) > 24 {
		lit = lit[:24] + "…"
	}
	switch e.Reason {
	case NotACurrency:
		return fmt.Sprintf("%q is not an ISO 4217 currency code", e.Currency)
	case Negative:
		return fmt.Sprintf("%s is negative; an amount of money is zero or more", lit)
	case TooPrecise:
		if e.Digits == 0 {
			return fmt.Sprintf("%s has decimals, but %s has no minor unit: send a whole number", lit, e.Currency)
		}
		return fmt.Sprintf("%s has more than the %d decimals %s has", lit, e.Digits, e.Currency)
	case TooLarge:
		return fmt.Sprintf("%s is larger than any amount buyflow accepts", lit)
	}
	if e.Err != nil {
		return fmt.Sprintf("%s: %v", lit, e.Err)
	}
	return fmt.Sprintf("%q is not a decimal number", lit)
}

// Parse reads a JSON number literal (such as "15000", "5000.5" or "1.5e3") as an exact
// amount in currency. It refuses a currency that is not ISO 4217, a negative amount, an amount
// with more decimals than the currency's minor unit (nothing is rounded), and one over
// MaxMinor. The literal is bounded (jsonnum.Split) before any arithmetic, so no input makes it
// slow.
func Parse(literal, currency string) (Amount, error) {
	digits, ok := MinorUnits(currency)
	if !ok {
		return Amount{}, &Error{Reason: NotACurrency, Literal: literal, Currency: currency}
	}
	fail := func(r Reason) (Amount, error) {
		return Amount{}, &Error{Reason: r, Literal: literal, Currency: currency, Digits: digits}
	}
	d, err := jsonnum.Split(literal)
	if err != nil {
		return Amount{}, &Error{Reason: NotANumber, Literal: literal, Currency: currency, Err: err}
	}
	// value = digits × 10^exp; in minor units it is digits × 10^(exp+minor unit).
	shift := d.Exp + digits
	mant := strings.TrimLeft(d.Digits, "0")
	if mant == "" {
		return Amount{Currency: currency}, nil // zero, whatever its sign or exponent
	}
	if d.Negative {
		return fail(Negative)
	}
	for shift < 0 {
		if mant[len(mant)-1] != '0' {
			return fail(TooPrecise)
		}
		mant, shift = mant[:len(mant)-1], shift+1
	}
	if len(mant)+shift > len(strconv.Itoa(MaxMinor)) {
		return fail(TooLarge)
	}
	n, err := strconv.ParseInt(mant+strings.Repeat("0", shift), 10, 64)
	if err != nil || n > MaxMinor {
		return fail(TooLarge)
	}
	return Amount{Minor: n, Currency: currency}, nil
}

// Add returns a + b. Both must be in the same currency; the sum of two amounts under
// MaxMinor cannot overflow.
func (a Amount) Add(b Amount) Amount {
	return Amount{Minor: a.Minor + b.Minor, Currency: a.Currency}
}

// Decimal formats the amount as a plain decimal with exactly the currency's minor unit of
// decimals and no code or grouping ("15000.00", "1000", "9.999"): the form the ledger keeps.
func (a Amount) Decimal() string {
	digits, _ := MinorUnits(a.Currency)
	return new(big.Rat).SetFrac(big.NewInt(a.Minor), new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(digits)), nil)).FloatString(digits)
}

// Display formats the amount for a person: its currency code first and grouped thousands, e.g. "USD 12,500.00", "JPY 1,000,000", "KWD 1.250".
// The decimals are the currency's ISO 4217 minor unit; a code that is not ISO 4217 prints
// with 2.
func (a Amount) Display() string {
	code := strings.ToUpper(strings.TrimSpace(a.Currency))
	if code == "" {
		code = "???"
	}
	digits, ok := MinorUnits(code)
	if !ok {
		digits = 2
	}
	neg := a.Minor < 0
	u := uint64(a.Minor)
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

// ParseDecimal reads back what Decimal wrote (or any decimal with at most the currency's minor
// unit of decimals): the ledger's amounts.
func ParseDecimal(s, currency string) (Amount, error) {
	if strings.ContainsAny(s, "eE+") {
		return Amount{}, &Error{Reason: NotANumber, Literal: s, Currency: currency}
	}
	return Parse(s, currency)
}

// OverBudget reports whether spend is above approved, both decimal strings, compared exactly
// whatever their number of decimals (a seller may report spend finer than the currency's minor
// unit). Amounts that do not parse are not over budget: they cannot be compared.
func OverBudget(spend, approved string) bool {
	s, ok1 := new(big.Rat).SetString(spend)
	a, ok2 := new(big.Rat).SetString(approved)
	return ok1 && ok2 && s.Cmp(a) > 0
}
