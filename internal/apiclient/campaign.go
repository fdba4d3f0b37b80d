package apiclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
)

// CampaignSubmitted is the answer to a campaign submit.
type CampaignSubmitted struct {
	CampaignID string         `json:"campaign_id"`
	Status     string         `json:"status"`
	Replayed   bool           `json:"replayed"`
	Legs       []SubmittedLeg `json:"legs"`
	Links      Links          `json:"links"`
}

// SubmittedLeg names one leg's media buy.
type SubmittedLeg struct {
	OperationID string `json:"operation_id"`
	SellerID    string `json:"seller_id"`
	Links       Links  `json:"links"`
}

// Campaign is one campaign as GET /v1/campaigns/{id} shows it.
type Campaign struct {
	CampaignID   string `json:"campaign_id"`
	Name         string `json:"name,omitempty"`
	Status       string `json:"status"`
	Policy       string `json:"policy"`
	GovernanceID string `json:"governance_agent_id"`
	PlanID       string `json:"plan_id"`
	Currency     string `json:"currency"`
	TotalBudget  string `json:"total_budget"`
	Planned      string `json:"planned"`
	Committed    string `json:"committed"`
	BySeller     []struct {
		SellerID  string `json:"seller_id"`
		Committed string `json:"committed"`
	} `json:"committed_by_seller"`
	Legs []CampaignLeg `json:"legs"`
	// Approval is the campaign's one approval, when a person was asked.
	Approval  *Approval `json:"approval,omitempty"`
	Requester string    `json:"requester,omitempty"`
	CreatedAt string    `json:"created_at"`
	Links     Links     `json:"links"`
}

// CampaignLeg is one leg of a campaign: its media buy's status and amount.
type CampaignLeg struct {
	OperationID string `json:"operation_id"`
	SellerID    string `json:"seller_id"`
	PONumber    string `json:"po_number"`
	Amount      string `json:"amount"`
	Status      string `json:"status"`
	Reason      string `json:"reason,omitempty"`
	MediaBuyID  string `json:"media_buy_id,omitempty"`
	Links       Links  `json:"links"`
}

// CampaignEvent is one entry of a campaign's timeline (a leg's, or the campaign's own).
type CampaignEvent struct {
	OperationID string `json:"operation_id,omitempty"`
	SellerID    string `json:"seller_id,omitempty"`
	Event
}

// CampaignTerminal reports whether a campaign status is final.
func CampaignTerminal(status string) bool { return status != "" && status != "running" }

// SubmitCampaign posts a campaign with an Idempotency-Key (retried as Submit is).
func (c *Client) SubmitCampaign(ctx context.Context, key string, body []byte) (CampaignSubmitted, int, error) {
	var out CampaignSubmitted
	status, err := c.post(ctx, "/v1/campaigns", key, body, &out)
	return out, status, err
}

// GetCampaign reads one campaign.
func (c *Client) GetCampaign(ctx context.Context, id string) (Campaign, error) {
	status, _, b, err := c.Do(ctx, http.MethodGet, "/v1/campaigns/"+url.PathEscape(id), nil, nil)
	if err != nil {
		return Campaign{}, err
	}
	var out Campaign
	return out, decode(status, b, &out, http.StatusOK)
}

// ListCampaigns reads one page of the caller's campaigns, newest first.
func (c *Client) ListCampaigns(ctx context.Context, limit int) ([]Campaign, error) {
	path := "/v1/campaigns"
	if limit > 0 {
		path += "?limit=" + strconv.Itoa(limit)
	}
	status, _, b, err := c.Do(ctx, http.MethodGet, path, nil, nil)
	if err != nil {
		return nil, err
	}
	var out struct {
		Items []Campaign `json:"items"`
	}
	return out.Items, decode(status, b, &out, http.StatusOK)
}

// CampaignEvents reads a campaign's timeline: its own events and every leg's.
func (c *Client) CampaignEvents(ctx context.Context, id string) ([]CampaignEvent, error) {
	status, _, b, err := c.Do(ctx, http.MethodGet, "/v1/campaigns/"+url.PathEscape(id)+"/events", nil, nil)
	if err != nil {
		return nil, err
	}
	var out struct {
		Items []CampaignEvent `json:"items"`
	}
	return out.Items, decode(status, b, &out, http.StatusOK)
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
