package campaign

import "github.com/buyflow/buyflow/internal/buy"

// Submitted is the answer to an accepted campaign: 202 with the campaign id, each leg's
// operation and the links.
type Submitted struct {
	CampaignID string `json:"campaign_id"`
	Status     Status `json:"status"`
	// Replayed is true when the same Idempotency-Key and body were seen before.
	Replayed bool           `json:"replayed"`
	Legs     []SubmittedLeg `json:"legs"`
	Links    Links          `json:"links"`
}

// ID returns the campaign id (the id an Idempotency-Key claim records).
func (s Submitted) ID() string { return s.CampaignID }

// SubmittedLeg names one leg's media buy.
type SubmittedLeg struct {
	OperationID string    `json:"operation_id"`
	SellerID    string    `json:"seller_id"`
	Links       buy.Links `json:"links"`
}

// Links are the URLs (paths) of a campaign.
type Links struct {
	Self   string `json:"self"`
	Events string `json:"events"`
}

// LinksFor returns the links of campaign id.
func LinksFor(id string) Links {
	return Links{Self: "/v1/campaigns/" + id, Events: "/v1/campaigns/" + id + "/events"}
}

// View is the API projection of a campaign: its legs with their statuses and amounts, and the
// totals planned and committed.
type View struct {
	CampaignID   string `json:"campaign_id"`
	Name         string `json:"name,omitempty"`
	Status       Status `json:"status"`
	Policy       Policy `json:"policy"`
	GovernanceID string `json:"governance_agent_id"`
	PlanID       string `json:"plan_id"`
	Currency     string `json:"currency"`
	// TotalBudget is the plan's budget; Planned what the legs ask the sellers to commit;
	// Committed what the completed legs committed (in a list, only once the campaign is
	// settled, and without BySeller).
	TotalBudget string       `json:"total_budget"`
	Planned     string       `json:"planned"`
	Committed   string       `json:"committed,omitempty"`
	BySeller    []SellerView `json:"committed_by_seller,omitempty"`
	Legs        []LegView    `json:"legs"`
	// Approval is the campaign's one approval, when policy asked a person: its decision
	// applies to every leg.
	Approval  *buy.ApprovalView `json:"approval,omitempty"`
	Requester string            `json:"requester,omitempty"`
	CreatedAt string            `json:"created_at"`
	Links     Links             `json:"links"`
}

// SellerView is what one seller committed.
type SellerView struct {
	SellerID  string `json:"seller_id"`
	Committed string `json:"committed"`
}

// LegView is one leg: its media buy's status and amount.
type LegView struct {
	OperationID string `json:"operation_id"`
	SellerID    string `json:"seller_id"`
	PONumber    string `json:"po_number"`
	Amount      string `json:"amount"`
	// Status is the leg's media buy's status (not in a list: GET the campaign or the leg).
	Status     string    `json:"status,omitempty"`
	Reason     string    `json:"reason,omitempty"`
	MediaBuyID string    `json:"media_buy_id,omitempty"`
	Links      buy.Links `json:"links"`
}

// ListPage is one page of campaigns, newest first.
type ListPage struct {
	Items      []View `json:"items"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// EventView is one entry of a campaign's timeline: a leg's event, named by its operation and
// seller, or the campaign's own (without them).
type EventView struct {
	OperationID string `json:"operation_id,omitempty"`
	SellerID    string `json:"seller_id,omitempty"`
	buy.EventView
}

// EventPage is a campaign's timeline, oldest first.
type EventPage struct {
	Items []EventView `json:"items"`
}
