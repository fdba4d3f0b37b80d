package buy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/big"
	"testing"

	"github.com/buyflow/buyflow/internal/buy"
	"github.com/buyflow/buyflow/internal/buytest"

	"github.com/buyflow/buyflow/internal/jsonnum"
	"github.com/buyflow/buyflow/internal/money"
)

// FuzzParseSubmit feeds submit bodies to the parser. It must never panic; a refusal is a
// *buy.RequestError with a 4xx status, a code and a message; an accepted buy's amount is what the
// seller is asked to commit, recomputed here with exact rationals from the body: the sum of
// the package budgets, or total_budget for a proposal buy, and total_budget agrees.
func FuzzParseSubmit(f *testing.F) {
	base := buytest.Example(f, "media-buy.json")
	f.Add(buytest.Marshal(f, base))
	for _, lit := range []string{"1e10000000", "-1e-10000000", "2E9999999", "1000.50", "15000", "0.001", "1e29"} {
		f.Add(bytes.Replace(buytest.Marshal(f, base), []byte(`15000`), []byte(lit), 1))
	}
	bypass := buytest.Example(f, "media-buy.json")
	buytest.MB(bypass)["total_budget"] = map[string]any{"amount": 100, "currency": "USD"}
	f.Add(buytest.Marshal(f, bypass))
	kwd := buytest.Example(f, "media-buy.json")
	buytest.Proposal(kwd, 9999, "KWD")
	f.Add(buytest.Marshal(f, kwd))
	prop := buytest.Example(f, "media-buy.json")
	buytest.Proposal(prop, 30000, "USD")
	f.Add(buytest.Marshal(f, prop))
	v := buytest.Schemas(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := buy.ParseSubmit(context.Background(), body, buytest.Agents, v)
		if err != nil {
			var re *buy.RequestError
			if !errors.As(err, &re) || re.Status < 400 || re.Status > 499 || re.Code == "" || re.Message == "" {
				t.Fatalf("refusal %v is not a 4xx buy.RequestError", err)
			}
			return
		}
		if err := jsonnum.CheckUnique(body); err != nil {
			t.Fatalf("accepted a body with %v", err)
		}
		if got.Amount.Currency != got.Currency || got.Amount.Minor <= 0 || got.Amount.Minor > money.MaxMinor {
			t.Fatalf("amount %+v for currency %s", got.Amount, got.Currency)
		}
		var m struct {
			Packages []struct {
				Budget json.Number `json:"budget"`
			} `json:"packages"`
			TotalBudget *struct {
				Amount json.Number `json:"amount"`
			} `json:"total_budget"`
		}
		dec := json.NewDecoder(bytes.NewReader(got.MediaBuy))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("accepted media_buy does not decode: %v", err)
		}
		want := new(big.Rat)
		for _, p := range m.Packages {
			r, ok := new(big.Rat).SetString(p.Budget.String())
			if !ok {
				t.Fatalf("accepted budget %q", p.Budget)
			}
			want.Add(want, r)
		}
		if m.TotalBudget != nil {
			total, ok := new(big.Rat).SetString(m.TotalBudget.Amount.String())
			if !ok || (len(m.Packages) > 0 && total.Cmp(want) != 0) {
				t.Fatalf("total_budget %q accepted beside packages adding up to %s", m.TotalBudget.Amount, want.RatString())
			}
			want = total
		}
		digits, _ := money.MinorUnits(got.Currency)
		want.Mul(want, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(digits)), nil)))
		if !want.IsInt() || want.Num().Int64() != got.Amount.Minor {
			t.Fatalf("amount %d minor units, the body says %s", got.Amount.Minor, want.RatString())
		}
	})
}

// BenchmarkParseSubmit measures the whole submit parse of the example buy (bounds, decode,
// schema validation, amount, hash), for comparison with jsonnum's BenchmarkCheckUnique.
func BenchmarkParseSubmit(b *testing.B) {
	body := buytest.Marshal(b, buytest.Example(b, "media-buy.json"))
	v := buytest.Schemas(b)
	for b.Loop() {
		if _, err := buy.ParseSubmit(context.Background(), body, buytest.Agents, v); err != nil {
			b.Fatal(err)
		}
	}
}
