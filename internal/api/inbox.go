package api

// Inbox is GET /v1/approver/approvals: the approvals waiting for the caller.
type Inbox struct {
	Approver string      `json:"approver"`
	Items    []InboxItem `json:"items"`
}

// InboxItem is one approval waiting for the caller: a buy's or a change's (OperationID), or a
// campaign's (CampaignID, with the legs it covers).
type InboxItem struct {
	ApprovalID  string `json:"approval_id"`
	OperationID string `json:"operation_id,omitempty"`
	CampaignID  string `json:"campaign_id,omitempty"`
	Summary     string `json:"summary"`
	// Seller is the buy's seller, or a campaign's sellers ("a, b").
	Seller string `json:"seller_id"`
	// Amount is what is approved as the page shows it ("USD 20,000.50"): the buy's amount, or
	// the total of the legs a campaign's approval covers.
	Amount string `json:"amount"`
	Reason string `json:"reason"`
	// ReasonText is what asked in its own words (the policy's sentence, the seller's message).
	ReasonText string `json:"reason_text,omitempty"`
	Requester  string `json:"requester"`
	ExpiresAt  string `json:"expires_at"`
	Escalation bool   `json:"escalation,omitempty"`
	// Legs are the media buys a campaign's approval decides, whose amounts add up to Amount.
	Legs []InboxLeg `json:"legs,omitempty"`
}

// InboxLeg is one leg of a campaign's approval.
type InboxLeg struct {
	OperationID string `json:"operation_id"`
	Seller      string `json:"seller_id"`
	PONumber    string `json:"po_number,omitempty"`
	Amount      string `json:"amount"`
	// Why is why this leg asks a person, or that it does not on its own; Governance what the
	// governance agent said of it.
	Why        string `json:"why"`
	Governance string `json:"governance,omitempty"`
}

// InboxApproval is GET /v1/approver/approvals/{id}: one approval opened by its approver, what
// is bought, what governance said, and the caller's own signed review link (the one Slack sent
// them, freshly signed) to decide it on the confirm page.
type InboxApproval struct {
	InboxItem
	Flight     string           `json:"flight,omitempty"`
	ProposalID string           `json:"proposal_id,omitempty"`
	Packages   []InboxPackage   `json:"packages,omitempty"`
	Governance *InboxGovernance `json:"governance,omitempty"`
	ReviewURL  string           `json:"review_url"`

	// Changes are what a change to a placed buy changes, now and after (a change's approval).
	Changes []InboxChangeLine `json:"changes,omitempty"`
}

// InboxPackage is one package of an opened approval.
type InboxPackage struct {
	Product string `json:"product_id"`
	Flight  string `json:"flight"`
	Budget  string `json:"budget"`
}

// InboxChangeLine is one line of a change's approval: what changes, now and after.
type InboxChangeLine struct {
	What   string `json:"what"`
	Before string `json:"before"`
	After  string `json:"after"`
}

// InboxGovernance is governance's verdict on an opened approval.
type InboxGovernance struct {
	Verdict    string           `json:"verdict"`
	Label      string           `json:"label"`
	Conditions []InboxCondition `json:"conditions,omitempty"`
}

// InboxCondition is one governance condition.
type InboxCondition struct {
	Field       string `json:"field"`
	Reason      string `json:"reason,omitempty"`
	NeedsPerson bool   `json:"needs_person,omitempty"`
}
