package api

// CampaignSubmitted is the answer to an accepted campaign: 202 with the campaign id, each
// leg's operation and the links.
type CampaignSubmitted struct {
	CampaignID string `json:"campaign_id"`
	Status     string `json:"status"`
	// Replayed is true when the same Idempotency-Key and body were seen before.
	Replayed bool           `json:"replayed"`
	Legs     []SubmittedLeg `json:"legs"`
	Links    Links          `json:"links"`
}

// ID returns the campaign id (the id an Idempotency-Key claim records).
func (s CampaignSubmitted) ID() string { return s.CampaignID }

// SubmittedLeg names one leg's media buy.
type SubmittedLeg struct {
	OperationID string `json:"operation_id"`
	SellerID    string `json:"seller_id"`
	Links       Links  `json:"links"`
}

// Campaign is one campaign as GET /v1/campaigns/{id} shows it: its legs with their statuses
// and amounts, and the totals planned and committed.
type Campaign struct {
	CampaignID string `json:"campaign_id"`
	Name       string `json:"name,omitempty"`
	// Status is running until the campaign is settled (internal/campaign's Status).
	Status string `json:"status"`
	// Reason is why the campaign failed when a step of its own execution failed (its legs'
	// reasons say why each of them ended).
	Reason       string `json:"reason,omitempty"`
	Policy       string `json:"policy"`
	GovernanceID string `json:"governance_agent_id"`
	PlanID       string `json:"plan_id"`
	Currency     string `json:"currency"`
	// TotalBudget is the plan's budget; Planned what the legs ask the sellers to commit;
	// Committed what the completed legs committed (in a list, only once the campaign is
	// settled, and without BySeller).
	TotalBudget string             `json:"total_budget"`
	Planned     string             `json:"planned"`
	Committed   string             `json:"committed,omitempty"`
	BySeller    []SellerCommitment `json:"committed_by_seller,omitempty"`
	Legs        []CampaignLeg      `json:"legs"`
	// Approval is the campaign's one approval, when policy asked a person: its decision
	// applies to every leg.
	Approval  *Approval `json:"approval,omitempty"`
	Requester string    `json:"requester,omitempty"`
	CreatedAt string    `json:"created_at"`
	Links     Links     `json:"links"`
}

// SellerCommitment is what one seller of a campaign committed.
type SellerCommitment struct {
	SellerID  string `json:"seller_id"`
	Committed string `json:"committed"`
}

// CampaignLeg is one leg of a campaign: its media buy's status and amount.
type CampaignLeg struct {
	OperationID string `json:"operation_id"`
	SellerID    string `json:"seller_id"`
	PONumber    string `json:"po_number"`
	Amount      string `json:"amount"`
	// Status is the leg's media buy's status (not in a list: GET the campaign or the leg).
	Status     string `json:"status,omitempty"`
	Reason     string `json:"reason,omitempty"`
	MediaBuyID string `json:"media_buy_id,omitempty"`
	Links      Links  `json:"links"`
}

// CampaignEvent is one entry of a campaign's timeline: a leg's event, named by its operation
// and seller, or the campaign's own (without them).
type CampaignEvent struct {
	OperationID string `json:"operation_id,omitempty"`
	SellerID    string `json:"seller_id,omitempty"`
	Event
}
