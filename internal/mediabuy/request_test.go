package mediabuy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/adcpschemas"
	registry "github.com/buyflow/buyflow/internal/agents"
	"github.com/buyflow/buyflow/internal/money"
)

var (
	validatorOnce sync.Once
	validator     *adcp.Validator
	validatorErr  error
)

// schemas returns the real AdCP 3.1.19 schema validator, compiled once for the package.
func schemas(t testing.TB) SchemaValidator {
	t.Helper()
	validatorOnce.Do(func() {
		schemas, err := adcpschemas.FS()
		if err != nil {
			validatorErr = err
			return
		}
		validator, validatorErr = adcp.NewValidator(schemas)
	})
	if validatorErr != nil {
		t.Fatalf("load AdCP schemas: %v", validatorErr)
	}
	return validator
}

func agents(_ context.Context, id string) (Agent, bool, error) {
	switch id {
	case "sim-seller":
		return Agent{Role: "seller"}, true, nil
	case "paused-seller":
		return Agent{Role: "seller", Disabled: true}, true, nil
	case "sim-governance":
		return Agent{Role: "governance"}, true, nil
	}
	return Agent{}, false, nil
}

func example(t testing.TB) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "examples", "media-buy.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func marshal(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseSubmitAcceptsTheExample(t *testing.T) {
	got, err := ParseSubmit(context.Background(), marshal(t, example(t)), agents, schemas(t))
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
	a := marshal(t, example(t))
	var pretty strings.Builder
	enc := json.NewEncoder(&pretty)
	enc.SetIndent("", "    ")
	if err := enc.Encode(example(t)); err != nil {
		t.Fatal(err)
	}
	ra, err := ParseSubmit(context.Background(), a, agents, schemas(t))
	if err != nil {
		t.Fatal(err)
	}
	rb, err := ParseSubmit(context.Background(), []byte(pretty.String()), agents, schemas(t))
	if err != nil {
		t.Fatal(err)
	}
	if ra.PayloadHash != rb.PayloadHash {
		t.Fatal("layout changed the payload hash")
	}
	other := example(t)
	other["currency"] = "EUR"
	rc, err := ParseSubmit(context.Background(), marshal(t, other), agents, schemas(t))
	if err != nil {
		t.Fatal(err)
	}
	if rc.PayloadHash == ra.PayloadHash {
		t.Fatal("another body has the same hash")
	}
}

// refusal is a submit body (the example with edit applied, or raw) and the refusal it gets:
// field is the JSON pointer, a prefix of the answer's unless exact.
type refusal struct {
	name   string
	edit   func(m map[string]any)
	raw    string
	status int
	code   string
	field  string
	exact  bool
}

