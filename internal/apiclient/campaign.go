package apiclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"

	"github.com/buyflow/buyflow/internal/api"
)

// CampaignTerminal reports whether a campaign status is final.
func CampaignTerminal(status string) bool { return status != "" && status != "running" }

// SubmitCampaign posts a campaign with an Idempotency-Key (retried as Submit is).
func (c *Client) SubmitCampaign(ctx context.Context, key string, body []byte) (api.CampaignSubmitted, int, error) {
	var out api.CampaignSubmitted
	status, err := c.post(ctx, "/v1/campaigns", key, body, &out)
	return out, status, err
}

// GetCampaign reads one campaign.
func (c *Client) GetCampaign(ctx context.Context, id string) (api.Campaign, error) {
	return get[api.Campaign](ctx, c, "/v1/campaigns/"+url.PathEscape(id))
}

// ListCampaigns reads one page of the caller's campaigns, newest first.
func (c *Client) ListCampaigns(ctx context.Context, limit int) ([]api.Campaign, error) {
	path := "/v1/campaigns"
	if limit > 0 {
		path += "?limit=" + strconv.Itoa(limit)
	}
	out, err := get[api.Page[api.Campaign]](ctx, c, path)
	return out.Items, err
}

// CampaignEvents reads a campaign's timeline: its own events and every leg's.
func (c *Client) CampaignEvents(ctx context.Context, id string) ([]api.CampaignEvent, error) {
	out, err := get[api.Page[api.CampaignEvent]](ctx, c, "/v1/campaigns/"+url.PathEscape(id)+"/events")
	return out.Items, err
}

// CampaignSpec describes a campaign built from examples/campaign.json, as the test suites
// submit them: each leg is the example's first leg with its seller, PO, budget and script.
type CampaignSpec struct {
	Policy string
	// Plan includes the example's governance plan (pushed with sync_plans), its budget the total.
	Plan bool
	// Sim is the simulated governance agent's script on sync_plans (the campaign's context.sim).
	Sim string
	// Total is the campaign's total budget (default: the sum of the legs' budgets).
	Total float64
	// NotifySlack, when set, asks for the requester's notifications in this Slack user or
	// channel id.
	NotifySlack string
	Legs        []LegSpec
}

// LegSpec is one leg of a CampaignSpec.
type LegSpec struct {
	SellerID string
	PO       string
	Budget   float64
	// Sim is the simulated agents' script (context.sim), e.g. "async_fail".
	Sim string
}

// Body renders s from <repoRoot>/examples/campaign.json.
func (s CampaignSpec) Body(repoRoot string) ([]byte, error) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "examples", "campaign.json"))
	if err != nil {
		return nil, fmt.Errorf("apiclient: example campaign: %w", err)
	}
	var req struct {
		Name        string                       `json:"name"`
		Governance  json.RawMessage              `json:"governance"`
		TotalBudget map[string]any               `json:"total_budget"`
		Policy      string                       `json:"policy"`
		Plan        map[string]any               `json:"plan"`
		Legs        []map[string]json.RawMessage `json:"legs"`
	}
	if err := json.Unmarshal(raw, &req); err != nil || len(req.Legs) == 0 {
		return nil, errors.New("apiclient: example campaign: no legs")
	}
	var template map[string]any
	if err := json.Unmarshal(req.Legs[0]["media_buy"], &template); err != nil {
		return nil, fmt.Errorf("apiclient: example campaign leg: %w", err)
	}
	total := s.Total
	var legs []map[string]any
	for _, l := range s.Legs {
		var mb map[string]any
		b, _ := json.Marshal(template)
		_ = json.Unmarshal(b, &mb)
		mb["po_number"] = l.PO
		mb["packages"] = []any{map[string]any{"product_id": "ctv-premium-us", "pricing_option_id": "cpm-fixed-usd", "budget": l.Budget}}
		ctx := map[string]any{"campaign": "spring-launch"}
		if l.Sim != "" {
			ctx["sim"] = l.Sim
		}
		mb["context"] = ctx
		legs = append(legs, map[string]any{"seller_id": l.SellerID, "media_buy": mb})
		if s.Total == 0 {
			total += l.Budget
		}
	}
	req.TotalBudget["amount"] = total
	policy := s.Policy
	if policy == "" {
		policy = req.Policy
	}
	out := map[string]any{"name": req.Name, "governance": req.Governance, "total_budget": req.TotalBudget,
		"policy": policy, "legs": legs}
	if s.Plan && req.Plan != nil {
		if budget, ok := req.Plan["budget"].(map[string]any); ok {
			budget["total"] = total
		}
		out["plan"] = req.Plan
	}
	if s.Sim != "" {
		out["context"] = map[string]any{"sim": s.Sim}
	}
	if s.NotifySlack != "" {
		out["notify"] = map[string]any{"slack": s.NotifySlack}
	}
	return json.Marshal(out)
}
