package buy_test

import (
	"context"
	"errors"
	"testing"

	"github.com/buyflow/buyflow/internal/buy"
	"github.com/buyflow/buyflow/internal/buytest"

	"github.com/buyflow/buyflow/internal/money"
)

func TestParseSubmitAmount(t *testing.T) {
	tests := []struct {
		Name string
		Edit func(m map[string]any)
		want money.Amount
	}{
		{Name: "packages", want: money.Amount{Minor: 2000050, Currency: "USD"}},
		{Name: "total_budget equal to the packages", Edit: func(m map[string]any) {
			buytest.MB(m)["total_budget"] = map[string]any{"amount": buytest.Raw("20000.50"), "currency": "USD"}
		}, want: money.Amount{Minor: 2000050, Currency: "USD"}},
		{Name: "proposal", Edit: func(m map[string]any) { buytest.Proposal(m, 30000, "USD") }, want: money.Amount{Minor: 3000000, Currency: "USD"}},
		{Name: "KWD proposal", Edit: func(m map[string]any) { m["currency"] = "KWD"; buytest.Proposal(m, buytest.Raw("9999.125"), "KWD") },
			want: money.Amount{Minor: 9999125, Currency: "KWD"}},
		{Name: "JPY with a zero fraction", Edit: func(m map[string]any) {
			m["currency"] = "JPY"
			buytest.Pkg(m, 0)["budget"], buytest.Pkg(m, 1)["budget"] = buytest.Raw("1000.00"), buytest.Raw("1e3")
		}, want: money.Amount{Minor: 2000, Currency: "JPY"}},
		{Name: "bid price in cents", Edit: func(m map[string]any) { buytest.Pkg(m, 0)["bid_price"] = buytest.Raw("12.50") }, want: money.Amount{Minor: 2000050, Currency: "USD"}},
	}
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			m := buytest.Example(t, "media-buy.json")
			if tt.Edit != nil {
				tt.Edit(m)
			}
			got, err := buy.ParseSubmit(context.Background(), buytest.Marshal(t, m), buytest.Agents, buytest.Schemas(t))
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
		m := buytest.Example(t, "media-buy.json")
		buytest.Pkg(m, 0)["budget"] = buytest.Raw(lit)
		body := buytest.Marshal(t, buytest.MB(m))
		err := buytest.Schemas(t).ValidateRequest("create_media_buy", body)
		if err == nil {
			t.Fatalf("%s: validated", lit)
		}
		var fe buy.FieldError
		if !errors.As(err, &fe) || fe.FieldPointer() != "/packages/0/budget" {
			t.Fatalf("%s: err = %v, want a field error at /packages/0/budget", lit, err)
		}
	}
}
