package adcptest

import (
	"testing"
)

// catalogueBuy is a create of the catalogue's display product; mutate tunes it.
func catalogueBuy(mutate func(pkg, args map[string]any)) map[string]any {
	args := createArgs("")
	pkg := args["packages"].([]any)[0].(map[string]any)
	pkg["product_id"], pkg["pricing_option_id"] = "lifestyle_display_q2", "cpm_standard"
	if mutate != nil {
		mutate(pkg, args)
	}
	return args
}

// A buyer can reach a buy the way the official storyboard does: discover products, set up an
// account, create the buy from a product's pricing option, sync a creative in the product's
// format and assign it, and the buy leaves pending_creatives. Every answer matches its schema.
func TestSellerReachesABuyFromTheCatalogue(t *testing.T) {
	_, cs := startSeller(t, SellerOptions{})
	p := callT(t, cs, "get_products", map[string]any{"buying_mode": "brief", "brief": "display for outdoor lifestyle", "adcp_version": "3.1"})
	mustValidate(t, "media-buy/get-products-response.json", p.Raw)
	prods, _ := p.get("products").([]any)
	if p.IsError || len(prods) != 2 {
		t.Fatalf("get_products: %s", p.Raw)
	}
	if r := callT(t, cs, "get_products", map[string]any{"buying_mode": "wholesale", "brief": "x"}); r.code() != "INVALID_REQUEST" || r.str("adcp_error.field") != "brief" {
		t.Errorf("wholesale with a brief: %s", r.Raw)
	}
	if r := callT(t, cs, "get_products", map[string]any{"brief": "x"}); r.code() != "INVALID_REQUEST" {
		t.Errorf("no buying_mode: %s", r.Raw)
	}

	f := callT(t, cs, "list_creative_formats", map[string]any{"format_ids": []any{map[string]any{"agent_url": formatAgentURL, "id": "display_300x250"}}})
	if fs, _ := f.get("formats").([]any); len(fs) != 1 || fs[0].(map[string]any)["format_id"].(map[string]any)["id"] != "display_300x250" {
		t.Errorf("list_creative_formats filter: %s", f.Raw)
	}
	if r := callT(t, cs, "list_creative_formats", map[string]any{"pagination": map[string]any{"max_results": 1}}); r.get("pagination.has_more") != true || r.str("pagination.cursor") == "" {
		t.Errorf("list_creative_formats page: %s", r.Raw)
	}

	acct := map[string]any{"brand": map[string]any{"domain": "acmeoutdoor.example"}, "operator": "pinnacle-agency.example", "billing": "operator"}
	a := callT(t, cs, "sync_accounts", map[string]any{"idempotency_key": key(), "accounts": []any{acct}})
	first, _ := a.get("accounts").([]any)
	if a.IsError || len(first) != 1 || first[0].(map[string]any)["action"] != "created" || first[0].(map[string]any)["status"] != "active" {
		t.Fatalf("sync_accounts: %s", a.Raw)
	}
	again := callT(t, cs, "sync_accounts", map[string]any{"idempotency_key": key(), "accounts": []any{acct}})
	if again.get("accounts").([]any)[0].(map[string]any)["action"] != "unchanged" {
		t.Errorf("second sync_accounts: %s", again.Raw)
	}
	if l := callT(t, cs, "list_accounts", map[string]any{}); len(l.get("accounts").([]any)) != 1 {
		t.Errorf("list_accounts: %s", l.Raw)
	}
	if r := callT(t, cs, "sync_accounts", map[string]any{"idempotency_key": key(), "accounts": []any{map[string]any{"brand": map[string]any{"domain": "a.example"}, "operator": "b.example"}}}); r.code() != "INVALID_REQUEST" {
		t.Errorf("account without billing: %s", r.Raw)
	}

	list := func(id string) map[string]any {
		return map[string]any{"property_list": map[string]any{"agent_url": "https://lists.example", "list_id": id}}
	}
	c := callT(t, cs, "create_media_buy", catalogueBuy(func(pkg, _ map[string]any) { pkg["targeting_overlay"] = list("allow_v1") }))
	if c.IsError || c.str("media_buy_status") != "pending_creatives" {
		t.Fatalf("create: %s", c.Raw)
	}
	mustValidate(t, "media-buy/create-media-buy-response.json", c.Raw)
	pkgID, _ := c.get("packages").([]any)[0].(map[string]any)["package_id"].(string)

	creative := func(id, format string) map[string]any {
		return map[string]any{"creative_id": id, "name": id, "format_id": map[string]any{"agent_url": formatAgentURL, "id": format},
			"assets": map[string]any{"image": map[string]any{"url": "https://cdn.example/" + id + ".png", "width": 300, "height": 250}}}
	}
	sc := callT(t, cs, "sync_creatives", map[string]any{"idempotency_key": key(), "account": createArgs("")["account"],
		"creatives":   []any{creative("cr-1", "display_300x250"), creative("cr-2", "audio_15s")},
		"assignments": []any{map[string]any{"creative_id": "cr-1", "package_id": pkgID}}})
	mustValidate(t, "creative/sync-creatives-response.json", sc.Raw)
	items, _ := sc.get("creatives").([]any)
	if sc.IsError || len(items) != 2 || items[0].(map[string]any)["action"] != "created" || items[1].(map[string]any)["action"] != "failed" {
		t.Fatalf("sync_creatives: %s", sc.Raw)
	}
	u := callT(t, cs, "update_media_buy", map[string]any{"idempotency_key": key(), "account": createArgs("")["account"],
		"media_buy_id": c.str("media_buy_id"), "packages": []any{map[string]any{"package_id": pkgID, "targeting_overlay": list("allow_v2")}}})
	if u.IsError {
		t.Fatalf("swap the property list: %s", u.Raw)
	}
	g := callT(t, cs, "get_media_buys", map[string]any{"media_buy_ids": []any{c.str("media_buy_id")}})
	mustValidate(t, "media-buy/get-media-buys-response.json", g.Raw)
	mb := g.get("media_buys").([]any)[0].(map[string]any)
	// The flight starts asap, so with its only package assigned the buy is live.
	if mb["status"] != "active" {
		t.Errorf("after assigning the creative, status = %v", mb["status"])
	}
	if id := mb["packages"].([]any)[0].(map[string]any)["targeting_overlay"].(map[string]any)["property_list"].(map[string]any)["list_id"]; id != "allow_v2" {
		t.Errorf("targeting overlay after the swap: %v", id)
	}

	// The creative outlives the buy: canceled, the buy leaves it in the library.
	if r := callT(t, cs, "update_media_buy", map[string]any{"idempotency_key": key(), "account": createArgs("")["account"],
		"media_buy_id": c.str("media_buy_id"), "canceled": true}); r.IsError {
		t.Fatalf("cancel: %s", r.Raw)
	}
	lc := callT(t, cs, "list_creatives", map[string]any{"filters": map[string]any{"creative_ids": []any{"cr-1", "cr-2"}}})
	cl, _ := lc.get("creatives").([]any)
	if lc.IsError || len(cl) != 1 || cl[0].(map[string]any)["creative_id"] != "cr-1" || cl[0].(map[string]any)["status"] != "approved" ||
		lc.get("query_summary.total_matching") != float64(1) {
		t.Errorf("list_creatives after the cancel: %s", lc.Raw)
	}
}

