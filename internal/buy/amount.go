package buy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/buyflow/buyflow/internal/money"
)

// buyAmount is the one definition of the amount of a buy: the sum of what the seller will be
// asked to commit, in the buy's currency. With packages that is the sum of their budgets; a
// proposal buy without packages commits total_budget. Where a request carries both, they must
// be equal: a total_budget below the packages would show the approver less than the seller
// is asked to spend. Every amount in the request is checked in the buy's currency, exactly
// (no rounding, no more decimals than the currency has).
//
// Its caller has schema-checked mb, so the fields have their types; a refusal still names its
// field in case they do not.
func buyAmount(mb map[string]json.RawMessage, currency string) (money.Amount, error) {
	var pkgs []map[string]json.RawMessage
	if raw, ok := mb["packages"]; ok {
		if err := json.Unmarshal(raw, &pkgs); err != nil {
			return money.Amount{}, unprocessable("invalid_budget", "/media_buy/packages", "packages must be an array of package objects")
		}
	}
	sum := money.Amount{Currency: currency}
	for i, p := range pkgs {
		field := fmt.Sprintf("/media_buy/packages/%d", i)
		budget, err := AmountAt(p["budget"], currency, field+"/budget", "invalid_budget")
		if err != nil {
			return money.Amount{}, err
		}
		sum = sum.Add(budget)
		if sum.Minor > money.MaxMinor {
			return money.Amount{}, unprocessable("invalid_budget", field+"/budget", "the package budgets add up to more than any amount buyflow accepts")
		}
		// The bid is what each unit costs (a CPM, a CPC): it is money in the buy's currency
		// too, and the seller honours it as sent.
		if raw, ok := p["bid_price"]; ok {
			if _, err := AmountAt(raw, currency, field+"/bid_price", "invalid_price"); err != nil {
				return money.Amount{}, err
			}
		}
	}

	var total *money.Amount
	if raw, ok := mb["total_budget"]; ok {
		var tb struct {
			Amount   json.RawMessage `json:"amount"`
			Currency string          `json:"currency"`
		}
		if err := json.Unmarshal(raw, &tb); err != nil {
			return money.Amount{}, unprocessable("invalid_budget", "/media_buy/total_budget", "total_budget must be {amount, currency}")
		}
		if tb.Currency != currency {
			return money.Amount{}, unprocessable("currency_mismatch", "/media_buy/total_budget/currency",
				"total_budget.currency is %q but the buy's currency is %q: every amount in a buy is in its one currency", tb.Currency, currency)
		}
		a, err := AmountAt(tb.Amount, currency, "/media_buy/total_budget/amount", "invalid_budget")
		if err != nil {
			return money.Amount{}, err
		}
		total = &a
	}

	switch {
	case len(pkgs) > 0 && total != nil && total.Minor != sum.Minor:
		return money.Amount{}, unprocessable("budget_mismatch", "/media_buy/total_budget/amount",
			"total_budget.amount is %s %s but the package budgets add up to %s %s; they must be equal (or leave total_budget out)",
			total.Decimal(), currency, sum.Decimal(), currency)
	case len(pkgs) == 0 && total == nil:
		return money.Amount{}, unprocessable("invalid_budget", "/media_buy/packages", "packages with budgets (or proposal_id with total_budget) are required")
	case len(pkgs) == 0:
		if _, ok := mb["proposal_id"]; !ok {
			return money.Amount{}, unprocessable("invalid_budget", "/media_buy/packages", "total_budget alone commits nothing: send packages, or proposal_id with total_budget")
		}
		sum = *total
	}
	if sum.Minor <= 0 {
		return money.Amount{}, unprocessable("invalid_budget", "/media_buy", "the buy's amount must be more than zero")
	}
	return sum, nil
}

// AmountAt parses the JSON number raw as an amount in currency, or refuses it with code at
// field.
func AmountAt(raw json.RawMessage, currency, field, code string) (money.Amount, error) {
	var n json.Number
	raw = bytes.TrimSpace(raw)
	// json.Number also takes a quoted number; an amount is a JSON number.
	if len(raw) == 0 || raw[0] == '"' || json.Unmarshal(raw, &n) != nil {
		return money.Amount{}, unprocessable(code, field, "must be a number")
	}
	a, err := money.Parse(n.String(), currency)
	var me *money.Error
	if errors.As(err, &me) {
		return money.Amount{}, unprocessable(code, field, "%v", me)
	}
	return a, err
}
