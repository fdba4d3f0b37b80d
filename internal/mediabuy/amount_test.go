package mediabuy

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/buyflow/buyflow/internal/money"
)

// raw is a JSON number literal that encoding/json writes as is (a float64 cannot carry
// 1e10000000 or keep 1000.50 apart from 1000.5).
func raw(lit string) json.RawMessage { return json.RawMessage(lit) }

// proposal turns the example into a proposal-mode buy: no packages, proposal_id and
// total_budget.
func proposal(m map[string]any, amount any, currency string) {
	delete(mb(m), "packages")
	mb(m)["proposal_id"] = "prop-spring-2027"
	mb(m)["total_budget"] = map[string]any{"amount": amount, "currency": currency}
}

// amountRefusals are the ways a request's amounts can disagree with what the seller is asked
// to commit, each refused with its code and the field that carries it (exact).
var amountRefusals = []refusal{
	{name: "total_budget under the packages (the approval bypass)", edit: func(m map[string]any) {
		pkg(m, 0)["budget"], pkg(m, 1)["budget"] = 15000, 15000
		mb(m)["total_budget"] = map[string]any{"amount": 100, "currency": "USD"}
	}, status: 422, code: "budget_mismatch", field: "/media_buy/total_budget/amount", exact: true},
	{name: "total_budget over the packages", edit: func(m map[string]any) {
		mb(m)["total_budget"] = map[string]any{"amount": raw("20000.51"), "currency": "USD"}
	}, status: 422, code: "budget_mismatch", field: "/media_buy/total_budget/amount", exact: true},
	{name: "total_budget in another currency", edit: func(m map[string]any) {
		mb(m)["total_budget"] = map[string]any{"amount": 9999, "currency": "KWD"}
	}, status: 422, code: "currency_mismatch", field: "/media_buy/total_budget/currency", exact: true},
	{name: "proposal buy in another currency", edit: func(m map[string]any) { proposal(m, 9999, "KWD") },
		status: 422, code: "currency_mismatch", field: "/media_buy/total_budget/currency", exact: true},
	{name: "currency that does not exist", edit: func(m map[string]any) { m["currency"] = "ZZZ" },
		status: 422, code: "invalid_currency", field: "/currency", exact: true},
	{name: "a metal is not a currency", edit: func(m map[string]any) { m["currency"] = "XAU" },
		status: 422, code: "invalid_currency", field: "/currency", exact: true},
	{name: "JPY budget with decimals", edit: func(m map[string]any) {
		m["currency"] = "JPY"
		pkg(m, 0)["budget"], pkg(m, 1)["budget"] = raw("1000.50"), 2000
	}, status: 422, code: "invalid_budget", field: "/media_buy/packages/0/budget", exact: true},
	{name: "JPY proposal total with decimals", edit: func(m map[string]any) { m["currency"] = "JPY"; proposal(m, raw("1000.5"), "JPY") },
		status: 422, code: "invalid_budget", field: "/media_buy/total_budget/amount", exact: true},
	{name: "KWD budget with four decimals", edit: func(m map[string]any) {
		m["currency"] = "KWD"
		pkg(m, 1)["budget"] = raw("1.2345")
	}, status: 422, code: "invalid_budget", field: "/media_buy/packages/1/budget", exact: true},
	{name: "bid price with more decimals than the currency", edit: func(m map[string]any) { pkg(m, 1)["bid_price"] = raw("12.505") },
		status: 422, code: "invalid_price", field: "/media_buy/packages/1/bid_price", exact: true},
	{name: "JPY bid price with decimals", edit: func(m map[string]any) {
		m["currency"] = "JPY"
		pkg(m, 1)["budget"] = 5000
		pkg(m, 0)["bid_price"] = raw("2.5")
	}, status: 422, code: "invalid_price", field: "/media_buy/packages/0/bid_price", exact: true},
	{name: "package budgets over the bound", edit: func(m map[string]any) {
		pkg(m, 0)["budget"], pkg(m, 1)["budget"] = raw("9000000000000"), raw("9000000000000")
	}, status: 422, code: "invalid_budget", field: "/media_buy/packages/1/budget", exact: true},
	{name: "one package over the bound", edit: func(m map[string]any) { pkg(m, 0)["budget"] = raw("1e20") },
		status: 422, code: "invalid_budget", field: "/media_buy/packages/0/budget", exact: true},
	{name: "total_budget alone, no proposal", edit: func(m map[string]any) {
		proposal(m, 100, "USD")
		delete(mb(m), "proposal_id")
	}, status: 422, code: "invalid_budget", field: "/media_buy/packages", exact: true},
	{name: "zero proposal total", edit: func(m map[string]any) { proposal(m, 0, "USD") },
		status: 422, code: "invalid_budget", field: "/media_buy", exact: true},
	{name: "budget 1e10000000", edit: func(m map[string]any) { pkg(m, 0)["budget"] = raw("1e10000000") },
		status: 422, code: "number_out_of_range", field: "/media_buy/packages/0/budget", exact: true},
	{name: "budget -1e-10000000", edit: func(m map[string]any) { pkg(m, 1)["budget"] = raw("-1e-10000000") },
		status: 422, code: "number_out_of_range", field: "/media_buy/packages/1/budget", exact: true},
	{name: "budget 2E9999999", edit: func(m map[string]any) { pkg(m, 0)["budget"] = raw("2E9999999") },
		status: 422, code: "number_out_of_range", field: "/media_buy/packages/0/budget", exact: true},
	{name: "a huge number anywhere", edit: func(m map[string]any) { mb(m)["ext"] = map[string]any{"x": []any{raw("1e10000000")}} },
		status: 422, code: "number_out_of_range", field: "/media_buy/ext/x/0", exact: true},
	{name: "a huge total_budget", edit: func(m map[string]any) { proposal(m, raw("2E9999999"), "USD") },
		status: 422, code: "number_out_of_range", field: "/media_buy/total_budget/amount", exact: true},
	{name: "a budget written twice", raw: `{"seller_id":"sim-seller","currency":"USD","media_buy":{"packages":[{"budget":1,"product_id":"p","budget":30000}]}}`,
		status: 422, code: "duplicate_key", field: "/media_buy/packages/0/budget", exact: true},
	{name: "forty-one digits", raw: `{"seller_id":"sim-seller","currency":"USD","media_buy":{"packages":[{"budget":` + strings.Repeat("9", 41) + `}]}}`,
		status: 422, code: "number_out_of_range", field: "/media_buy/packages/0/budget", exact: true},
}