// The seller holds a create to the rules a real one enforces: a listed product's own pricing
// options, a flight that ends after it starts, billing variance it can guarantee; an update
// cannot assign a creative nobody synced.
func TestSellerRefusesWhatARealSellerRefuses(t *testing.T) {
	_, cs := startSeller(t, SellerOptions{})
	cases := []struct {
		name, code, field string
		mutate            func(pkg, args map[string]any)
	}{
		{"pricing option of another product", "INVALID_REQUEST", "packages[0].pricing_option_id",
			func(pkg, _ map[string]any) { pkg["pricing_option_id"] = "cpm_guaranteed" }},
		{"reversed flight", "INVALID_REQUEST", "end_time",
			func(_, args map[string]any) {
				args["start_time"], args["end_time"] = "2099-06-30T00:00:00Z", "2099-04-01T00:00:00Z"
			}},
		{"variance tighter than guaranteed", "TERMS_REJECTED", "packages[0].measurement_terms.billing_measurement.max_variance_percent",
			func(pkg, _ map[string]any) {
				pkg["measurement_terms"] = map[string]any{"billing_measurement": map[string]any{
					"vendor": map[string]any{"domain": "videoamp.example"}, "measurement_window": "c30", "max_variance_percent": 0}}
			}},
	}
	for _, tc := range cases {
		r := callT(t, cs, "create_media_buy", catalogueBuy(tc.mutate))
		if r.code() != tc.code || r.str("adcp_error.field") != tc.field {
			t.Errorf("%s: got %s", tc.name, r.Raw)
		}
	}
	c := callT(t, cs, "create_media_buy", catalogueBuy(nil))
	pkgID, _ := c.get("packages").([]any)[0].(map[string]any)["package_id"].(string)
	u := callT(t, cs, "update_media_buy", map[string]any{"idempotency_key": key(), "account": createArgs("")["account"],
		"media_buy_id": c.str("media_buy_id"),
		"packages":     []any{map[string]any{"package_id": pkgID, "creative_assignments": []any{map[string]any{"creative_id": "never-synced"}}}}})
	if u.code() != "CREATIVE_NOT_FOUND" {
		t.Errorf("assigning an unknown creative: %s", u.Raw)
	}
}

