// Package buytest holds the fixtures of tests that submit media buys and campaigns: the real
// AdCP schema validator, a fixed agent set, the repository's example requests and the ways a
// request's amounts are refused. Only tests import it.
package buytest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/buyflow/buyflow/internal/adcpschemas"
	"github.com/buyflow/buyflow/internal/adcpvalidate"
	"github.com/buyflow/buyflow/internal/buy"
)

var (
	validatorOnce sync.Once
	validator     *adcpvalidate.Validator
	validatorErr  error
)

// Schemas returns the real AdCP 3.1.19 schema validator, compiled once per test binary.
func Schemas(t testing.TB) buy.SchemaValidator {
	t.Helper()
	validatorOnce.Do(func() {
		fs, err := adcpschemas.FS()
		if err != nil {
			validatorErr = err
			return
		}
		validator, validatorErr = adcpvalidate.NewValidator(fs)
	})
	if validatorErr != nil {
		t.Fatalf("load AdCP schemas: %v", validatorErr)
	}
	return validator
}

// Agents is the agent set of these tests: sellers sim-seller, sim-seller-2 and sim-seller-3,
// the disabled seller paused-seller, and the governance agent sim-governance.
func Agents(_ context.Context, id string) (buy.Agent, bool, error) {
	switch id {
	case "sim-seller", "sim-seller-2", "sim-seller-3":
		return buy.Agent{Role: "seller"}, true, nil
	case "paused-seller":
		return buy.Agent{Role: "seller", Disabled: true}, true, nil
	case "sim-governance":
		return buy.Agent{Role: "governance"}, true, nil
	}
	return buy.Agent{}, false, nil
}

