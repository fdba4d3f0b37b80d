package buy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/buyflow/buyflow/internal/buy"
	"github.com/buyflow/buyflow/internal/buytest"
	"github.com/buyflow/buyflow/internal/money"
	"github.com/buyflow/buyflow/internal/registry"
)

func TestParseSubmitAcceptsTheExample(t *testing.T) {
	got, err := buy.ParseSubmit(context.Background(), buytest.Marshal(t, buytest.Example(t, "media-buy.json")), buytest.Agents, buytest.Schemas(t))
	if err != nil {
		t.Fatalf("ParseSubmit: %v", err)
	}
	if got.Amount != (money.Amount{Minor: 2000050, Currency: "USD"}) || got.Amount.Decimal() != "20000.50" || got.PONumber != "PO-2027-0042" {
		t.Fatalf("derived = %+v", got)
	}
	if len(got.PayloadHash) != 64 {
		t.Fatalf("hash %q", got.PayloadHash)
	}
}

func TestParseSubmitHashIgnoresLayout(t *testing.T) {
	a := buytest.Marshal(t, buytest.Example(t, "media-buy.json"))
	var pretty strings.Builder
	enc := json.NewEncoder(&pretty)
	enc.SetIndent("", "    ")
	if err := enc.Encode(buytest.Example(t, "media-buy.json")); err != nil {
		t.Fatal(err)
	}
	ra, err := buy.ParseSubmit(context.Background(), a, buytest.Agents, buytest.Schemas(t))
	if err != nil {
		t.Fatal(err)
	}
	rb, err := buy.ParseSubmit(context.Background(), []byte(pretty.String()), buytest.Agents, buytest.Schemas(t))
	if err != nil {
		t.Fatal(err)
	}
	if ra.PayloadHash != rb.PayloadHash {
		t.Fatal("layout changed the payload hash")
	}
	other := buytest.Example(t, "media-buy.json")
	other["currency"] = "EUR"
	rc, err := buy.ParseSubmit(context.Background(), buytest.Marshal(t, other), buytest.Agents, buytest.Schemas(t))
	if err != nil {
		t.Fatal(err)
	}
	if rc.PayloadHash == ra.PayloadHash {
		t.Fatal("another body has the same hash")
	}
}

func TestParseSubmitRefusals(t *testing.T) {
	tests := []buytest.Refusal{
		{Name: "not json", Raw: `{"seller_id":`, Status: 400, Code: "malformed_json"},
		{Name: "two objects", Raw: `{} {}`, Status: 400, Code: "malformed_json"},
		{Name: "unknown top-level field", Edit: func(m map[string]any) { m["tenant"] = "other" }, Status: 422, Code: "unknown_field", Field: "/tenant"},
		{Name: "wrong type", Edit: func(m map[string]any) { m["seller_id"] = 7 }, Status: 422, Code: "wrong_type", Field: "/seller_id"},
		{Name: "missing seller", Edit: func(m map[string]any) { delete(m, "seller_id") }, Status: 422, Code: "missing_field", Field: "/seller_id"},
		{Name: "unknown seller", Edit: func(m map[string]any) { m["seller_id"] = "evil" }, Status: 422, Code: "unknown_seller", Field: "/seller_id"},
		{Name: "governance agent used as seller", Edit: func(m map[string]any) { m["seller_id"] = "sim-governance" }, Status: 422, Code: "unknown_seller", Field: "/seller_id"},
		{Name: "no governance", Edit: func(m map[string]any) { delete(m, "governance") }, Status: 422, Code: "missing_field", Field: "/governance/agent_id"},
		{Name: "no plan", Edit: func(m map[string]any) { m["governance"] = map[string]any{"agent_id": "sim-governance"} }, Status: 422, Code: "missing_field", Field: "/governance/plan_id"},
		{Name: "bad currency", Edit: func(m map[string]any) { m["currency"] = "usd" }, Status: 422, Code: "invalid_currency", Field: "/currency"},
		{Name: "no media buy", Edit: func(m map[string]any) { delete(m, "media_buy") }, Status: 422, Code: "missing_field", Field: "/media_buy"},
		{Name: "reserved idempotency key", Edit: func(m map[string]any) { buytest.MB(m)["idempotency_key"] = "0123456789abcdef0" }, Status: 422, Code: "reserved_field", Field: "/media_buy/idempotency_key"},
		{Name: "reserved push config", Edit: func(m map[string]any) { buytest.MB(m)["push_notification_config"] = map[string]any{} }, Status: 422, Code: "reserved_field", Field: "/media_buy/push_notification_config"},
		{Name: "plan mismatch", Edit: func(m map[string]any) { buytest.MB(m)["plan_id"] = "other-plan" }, Status: 422, Code: "plan_mismatch", Field: "/media_buy/plan_id"},
		{Name: "notify: not a slack id", Edit: func(m map[string]any) { m["notify"] = map[string]any{"slack": "<!channel>"} }, Status: 422, Code: "invalid_notify", Field: "/notify/slack", Exact: true},
		{Name: "notify: empty", Edit: func(m map[string]any) { m["notify"] = map[string]any{} }, Status: 422, Code: "invalid_notify", Field: "/notify/slack", Exact: true},
		{Name: "notify: unknown channel kind", Edit: func(m map[string]any) { m["notify"] = map[string]any{"email": "a@example.com"} }, Status: 422, Code: "unknown_field"},
		{Name: "no po number", Edit: func(m map[string]any) { delete(buytest.MB(m), "po_number") }, Status: 422, Code: "missing_field", Field: "/media_buy/po_number"},
		{Name: "schema: missing brand", Edit: func(m map[string]any) { delete(buytest.MB(m), "brand") }, Status: 422, Code: "schema_violation", Field: "/media_buy"},
		{Name: "schema: bad end time", Edit: func(m map[string]any) { buytest.MB(m)["end_time"] = "next tuesday" }, Status: 422, Code: "schema_violation", Field: "/media_buy/end_time"},
		{Name: "schema: package without product", Edit: func(m map[string]any) {
			delete(buytest.MB(m)["packages"].([]any)[0].(map[string]any), "product_id")
		}, Status: 422, Code: "schema_violation", Field: "/media_buy/packages/0"},
		{Name: "zero budget", Edit: func(m map[string]any) {
			for _, p := range buytest.MB(m)["packages"].([]any) {
				p.(map[string]any)["budget"] = 0
			}
		}, Status: 422, Code: "invalid_budget", Field: "/media_buy"},
		{Name: "sub-cent budget", Edit: func(m map[string]any) { buytest.Pkg(m, 0)["budget"] = 1.001 }, Status: 422, Code: "invalid_budget", Field: "/media_buy/packages/0/budget"},
	}
	tests = append(tests, buytest.AmountRefusals...)
	for _, tt := range tests {
		t.Run(tt.Name, func(t *testing.T) {
			body := []byte(tt.Raw)
			if tt.Edit != nil {
				m := buytest.Example(t, "media-buy.json")
				tt.Edit(m)
				body = buytest.Marshal(t, m)
			}
			_, err := buy.ParseSubmit(context.Background(), body, buytest.Agents, buytest.Schemas(t))
			var re *buy.RequestError
			if !errors.As(err, &re) {
				t.Fatalf("err = %v, want *buy.RequestError", err)
			}
			if re.Status != tt.Status || re.Code != tt.Code {
				t.Fatalf("got %d %s (%s), want %d %s", re.Status, re.Code, re.Message, tt.Status, tt.Code)
			}
			if re.Field != tt.Field && (tt.Exact || !strings.HasPrefix(re.Field, tt.Field)) {
				t.Fatalf("field = %q, want prefix %q", re.Field, tt.Field)
			}
			if re.Message == "" {
				t.Fatal("no message for a person")
			}
		})
	}
}