func TestParseSubmitRefusals(t *testing.T) {
	tests := []refusal{
		{name: "not json", raw: `{"seller_id":`, status: 400, code: "malformed_json"},
		{name: "two objects", raw: `{} {}`, status: 400, code: "malformed_json"},
		{name: "unknown top-level field", edit: func(m map[string]any) { m["tenant"] = "other" }, status: 422, code: "unknown_field", field: "/tenant"},
		{name: "wrong type", edit: func(m map[string]any) { m["seller_id"] = 7 }, status: 422, code: "wrong_type", field: "/seller_id"},
		{name: "missing seller", edit: func(m map[string]any) { delete(m, "seller_id") }, status: 422, code: "missing_field", field: "/seller_id"},
		{name: "unknown seller", edit: func(m map[string]any) { m["seller_id"] = "evil" }, status: 422, code: "unknown_seller", field: "/seller_id"},
		{name: "governance agent used as seller", edit: func(m map[string]any) { m["seller_id"] = "sim-governance" }, status: 422, code: "unknown_seller", field: "/seller_id"},
		{name: "no governance", edit: func(m map[string]any) { delete(m, "governance") }, status: 422, code: "missing_field", field: "/governance/agent_id"},
		{name: "no plan", edit: func(m map[string]any) { m["governance"] = map[string]any{"agent_id": "sim-governance"} }, status: 422, code: "missing_field", field: "/governance/plan_id"},
		{name: "bad currency", edit: func(m map[string]any) { m["currency"] = "usd" }, status: 422, code: "invalid_currency", field: "/currency"},
		{name: "no media buy", edit: func(m map[string]any) { delete(m, "media_buy") }, status: 422, code: "missing_field", field: "/media_buy"},
		{name: "reserved idempotency key", edit: func(m map[string]any) { mb(m)["idempotency_key"] = "0123456789abcdef0" }, status: 422, code: "reserved_field", field: "/media_buy/idempotency_key"},
		{name: "reserved push config", edit: func(m map[string]any) { mb(m)["push_notification_config"] = map[string]any{} }, status: 422, code: "reserved_field", field: "/media_buy/push_notification_config"},
		{name: "plan mismatch", edit: func(m map[string]any) { mb(m)["plan_id"] = "other-plan" }, status: 422, code: "plan_mismatch", field: "/media_buy/plan_id"},
		{name: "notify: not a slack id", edit: func(m map[string]any) { m["notify"] = map[string]any{"slack": "<!channel>"} }, status: 422, code: "invalid_notify", field: "/notify/slack", exact: true},
		{name: "notify: empty", edit: func(m map[string]any) { m["notify"] = map[string]any{} }, status: 422, code: "invalid_notify", field: "/notify/slack", exact: true},
		{name: "notify: unknown channel kind", edit: func(m map[string]any) { m["notify"] = map[string]any{"email": "a@example.com"} }, status: 422, code: "unknown_field"},
		{name: "no po number", edit: func(m map[string]any) { delete(mb(m), "po_number") }, status: 422, code: "missing_field", field: "/media_buy/po_number"},
		{name: "schema: missing brand", edit: func(m map[string]any) { delete(mb(m), "brand") }, status: 422, code: "schema_violation", field: "/media_buy"},
		{name: "schema: bad end time", edit: func(m map[string]any) { mb(m)["end_time"] = "next tuesday" }, status: 422, code: "schema_violation", field: "/media_buy/end_time"},
		{name: "schema: package without product", edit: func(m map[string]any) {
			delete(mb(m)["packages"].([]any)[0].(map[string]any), "product_id")
		}, status: 422, code: "schema_violation", field: "/media_buy/packages/0"},
		{name: "zero budget", edit: func(m map[string]any) {
			for _, p := range mb(m)["packages"].([]any) {
				p.(map[string]any)["budget"] = 0
			}
		}, status: 422, code: "invalid_budget", field: "/media_buy"},
		{name: "sub-cent budget", edit: func(m map[string]any) { pkg(m, 0)["budget"] = 1.001 }, status: 422, code: "invalid_budget", field: "/media_buy/packages/0/budget"},
	}
	tests = append(tests, amountRefusals...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := []byte(tt.raw)
			if tt.edit != nil {
				m := example(t)
				tt.edit(m)
				body = marshal(t, m)
			}
			_, err := ParseSubmit(context.Background(), body, agents, schemas(t))
			var re *RequestError
			if !errors.As(err, &re) {
				t.Fatalf("err = %v, want *RequestError", err)
			}
			if re.Status != tt.status || re.Code != tt.code {
				t.Fatalf("got %d %s (%s), want %d %s", re.Status, re.Code, re.Message, tt.status, tt.code)
			}
			if re.Field != tt.field && (tt.exact || !strings.HasPrefix(re.Field, tt.field)) {
				t.Fatalf("field = %q, want prefix %q", re.Field, tt.field)
			}
			if re.Message == "" {
				t.Fatal("no message for a person")
			}
		})
	}
}

func TestParseSubmitRefusesHugeBodies(t *testing.T) {
	_, err := ParseSubmit(context.Background(), make([]byte, MaxBodyBytes+1), agents, schemas(t))
	var re *RequestError
	if !errors.As(err, &re) || re.Status != 413 {
		t.Fatalf("err = %v", err)
	}
}

func mb(m map[string]any) map[string]any { return m["media_buy"].(map[string]any) }

func pkg(m map[string]any, i int) map[string]any {
	return mb(m)["packages"].([]any)[i].(map[string]any)
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
	lookup := RegistryLookup(currentFunc(func(_ context.Context, id string) (registry.Record, error) {
		switch id {
		case "paused":
			r := registry.Record{Disabled: true}
			r.ID, r.Role = id, "seller"
			return r, nil
		case "down":
			return registry.Record{}, outage
		}
		return registry.Record{}, fmt.Errorf("%w %q", registry.ErrUnknown, id)
	}))
	ctx := context.Background()
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
