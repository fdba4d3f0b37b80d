package modification

import "github.com/buyflow/buyflow/internal/money"

// OverBudget reports whether spend (a decimal in currency) is above the approved budget.
// Amounts that do not parse are not over budget: they cannot be compared, and the snapshot
// that carries them says so itself.
func OverBudget(spend, approved, currency string) bool {
	s, err := money.ParseDecimal(spend, currency)
	if err != nil {
		return false
	}
	a, err := money.ParseDecimal(approved, currency)
	if err != nil {
		return false
	}
	return s.Minor > a.Minor
}
