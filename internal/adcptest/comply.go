package adcptest

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"time"
)

// complyScenarios are the comply_test_controller scenarios the simulated seller implements;
// others answer UNKNOWN_SCENARIO, which the official runner grades as "not supported" rather
// than as a failure.
var complyScenarios = []string{
	"force_media_buy_status", "force_create_media_buy_arm", "force_task_completion",
	"force_creative_status", "force_account_status", "simulate_delivery",
	"seed_product", "seed_pricing_option", "seed_creative", "seed_creative_format", "seed_media_buy",
}

// complyRequired are the string params each scenario cannot do without.
var complyRequired = map[string][]string{
	"force_media_buy_status": {"media_buy_id", "status"}, "force_create_media_buy_arm": {"arm"},
	"force_task_completion": {"task_id"}, "force_creative_status": {"creative_id", "status"},
	"force_account_status": {"account_id", "status"}, "simulate_delivery": {"media_buy_id"},
	"seed_product": {"product_id"}, "seed_pricing_option": {"product_id", "pricing_option_id"},
	"seed_creative": {"creative_id"}, "seed_creative_format": {"format_id"},
	"seed_media_buy": {"media_buy_id"},
}

// mediaBuyMoves is the media-buy state machine the controller enforces (what a buy may be
// forced to from each status); canceled, completed and rejected are final.
var mediaBuyMoves = map[string][]string{
	"pending_creatives": {"pending_start", "active", "paused", "canceled", "rejected"},
	"pending_start":     {"pending_creatives", "active", "paused", "canceled", "rejected"},
	"active":            {"paused", "completed", "canceled"},
	"paused":            {"active", "completed", "canceled"},
}

// forcedArm is a create_media_buy answer the controller registered for a principal's next
// create (force_create_media_buy_arm).
type forcedArm struct {
	arm, taskID, message string
}

// controllerError is the controller's own error arm (success: false), answered with isError
// as the SDK's sellers do.
func controllerError(code, detail string, current any) reply {
	body := map[string]any{"success": false, "error": code, "error_detail": detail}
	if current != nil {
		body["current_state"] = current
	}
	return reply{body: body, isError: true}
}

// complyTestController drives the seller into states a storyboard needs (sandbox only on a
// real seller; a simulated seller is all sandbox). Every scenario acts for the calling
// principal only.
func (s *Seller) complyTestController(_ context.Context, c *call) reply {
	params, _ := c.args["params"].(map[string]any)
	str := func(k string) string { v, _ := params[k].(string); return v }
	sc := c.str("scenario")
	for _, k := range complyRequired[sc] {
		if v, _ := params[k].(string); v == "" {
			return controllerError("INVALID_PARAMS", sc+" needs params."+k, nil)
		}
	}
	switch sc {
	case "list_scenarios":
		return reply{body: map[string]any{"success": true, "scenarios": complyScenarios}}
	case "force_media_buy_status":
		return s.forceMediaBuyStatus(c.owner, str("media_buy_id"), str("status"))
	case "force_create_media_buy_arm":
		arm := str("arm")
		if arm != "submitted" && arm != "input-required" {
			return controllerError("INVALID_PARAMS", "arm must be submitted or input-required", nil)
		}
		f := forcedArm{arm: arm, taskID: str("task_id"), message: str("message")}
		if f.taskID == "" {
			f.taskID = s.nextID("task")
		}
		s.mu.Lock()
		s.forced[c.owner] = f
		s.mu.Unlock()
		return reply{body: map[string]any{"success": true, "forced": map[string]any{"arm": arm, "task_id": f.taskID},
			"message": "the next create_media_buy answers " + arm}}
	case "force_task_completion":
		return s.forceTaskCompletion(c.owner, str("task_id"), params["result"])
	case "force_creative_status":
		s.mu.Lock()
		defer s.mu.Unlock()
		cr := s.creatives[c.owner+"|"+str("creative_id")]
		if cr == nil {
			return controllerError("NOT_FOUND", "no creative "+str("creative_id"), nil)
		}
		prev := cr.status
		if prev == "archived" && str("status") != "archived" {
			return controllerError("INVALID_TRANSITION", "an archived creative stays archived", prev)
		}
		cr.status = str("status")
		return reply{body: map[string]any{"success": true, "previous_state": prev, "current_state": cr.status}}
	case "force_account_status":
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, a := range s.accounts {
			if a.owner == c.owner && a.body["account_id"] == str("account_id") {
				prev, _ := a.body["status"].(string)
				a.body["status"] = str("status")
				return reply{body: map[string]any{"success": true, "previous_state": prev, "current_state": str("status")}}
			}
		}
		return controllerError("NOT_FOUND", "no account "+str("account_id"), nil)
	case "simulate_delivery":
		return s.simulateDelivery(c.owner, params)
	case "seed_product", "seed_pricing_option", "seed_creative", "seed_creative_format", "seed_media_buy":
		return s.seed(c.owner, sc, params)
	case "":
		return controllerError("INVALID_PARAMS", "scenario is required", nil)
	default:
		return controllerError("UNKNOWN_SCENARIO", "this seller does not implement "+sc, nil)
	}
}

