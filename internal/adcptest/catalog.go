package adcptest

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
)

// formatAgentURL hosts the creative formats the simulated seller's products name: the AdCP
// reference creative agent, where the standard formats (display_300x250, video_30s) live, so
// a buyer can resolve them there or through this seller's list_creative_formats.
const formatAgentURL = "https://creative.adcontextprotocol.org"

// catalogue is the simulated seller's inventory: the two products of the official
// media_buy_seller storyboard's fixtures (with their pricing options), plus whatever
// comply_test_controller seeded. create_media_buy keeps accepting other product ids (the
// workflow tests name their own), but a product listed here is held to its pricing options.
func defaultCatalogue() []map[string]any {
	return []map[string]any{
		product("sports_preroll_q2", "Sports pre-roll, Q2", "Pre-roll video on sports publishers, guaranteed delivery.",
			"sports.example", "olv", "video_30s", cpm("cpm_guaranteed", 22)),
		product("lifestyle_display_q2", "Lifestyle display, Q2", "Display on outdoor-lifestyle publishers, guaranteed delivery.",
			"lifestyle.example", "display", "display_300x250", cpm("cpm_standard", 8)),
	}
}

func cpm(id string, price float64) map[string]any {
	return map[string]any{"pricing_option_id": id, "pricing_model": "cpm", "currency": "USD", "fixed_price": price}
}

func product(id, name, desc, domain, channel, format string, pricing ...map[string]any) map[string]any {
	pos := make([]any, len(pricing))
	for i, p := range pricing {
		pos[i] = p
	}
	return map[string]any{
		"product_id":           id,
		"name":                 name,
		"description":          desc,
		"publisher_properties": []any{map[string]any{"publisher_domain": domain, "selection_type": "all"}},
		"channels":             []any{channel},
		"format_ids":           []any{map[string]any{"agent_url": formatAgentURL, "id": format}},
		"delivery_type":        "guaranteed",
		"pricing_options":      pos,
		"reporting_capabilities": map[string]any{
			"available_reporting_frequencies": []any{"daily"},
			"expected_delay_minutes":          240,
			"timezone":                        "UTC",
			"supports_webhooks":               false,
			"available_metrics":               []any{"impressions", "spend"},
			"date_range_support":              "lifetime_only",
		},
	}
}

// defaultFormats are the formats the catalogue's products accept, as list_creative_formats
// describes them (comply_test_controller may seed more).
func defaultFormats() map[string]map[string]any {
	return map[string]map[string]any{
		"video_30s": {"format_id": map[string]any{"agent_url": formatAgentURL, "id": "video_30s"},
			"name": "Video 30 s", "description": "30-second hosted video or VAST"},
		"display_300x250": {"format_id": map[string]any{"agent_url": formatAgentURL, "id": "display_300x250"},
			"name": "Display 300x250", "description": "Medium rectangle image or HTML5"},
	}
}

// getProducts answers the catalogue. buying_mode is required of v3 buyers; a brief comes only
// with buying_mode brief, as get-products-request.json says.
func (s *Seller) getProducts(_ context.Context, c *call) reply {
	mode := c.str("buying_mode")
	brief := c.str("brief")
	switch {
	case mode == "":
		return reply{err: invalid("buying_mode", "buying_mode is required (brief, wholesale or refine)")}
	case mode != "brief" && mode != "wholesale" && mode != "refine":
		return reply{err: invalid("buying_mode", "buying_mode must be brief, wholesale or refine")}
	case mode == "brief" && strings.TrimSpace(brief) == "":
		return reply{err: invalid("brief", "buying_mode brief needs a brief")}
	case mode != "brief" && brief != "":
		return reply{err: invalid("brief", "a brief is only allowed with buying_mode brief")}
	}
	s.mu.Lock()
	out := make([]any, 0, len(s.products))
	for _, p := range s.products {
		out = append(out, cloneJSON(p))
	}
	s.mu.Unlock()
	body := map[string]any{"products": out}
	if c.version != Version30 {
		// 3.1 requires it: one rate card for every buyer.
		body["cache_scope"] = "public"
	}
	return reply{body: body}
}

// listCreativeFormats answers the formats the catalogue uses, filtered by format_ids (each
// matched on agent_url and id, so a filter round-trips verbatim).
func (s *Seller) listCreativeFormats(_ context.Context, c *call) reply {
	want := map[string]bool{}
	if ids, ok := c.args["format_ids"].([]any); ok {
		for _, v := range ids {
			m, _ := v.(map[string]any)
			a, _ := m["agent_url"].(string)
			id, _ := m["id"].(string)
			if id == "" {
				return reply{err: invalid("format_ids", "each format_id needs agent_url and id")}
			}
			want[strings.TrimRight(a, "/")+"|"+id] = true
		}
	}
	s.mu.Lock()
	ids := make([]string, 0, len(s.formats))
	for id := range s.formats {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := []any{}
	for _, id := range ids {
		if len(want) > 0 && !want[formatAgentURL+"|"+id] {
			continue
		}
		out = append(out, cloneJSON(s.formats[id]))
	}
	s.mu.Unlock()
	from, to, pg, e := pageOf(c, len(out))
	if e != nil {
		return reply{err: e}
	}
	return reply{body: map[string]any{"formats": out[from:to], "pagination": pg}}
}

// catalogueProduct returns the catalogue's product id, if listed (under s.mu).
func (s *Seller) catalogueProduct(id string) map[string]any {
	for _, p := range s.products {
		if p["product_id"] == id {
			return p
		}
	}
	return nil
}

func invalid(field, msg string) *AdcpError {
	return &AdcpError{Code: "INVALID_REQUEST", Message: msg, Field: field, Recovery: "correctable"}
}

// cloneJSON deep-copies a JSON-shaped value, so a caller never shares the seller's state.
func cloneJSON(v map[string]any) map[string]any {
	b, _ := json.Marshal(v)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return out
}
