package campaign

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/buyflow/buyflow/internal/buytest"

	"github.com/buyflow/buyflow/internal/buy"
)

var campaignIDShape = regexp.MustCompile(`^cp-[a-z2-7]{26}$`)

func plan(m map[string]any) map[string]any { return m["plan"].(map[string]any) }

func leg(m map[string]any, i int) map[string]any { return m["legs"].([]any)[i].(map[string]any) }

func legBuy(m map[string]any, i int) map[string]any { return leg(m, i)["media_buy"].(map[string]any) }

func TestParseAcceptsTheExample(t *testing.T) {
	v, err := Parse(context.Background(), buytest.Marshal(t, buytest.Example(t, "campaign.json")), buytest.Agents, buytest.Schemas(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(v.Buys) != 3 || v.Total.Decimal() != "30000.00" || v.Planned.Decimal() != "22500.00" || v.Policy != AllOrNothing {
		t.Fatalf("validated = %+v (planned %s)", v, v.Planned.Decimal())
	}
	if v.Notify != nil {
		t.Errorf("the example asks to notify %+v", v.Notify)
	}
	m := buytest.Example(t, "campaign.json")
	m["notify"] = map[string]any{"slack": "U024BE7LH"}
	if n, err := Parse(context.Background(), buytest.Marshal(t, m), buytest.Agents, buytest.Schemas(t)); err != nil || n.Notify == nil || n.Notify.Slack != "U024BE7LH" {
		t.Fatalf("a campaign that asks to notify U024BE7LH: %+v, %v", n, err)
	}
	// The plan is pushed under the campaign's plan id, and is what the schema accepts.
	var plans []map[string]any
	if err := json.Unmarshal(v.SyncPlans["plans"], &plans); err != nil || len(plans) != 1 || plans[0]["plan_id"] != "plan-spring-2027" {
		t.Fatalf("sync_plans plans = %s (%v)", v.SyncPlans["plans"], err)
	}
	// Each leg carries the buy's own amount (mediabuy's one definition) and the plan.
	if v.Buys[0].Amount.Decimal() != "8500.25" || v.Buys[1].SellerID != "sim-seller-2" || v.Buys[2].Governance.PlanID != "plan-spring-2027" {
		t.Fatalf("legs = %+v %+v %+v", v.Buys[0], v.Buys[1], v.Buys[2])
	}
}

func TestParseRefusals(t *testing.T) {
	cases := []struct {
		name   string
		edit   func(m map[string]any)
		status int
		code   string
		field  string
	}{
		{"legs over the total", func(m map[string]any) { m["total_budget"].(map[string]any)["amount"] = 22499.99 },
			422, "budget_over_total", "/total_budget/amount"},
		{"unknown seller", func(m map[string]any) { leg(m, 1)["seller_id"] = "nobody" }, 422, "", "/legs/1/seller_id"},
		{"a governance agent as seller", func(m map[string]any) { leg(m, 2)["seller_id"] = "sim-governance" }, 422, "", "/legs/2/seller_id"},
		{"mixed currencies", func(m map[string]any) { leg(m, 2)["currency"] = "EUR" }, 422, "currency_mismatch", "/legs/2/currency"},
		{"leg total_budget in another currency", func(m map[string]any) {
			legBuy(m, 1)["total_budget"] = map[string]any{"amount": 9000, "currency": "EUR"}
		}, 422, "currency_mismatch", "/legs/1/media_buy/total_budget/currency"},
		{"duplicate PO numbers", func(m map[string]any) { legBuy(m, 2)["po_number"] = "PO-2027-0101" },
			422, "duplicate_po_number", "/legs/2/media_buy/po_number"},
		{"no legs", func(m map[string]any) { m["legs"] = []any{} }, 422, "invalid_legs", "/legs"},
		{"51 legs", func(m map[string]any) {
			var legs []any
			for range 51 {
				legs = append(legs, leg(m, 0))
			}
			m["legs"] = legs
		}, 422, "invalid_legs", "/legs"},
		{"no policy", func(m map[string]any) { delete(m, "policy") }, 422, "missing_field", "/policy"},
		{"unknown policy", func(m map[string]any) { m["policy"] = "most" }, 422, "invalid_policy", "/policy"},
		{"notify a mention", func(m map[string]any) { m["notify"] = map[string]any{"slack": "<!here>"} }, 422, "invalid_notify", "/notify/slack"},
		{"zero total", func(m map[string]any) { m["total_budget"].(map[string]any)["amount"] = 0 }, 422, "invalid_budget", "/total_budget/amount"},
		{"total as a string", func(m map[string]any) { m["total_budget"].(map[string]any)["amount"] = "30000" }, 422, "invalid_budget", "/total_budget/amount"},
		{"not a currency", func(m map[string]any) { m["total_budget"].(map[string]any)["currency"] = "usd" }, 422, "invalid_currency", "/total_budget/currency"},
		{"more decimals than the currency", func(m map[string]any) { m["total_budget"].(map[string]any)["amount"] = 30000.001 }, 422, "invalid_budget", "/total_budget/amount"},
		{"unknown field", func(m map[string]any) { m["budget"] = 1 }, 422, "unknown_field", "/budget"},
		{"leg reserved field", func(m map[string]any) { legBuy(m, 0)["idempotency_key"] = "x" }, 422, "reserved_field", "/legs/0/media_buy/idempotency_key"},
		{"leg without PO", func(m map[string]any) { delete(legBuy(m, 1), "po_number") }, 422, "missing_field", "/legs/1/media_buy/po_number"},
		{"leg schema violation", func(m map[string]any) { legBuy(m, 0)["start_time"] = "soon" }, 422, "schema_violation", "/legs/0/media_buy"},
		{"leg plan differs", func(m map[string]any) { legBuy(m, 2)["plan_id"] = "other" }, 422, "plan_mismatch", "/legs/2/media_buy/plan_id"},
		{"plan of another id", func(m map[string]any) { plan(m)["plan_id"] = "other" }, 422, "plan_mismatch", "/plan/plan_id"},
		{"plan budget differs from the total", func(m map[string]any) { plan(m)["budget"].(map[string]any)["total"] = 29999 },
			422, "budget_mismatch", "/plan/budget/total"},
		{"plan budget in another currency", func(m map[string]any) { plan(m)["budget"].(map[string]any)["currency"] = "EUR" },
			422, "currency_mismatch", "/plan/budget/currency"},
		{"plan without objectives", func(m map[string]any) { delete(plan(m), "objectives") }, 422, "schema_violation", "/plan"},
		{"plan not an object", func(m map[string]any) { m["plan"] = []any{1} }, 422, "wrong_type", "/plan"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := buytest.Example(t, "campaign.json")
			c.edit(m)
			_, err := Parse(context.Background(), buytest.Marshal(t, m), buytest.Agents, buytest.Schemas(t))
			var re *buy.RequestError
			if !errors.As(err, &re) {
				t.Fatalf("err = %v, want a RequestError", err)
			}
			if re.Status != c.status || (c.code != "" && re.Code != c.code) || !strings.HasPrefix(re.Field, c.field) || re.Message == "" {
				t.Fatalf("refusal = %+v, want %d %s at %s", re, c.status, c.code, c.field)
			}
		})
	}
}

func TestParseRefusesBadJSON(t *testing.T) {
	for _, body := range []string{``, `{`, `[]`, `{"legs": 1}`, `{} {}`, `{"policy":"best_effort","policy":"all_or_nothing"}`} {
		_, err := Parse(context.Background(), []byte(body), buytest.Agents, buytest.Schemas(t))
		var re *buy.RequestError
		if !errors.As(err, &re) || re.Status < 400 || re.Status > 499 {
			t.Errorf("%q: err = %v, want a 4xx", body, err)
		}
	}
	if _, err := Parse(context.Background(), make([]byte, MaxBodyBytes+1), buytest.Agents, buytest.Schemas(t)); err == nil {
		t.Error("an oversized body was accepted")
	}
}

// The ids derive from the tenant and key; no Idempotency-Key a header can carry names a leg.
func TestIDsDeriveFromTenantAndKey(t *testing.T) {
	first, again := ID("acme", "k-00000001"), ID("acme", "k-00000001")
	if first != again || first == ID("other", "k-00000001") || first == ID("acme", "k-00000002") {
		t.Fatal("campaign id does not derive from tenant and key alone")
	}
	if !campaignIDShape.MatchString(first) {
		t.Fatalf("campaign id %q is not cp- and 26 base32 letters", first)
	}
	leg0 := buy.OperationID("acme", legKey("k-00000001", 0))
	if leg0 == buy.OperationID("acme", "k-00000001") || leg0 == buy.OperationID("acme", legKey("k-00000001", 1)) {
		t.Fatal("leg operation ids collide")
	}
}