func (s *Seller) forceMediaBuyStatus(owner, id, status string) reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	mb := s.buys[id]
	if mb == nil || mb.owner != owner {
		return controllerError("NOT_FOUND", "no media buy "+id, nil)
	}
	prev, _ := mb.body["status"].(string)
	ok := false
	for _, to := range mediaBuyMoves[prev] {
		ok = ok || to == status
	}
	if !ok {
		return controllerError("INVALID_TRANSITION", fmt.Sprintf("a %s media buy cannot become %s", prev, status), prev)
	}
	mb.body["status"] = status
	mb.body["updated_at"] = s.now().Format(time.RFC3339)
	return reply{body: map[string]any{"success": true, "previous_state": prev, "current_state": status}}
}

func (s *Seller) forceTaskCompletion(owner, id string, result any) reply {
	res, ok := result.(map[string]any)
	if !ok {
		return controllerError("INVALID_PARAMS", "result must be an object", nil)
	}
	s.mu.Lock()
	t := s.tasks[id]
	if t == nil || t.owner != owner {
		s.mu.Unlock()
		return controllerError("NOT_FOUND", "no task "+id, nil)
	}
	prev := t.Status
	if terminal(prev) {
		s.mu.Unlock()
		return controllerError("INVALID_TRANSITION", "task is already "+prev, prev)
	}
	t.finish = func(string) (map[string]any, *AdcpError) { return res, nil }
	s.mu.Unlock()
	if err := s.Finish(id, "completed"); err != nil {
		return controllerError("NOT_FOUND", err.Error(), nil)
	}
	return reply{body: map[string]any{"success": true, "previous_state": prev, "current_state": "completed"}}
}

// simulateDelivery adds delivery to a media buy (cumulative, as a real ad server's counters
// only grow) and reports what it added and the running totals.
func (s *Seller) simulateDelivery(owner string, p map[string]any) reply {
	id, _ := p["media_buy_id"].(string)
	s.mu.Lock()
	defer s.mu.Unlock()
	mb := s.buys[id]
	if mb == nil || mb.owner != owner {
		return controllerError("NOT_FOUND", "no media buy "+id, nil)
	}
	imp, _ := p["impressions"].(float64)
	spend := 0.0
	if rs, ok := p["reported_spend"].(map[string]any); ok {
		spend, _ = rs["amount"].(float64)
	}
	if imp < 0 || spend < 0 {
		return controllerError("INVALID_PARAMS", "impressions and reported_spend cannot be negative", nil)
	}
	if s.delivered == nil {
		s.delivered = map[string]delivered{}
	}
	d := s.delivered[id]
	prev, _ := json.Number(d.spend).Float64()
	d.impressions += int64(imp)
	d.spend = json.Number(fmt.Sprint(prev + spend)).String()
	s.delivered[id] = d
	return reply{body: map[string]any{"success": true,
		"simulated":  map[string]any{"media_buy_id": id, "impressions": imp, "spend": spend},
		"cumulative": map[string]any{"impressions": d.impressions, "spend": prev + spend}}}
}