// comply_test_controller forces what storyboards need, for the caller only and along the
// media-buy state machine: the next create's arm (with the task id the storyboard named),
// a status move, delivery that accumulates, seeds that refuse a divergent re-seed.
func TestComplyTestController(t *testing.T) {
	s, cs := startSeller(t, SellerOptions{})
	ctl := func(scenario string, params map[string]any) result {
		a := map[string]any{"scenario": scenario}
		if params != nil {
			a["params"] = params
		}
		return callT(t, cs, "comply_test_controller", a)
	}
	if r := ctl("list_scenarios", nil); r.IsError || len(r.get("scenarios").([]any)) != len(complyScenarios) {
		t.Errorf("list_scenarios: %s", r.Raw)
	}
	if r := ctl("force_media_buy_status", nil); !r.IsError || r.str("error") != "INVALID_PARAMS" {
		t.Errorf("no params: %s", r.Raw)
	}
	if r := ctl("simulate_budget_spend", map[string]any{"media_buy_id": "x", "spend_percentage": 95}); r.str("error") != "UNKNOWN_SCENARIO" {
		t.Errorf("unknown scenario: %s", r.Raw)
	}
	if r := ctl("seed_media_buy", map[string]any{"media_buy_id": "mb_seeded", "fixture": map[string]any{"status": "active", "currency": "EUR", "revision": 3}}); r.IsError {
		t.Fatalf("seed_media_buy: %s", r.Raw)
	}
	g := callT(t, cs, "get_media_buys", map[string]any{"media_buy_ids": []any{"mb_seeded"}})
	mustValidate(t, "media-buy/get-media-buys-response.json", g.Raw)
	if mbs, _ := g.get("media_buys").([]any); len(mbs) != 1 || mbs[0].(map[string]any)["currency"] != "EUR" {
		t.Errorf("seeded buy: %s", g.Raw)
	}
	if r := callT(t, cs, "update_media_buy", map[string]any{"idempotency_key": key(), "account": createArgs("")["account"], "media_buy_id": "mb_seeded", "revision": 3, "paused": true}); r.IsError || r.get("revision") != float64(4) {
		t.Errorf("pausing the seeded buy: %s", r.Raw)
	}

	if r := ctl("force_create_media_buy_arm", map[string]any{"arm": "submitted", "task_id": "task-forced-1"}); r.str("forced.task_id") != "task-forced-1" {
		t.Fatalf("force arm: %s", r.Raw)
	}
	sub := callT(t, cs, "create_media_buy", catalogueBuy(nil))
	if sub.str("status") != "submitted" || sub.str("task_id") != "task-forced-1" || sub.get("media_buy_id") != nil {
		t.Fatalf("forced create: %s", sub.Raw)
	}
	mustValidate(t, "media-buy/create-media-buy-response.json", sub.Raw)
	if tk, ok := s.Task("task-forced-1"); !ok || tk.Status != "submitted" {
		t.Errorf("forced task: %+v %v", tk, ok)
	}
	if r := callT(t, cs, "create_media_buy", catalogueBuy(nil)); r.str("media_buy_status") != "pending_creatives" {
		t.Errorf("the arm applies to one create only: %s", r.Raw)
	}

	c := callT(t, cs, "create_media_buy", catalogueBuy(nil))
	id := c.str("media_buy_id")
	if r := ctl("force_media_buy_status", map[string]any{"media_buy_id": id, "status": "canceled"}); r.str("previous_state") != "pending_creatives" || r.str("current_state") != "canceled" {
		t.Errorf("force canceled: %s", r.Raw)
	}
	if r := ctl("force_media_buy_status", map[string]any{"media_buy_id": id, "status": "active"}); r.str("error") != "INVALID_TRANSITION" || r.str("current_state") != "canceled" {
		t.Errorf("revive a canceled buy: %s", r.Raw)
	}

	for range 2 {
		ctl("simulate_delivery", map[string]any{"media_buy_id": id, "impressions": 5000, "reported_spend": map[string]any{"amount": 40.5, "currency": "USD"}})
	}
	d := callT(t, cs, "get_media_buy_delivery", map[string]any{"media_buy_ids": []any{id}})
	row := d.get("media_buy_deliveries").([]any)[0].(map[string]any)
	if tot := row["totals"].(map[string]any); tot["impressions"] != float64(10000) || tot["spend"] != float64(81) {
		t.Errorf("delivery after two simulations: %s", d.Raw)
	}

	fx := map[string]any{"delivery_type": "non_guaranteed", "format_ids": []any{map[string]any{"id": "video_30s"}}}
	if r := ctl("seed_product", map[string]any{"product_id": "seeded_1", "fixture": fx}); r.IsError {
		t.Fatalf("seed: %s", r.Raw)
	}
	if r := ctl("seed_product", map[string]any{"product_id": "seeded_1", "fixture": fx}); r.IsError {
		t.Errorf("equivalent re-seed: %s", r.Raw)
	}
	if r := ctl("seed_product", map[string]any{"product_id": "seeded_1", "fixture": map[string]any{"delivery_type": "guaranteed"}}); r.str("error") != "INVALID_PARAMS" {
		t.Errorf("divergent re-seed: %s", r.Raw)
	}
	p := callT(t, cs, "get_products", map[string]any{"buying_mode": "wholesale"})
	mustValidate(t, "media-buy/get-products-response.json", p.Raw)
	if n := len(p.get("products").([]any)); n != 3 {
		t.Errorf("products after seeding: %d", n)
	}
}
