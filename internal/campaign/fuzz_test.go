package campaign

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/buyflow/buyflow/internal/buytest"

	"github.com/buyflow/buyflow/internal/buy"
	"github.com/buyflow/buyflow/internal/money"
	"github.com/buyflow/buyflow/internal/statusevent"
)

// FuzzParse feeds campaign bodies to the parser. It must never panic; a refusal is a 4xx
// *buy.RequestError with a code and a message; an accepted campaign has 1 to MaxLegs legs
// in its one currency, distinct PO numbers, and legs whose amounts add up to Planned, at most
// the total; a requester target it accepts is a Slack id (nothing that could mention or link).
func FuzzParse(f *testing.F) {
	base := buytest.Marshal(f, buytest.Example(f, "campaign.json"))
	f.Add(base)
	for _, lit := range []string{"1e10000000", "22499.99", "0.001", "-30000", "1e29"} {
		f.Add(bytes.Replace(base, []byte(`30000`), []byte(lit), 1))
	}
	f.Add(bytes.Replace(base, []byte(`PO-2027-0103`), []byte(`PO-2027-0101`), 1))
	f.Add(bytes.Replace(base, []byte(`"sim-seller-3"`), []byte(`"sim-seller-3","currency":"EUR"`), 1))
	for _, id := range []string{"U024BE7LH", "<!here>", "C0", ""} {
		f.Add(bytes.Replace(base, []byte(`{`), []byte(`{"notify":{"slack":"`+id+`"},`), 1))
	}
	v := buytest.Schemas(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := Parse(context.Background(), body, buytest.Agents, v)
		if err != nil {
			var re *buy.RequestError
			if !errors.As(err, &re) || re.Status < 400 || re.Status > 499 || re.Code == "" || re.Message == "" {
				t.Fatalf("refusal %v is not a 4xx RequestError", err)
			}
			return
		}
		if got.Notify != nil && statusevent.CheckSlackID(got.Notify.Slack) != nil {
			t.Fatalf("accepted notify.slack %q", got.Notify.Slack)
		}
		if len(got.Buys) == 0 || len(got.Buys) > MaxLegs {
			t.Fatalf("accepted %d legs", len(got.Buys))
		}
		sum := money.Amount{Currency: got.Total.Currency}
		seen := map[string]bool{}
		for _, b := range got.Buys {
			if b.Amount.Currency != got.Total.Currency || b.Currency != got.Total.Currency {
				t.Fatalf("leg in %s/%s, campaign in %s", b.Amount.Currency, b.Currency, got.Total.Currency)
			}
			if seen[b.PONumber] {
				t.Fatalf("PO number %q accepted twice", b.PONumber)
			}
			seen[b.PONumber] = true
			sum = sum.Add(b.Amount)
		}
		if sum != got.Planned || sum.Minor > got.Total.Minor || got.Total.Minor <= 0 {
			t.Fatalf("legs add up to %s, planned %s, total %s", sum.Decimal(), got.Planned.Decimal(), got.Total.Decimal())
		}
	})
}