// seed registers a fixture. Seeding the same id again with an equivalent fixture succeeds;
// with a different one it is refused, so two storyboards cannot silently share an id.
func (s *Seller) seed(owner, scenario string, p map[string]any) reply {
	fixture, _ := p["fixture"].(map[string]any)
	if fixture == nil {
		fixture = map[string]any{}
	}
	var key string
	switch scenario {
	case "seed_product":
		key, _ = p["product_id"].(string)
	case "seed_pricing_option":
		pid, _ := p["product_id"].(string)
		po, _ := p["pricing_option_id"].(string)
		if pid == "" || po == "" {
			return controllerError("INVALID_PARAMS", "product_id and pricing_option_id are required", nil)
		}
		key = pid + "|" + po
	case "seed_creative":
		key, _ = p["creative_id"].(string)
	case "seed_creative_format":
		key, _ = p["format_id"].(string)
	case "seed_media_buy":
		key, _ = p["media_buy_id"].(string)
		if st, _ := fixture["status"].(string); st != "" && mediaBuyMoves[st] == nil && !terminal(st) {
			return controllerError("INVALID_PARAMS", "status "+st+" is not a media-buy status", nil)
		}
	}
	if key == "" {
		return controllerError("INVALID_PARAMS", scenario+" needs the fixture's id", nil)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ck := owner + "|" + scenario + "|" + key
	if was, ok := s.seeded[ck]; ok {
		if !reflect.DeepEqual(was, fixture) {
			return controllerError("INVALID_PARAMS", scenario+" "+key+" was seeded with a different fixture", nil)
		}
		return reply{body: map[string]any{"success": true, "message": "Fixture re-seeded (equivalent)"}}
	}
	switch scenario {
	case "seed_product":
		s.seedProduct(key, fixture)
	case "seed_pricing_option":
		pid, _ := p["product_id"].(string)
		po, _ := p["pricing_option_id"].(string)
		prod := s.catalogueProduct(pid)
		if prod == nil {
			return controllerError("NOT_FOUND", "no product "+pid+": seed it first", nil)
		}
		opt := cloneJSON(fixture)
		opt["pricing_option_id"] = po
		var keep []any
		for _, o := range prod["pricing_options"].([]any) {
			if om, _ := o.(map[string]any); om["pricing_option_id"] != po {
				keep = append(keep, o)
			}
		}
		prod["pricing_options"] = append(keep, opt)
	case "seed_creative":
		fid, _ := fixture["format_id"].(map[string]any)
		format, _ := fid["id"].(string)
		if format == "" {
			format = "display_300x250" // the fixture's format is optional; the library needs one
		}
		st, _ := fixture["status"].(string)
		if st == "" {
			st = "approved"
		}
		name, _ := fixture["name"].(string)
		now := s.now()
		s.creatives[owner+"|"+key] = &creative{owner: owner, id: key, name: name, format: format, status: st, created: now, updated: now}
	case "seed_media_buy":
		if mb := s.buys[key]; mb != nil && mb.owner != owner {
			return controllerError("INVALID_PARAMS", "media buy "+key+" belongs to another principal", nil)
		}
		s.seedMediaBuy(owner, key, fixture)
	case "seed_creative_format":
		f := cloneJSON(fixture)
		f["format_id"] = map[string]any{"agent_url": formatAgentURL, "id": key}
		if _, ok := f["name"]; !ok {
			f["name"] = key
		}
		s.formats[key] = f
	}
	s.seeded[ck] = fixture
	return reply{body: map[string]any{"success": true, "message": "Fixture seeded"}}
}

// seedProduct adds or replaces a catalogue product: the fixture's fields over a complete
// product, so what get_products answers stays a valid product (under s.mu).
func (s *Seller) seedProduct(id string, fixture map[string]any) {
	p := product(id, id, "Seeded product "+id, "seeded.example", "display", "display_300x250", cpm("cpm_"+id, 10))
	for k, v := range cloneJSON(fixture) {
		p[k] = v
	}
	p["product_id"] = id
	// Format ids in fixtures name only the format; the seller hosts them at formatAgentURL.
	if fids, ok := p["format_ids"].([]any); ok {
		for _, f := range fids {
			if fm, _ := f.(map[string]any); fm != nil && fm["agent_url"] == nil {
				fm["agent_url"] = formatAgentURL
			}
		}
	}
	for i, q := range s.products {
		if q["product_id"] == id {
			s.products[i] = p
			return
		}
	}
	s.products = append(s.products, p)
}

// seedMediaBuy places a buy as if a create had confirmed it: the fixture's fields over a
// complete get_media_buys item (under s.mu).
func (s *Seller) seedMediaBuy(owner, id string, fixture map[string]any) {
	now := s.now().Format(time.RFC3339)
	item := map[string]any{"media_buy_id": id, "status": "active", "currency": "USD", "total_budget": 0.0,
		"confirmed_at": now, "revision": 1, "packages": []any{}, "created_at": now, "updated_at": now}
	for k, v := range cloneJSON(fixture) {
		item[k] = v
	}
	item["media_buy_id"] = id
	// update_media_buy counts revisions as int; JSON gave a float.
	if r, ok := item["revision"].(float64); ok {
		item["revision"] = int(r)
	}
	if _, ok := s.buys[id]; !ok {
		s.buyOrder = append(s.buyOrder, id)
	}
	s.buys[id] = &mediaBuy{owner: owner, body: item}
}