func TestParseSubmitAmount(t *testing.T) {
	tests := []struct {
		name string
		edit func(m map[string]any)
		want money.Amount
	}{
		{name: "packages", want: money.Amount{Minor: 2000050, Currency: "USD"}},
		{name: "total_budget equal to the packages", edit: func(m map[string]any) {
			mb(m)["total_budget"] = map[string]any{"amount": raw("20000.50"), "currency": "USD"}
		}, want: money.Amount{Minor: 2000050, Currency: "USD"}},
		{name: "proposal", edit: func(m map[string]any) { proposal(m, 30000, "USD") }, want: money.Amount{Minor: 3000000, Currency: "USD"}},
		{name: "KWD proposal", edit: func(m map[string]any) { m["currency"] = "KWD"; proposal(m, raw("9999.125"), "KWD") },
			want: money.Amount{Minor: 9999125, Currency: "KWD"}},
		{name: "JPY with a zero fraction", edit: func(m map[string]any) {
			m["currency"] = "JPY"
			pkg(m, 0)["budget"], pkg(m, 1)["budget"] = raw("1000.00"), raw("1e3")
		}, want: money.Amount{Minor: 2000, Currency: "JPY"}},
		{name: "bid price in cents", edit: func(m map[string]any) { pkg(m, 0)["bid_price"] = raw("12.50") }, want: money.Amount{Minor: 2000050, Currency: "USD"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := example(t)
			if tt.edit != nil {
				tt.edit(m)
			}
			got, err := ParseSubmit(context.Background(), marshal(t, m), agents, schemas(t))
			if err != nil {
				t.Fatalf("ParseSubmit: %v", err)
			}
			if got.Amount != tt.want {
				t.Fatalf("amount = %+v, want %+v", got.Amount, tt.want)
			}
		})
	}
}

// TestSchemaPanicIsGuarded feeds the crashing numbers where the bound is not the first line of
// defence: the validator itself must refuse them, not panic.
func TestSchemaPanicIsGuarded(t *testing.T) {
	for _, lit := range []string{"1e10000000", "-1e-10000000", "2E9999999"} {
		m := example(t)
		pkg(m, 0)["budget"] = raw(lit)
		body := marshal(t, mb(m))
		err := schemas(t).ValidateRequest("create_media_buy", body)
		if err == nil {
			t.Fatalf("%s: validated", lit)
		}
		var fe FieldError
		if !errors.As(err, &fe) || fe.FieldPointer() != "/packages/0/budget" {
			t.Fatalf("%s: err = %v, want a field error at /packages/0/budget", lit, err)
		}
	}
}