// Example returns the repository's examples/<name> (media-buy.json, campaign.json) as a
// mutable map.
func Example(t testing.TB, name string) map[string]any {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	raw, err := os.ReadFile(filepath.Join(filepath.Dir(here), "..", "..", "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// Marshal is json.Marshal that fails the test.
func Marshal(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// MB is the media_buy object of a submit body.
func MB(m map[string]any) map[string]any { return m["media_buy"].(map[string]any) }

// Pkg is package i of a submit body's media_buy.
func Pkg(m map[string]any, i int) map[string]any {
	return MB(m)["packages"].([]any)[i].(map[string]any)
}

// Raw is a JSON number literal that encoding/json writes as is (a float64 cannot carry
// 1e10000000 or keep 1000.50 apart from 1000.5).
func Raw(lit string) json.RawMessage { return json.RawMessage(lit) }

// Proposal turns a submit body into a proposal-mode buy: no packages, proposal_id and
// total_budget.
func Proposal(m map[string]any, amount any, currency string) {
	delete(MB(m), "packages")
	MB(m)["proposal_id"] = "prop-spring-2027"
	MB(m)["total_budget"] = map[string]any{"amount": amount, "currency": currency}
}

// Refusal is a submit body (the media-buy example with Edit applied, or Raw) and the refusal
// it gets: Field is the JSON pointer, a prefix of the answer's unless Exact.
type Refusal struct {
	Name   string
	Edit   func(m map[string]any)
	Raw    string
	Status int
	Code   string
	Field  string
	Exact  bool
}

// AmountRefusals are the ways a request's amounts can disagree with what the seller is asked
// to commit, each refused with its code and the field that carries it (exact).
var AmountRefusals = []Refusal{
	{Name: "total_budget under the packages (the approval bypass)", Edit: func(m map[string]any) {
		Pkg(m, 0)["budget"], Pkg(m, 1)["budget"] = 15000, 15000
		MB(m)["total_budget"] = map[string]any{"amount": 100, "currency": "USD"}
	}, Status: 422, Code: "budget_mismatch", Field: "/media_buy/total_budget/amount", Exact: true},
	{Name: "total_budget over the packages", Edit: func(m map[string]any) {
		MB(m)["total_budget"] = map[string]any{"amount": Raw("20000.51"), "currency": "USD"}
	}, Status: 422, Code: "budget_mismatch", Field: "/media_buy/total_budget/amount", Exact: true},
	{Name: "total_budget in another currency", Edit: func(m map[string]any) {
		MB(m)["total_budget"] = map[string]any{"amount": 9999, "currency": "KWD"}
	}, Status: 422, Code: "currency_mismatch", Field: "/media_buy/total_budget/currency", Exact: true},
	{Name: "proposal buy in another currency", Edit: func(m map[string]any) { Proposal(m, 9999, "KWD") },
		Status: 422, Code: "currency_mismatch", Field: "/media_buy/total_budget/currency", Exact: true},
	{Name: "currency that does not exist", Edit: func(m map[string]any) { m["currency"] = "ZZZ" },
		Status: 422, Code: "invalid_currency", Field: "/currency", Exact: true},
	{Name: "a metal is not a currency", Edit: func(m map[string]any) { m["currency"] = "XAU" },
		Status: 422, Code: "invalid_currency", Field: "/currency", Exact: true},
	{Name: "JPY budget with decimals", Edit: func(m map[string]any) {
		m["currency"] = "JPY"
		Pkg(m, 0)["budget"], Pkg(m, 1)["budget"] = Raw("1000.50"), 2000
	}, Status: 422, Code: "invalid_budget", Field: "/media_buy/packages/0/budget", Exact: true},
	{Name: "JPY proposal total with decimals", Edit: func(m map[string]any) { m["currency"] = "JPY"; Proposal(m, Raw("1000.5"), "JPY") },
		Status: 422, Code: "invalid_budget", Field: "/media_buy/total_budget/amount", Exact: true},
	{Name: "KWD budget with four decimals", Edit: func(m map[string]any) {
		m["currency"] = "KWD"
		Pkg(m, 1)["budget"] = Raw("1.2345")
	}, Status: 422, Code: "invalid_budget", Field: "/media_buy/packages/1/budget", Exact: true},
	{Name: "bid price with more decimals than the currency", Edit: func(m map[string]any) { Pkg(m, 1)["bid_price"] = Raw("12.505") },
		Status: 422, Code: "invalid_price", Field: "/media_buy/packages/1/bid_price", Exact: true},
	{Name: "JPY bid price with decimals", Edit: func(m map[string]any) {
		m["currency"] = "JPY"
		Pkg(m, 1)["budget"] = 5000
		Pkg(m, 0)["bid_price"] = Raw("2.5")
	}, Status: 422, Code: "invalid_price", Field: "/media_buy/packages/0/bid_price", Exact: true},
	{Name: "package budgets over the bound", Edit: func(m map[string]any) {
		Pkg(m, 0)["budget"], Pkg(m, 1)["budget"] = Raw("9000000000000"), Raw("9000000000000")
	}, Status: 422, Code: "invalid_budget", Field: "/media_buy/packages/1/budget", Exact: true},
	{Name: "one package over the bound", Edit: func(m map[string]any) { Pkg(m, 0)["budget"] = Raw("1e20") },
		Status: 422, Code: "invalid_budget", Field: "/media_buy/packages/0/budget", Exact: true},
	{Name: "total_budget alone, no proposal", Edit: func(m map[string]any) {
		Proposal(m, 100, "USD")
		delete(MB(m), "proposal_id")
	}, Status: 422, Code: "invalid_budget", Field: "/media_buy/packages", Exact: true},
	{Name: "zero proposal total", Edit: func(m map[string]any) { Proposal(m, 0, "USD") },
		Status: 422, Code: "invalid_budget", Field: "/media_buy", Exact: true},
	{Name: "budget 1e10000000", Edit: func(m map[string]any) { Pkg(m, 0)["budget"] = Raw("1e10000000") },
		Status: 422, Code: "number_out_of_range", Field: "/media_buy/packages/0/budget", Exact: true},
	{Name: "budget -1e-10000000", Edit: func(m map[string]any) { Pkg(m, 1)["budget"] = Raw("-1e-10000000") },
		Status: 422, Code: "number_out_of_range", Field: "/media_buy/packages/1/budget", Exact: true},
	{Name: "budget 2E9999999", Edit: func(m map[string]any) { Pkg(m, 0)["budget"] = Raw("2E9999999") },
		Status: 422, Code: "number_out_of_range", Field: "/media_buy/packages/0/budget", Exact: true},
	{Name: "a huge number anywhere", Edit: func(m map[string]any) { MB(m)["ext"] = map[string]any{"x": []any{Raw("1e10000000")}} },
		Status: 422, Code: "number_out_of_range", Field: "/media_buy/ext/x/0", Exact: true},
	{Name: "a huge total_budget", Edit: func(m map[string]any) { Proposal(m, Raw("2E9999999"), "USD") },
		Status: 422, Code: "number_out_of_range", Field: "/media_buy/total_budget/amount", Exact: true},
	{Name: "a budget written twice", Raw: `{"seller_id":"sim-seller","currency":"USD","media_buy":{"packages":[{"budget":1,"product_id":"p","budget":30000}]}}`,
		Status: 422, Code: "duplicate_key", Field: "/media_buy/packages/0/budget", Exact: true},
	{Name: "forty-one digits", Raw: `{"seller_id":"sim-seller","currency":"USD","media_buy":{"packages":[{"budget":` + strings.Repeat("9", 41) + `}]}}`,
		Status: 422, Code: "number_out_of_range", Field: "/media_buy/packages/0/budget", Exact: true},
}
