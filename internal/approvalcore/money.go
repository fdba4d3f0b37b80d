package approvalcore

import "github.com/buyflow/buyflow/internal/money"

// Money is an amount in the currency's minor units (cents for USD, yen for
// JPY) with its ISO 4217 code.
type Money struct {
	Minor    int64
	Currency string
}

// String formats the amount as money.Amount.Display does, e.g. "USD 12,500.00".
func (m Money) String() string { return money.Amount{Minor: m.Minor, Currency: m.Currency}.Display() }