func TestParseSubmitRefusesHugeBodies(t *testing.T) {
	_, err := buy.ParseSubmit(context.Background(), make([]byte, buy.MaxBodyBytes+1), buytest.Agents, buytest.Schemas(t))
	var re *buy.RequestError
	if !errors.As(err, &re) || re.Status != 413 {
		t.Fatalf("err = %v", err)
	}
}

// currentFunc is a function-typed fake of CurrentAgents.
type currentFunc func(ctx context.Context, id string) (registry.Record, error)

func (f currentFunc) Current(ctx context.Context, id string) (registry.Record, error) {
	return f(ctx, id)
}

// TestRegistryLookup: a registry record becomes what submit needs; an unknown agent is not
// ok (a 422 follows), and an unreadable registry is an error (never an unknown agent).
func TestRegistryLookup(t *testing.T) {
	outage := errors.New("table unavailable")
	records := currentFunc(func(_ context.Context, id string) (registry.Record, error) {
		switch id {
		case "paused":
			r := registry.Record{Disabled: true}
			r.ID, r.Role = id, "seller"
			return r, nil
		case "signing":
			r := registry.Record{Capabilities: &registry.Capabilities{
				RequestSigning: json.RawMessage(`{"supported":true,"required_for":["create_media_buy"]}`)}}
			r.ID, r.Role = id, "seller"
			return r, nil
		case "down":
			return registry.Record{}, outage
		}
		return registry.Record{}, fmt.Errorf("%w %q", registry.ErrUnknown, id)
	})
	lookup := buy.RegistryLookup(records, false)
	ctx := context.Background()
	if a, ok, err := lookup(ctx, "signing"); !ok || err != nil || !a.Unsignable {
		t.Errorf("a seller requiring signed creates, no key = %+v, %v, %v", a, ok, err)
	}
	if a, _, _ := buy.RegistryLookup(records, true)(ctx, "signing"); a.Unsignable {
		t.Errorf("a seller requiring signed creates, with a key = %+v", a)
	}
	if a, _, _ := lookup(ctx, "paused"); a.Unsignable {
		t.Errorf("a seller requiring nothing = %+v", a)
	}
	if a, ok, err := lookup(ctx, "paused"); !ok || err != nil || a.Role != "seller" || !a.Disabled {
		t.Errorf("paused = %+v, %v, %v", a, ok, err)
	}
	if _, ok, err := lookup(ctx, "nobody"); ok || err != nil {
		t.Errorf("unknown = %v, %v", ok, err)
	}
	if _, _, err := lookup(ctx, "down"); !errors.Is(err, outage) {
		t.Errorf("outage = %v", err)
	}
}
