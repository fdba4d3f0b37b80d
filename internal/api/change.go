package api

import "github.com/buyflow/buyflow/internal/record"

// ChangeAccepted is the answer to an accepted change to a placed buy (202): the change's id,
// the buy it changes and the links to follow it.
type ChangeAccepted struct {
	ChangeID string `json:"change_id"`
	BuyID    string `json:"media_buy_operation_id"`
	// Kind is budget, end_time, pause, resume or cancel (internal/modify's Kind).
	Kind     string      `json:"kind"`
	Status   string      `json:"status"`
	Replayed bool        `json:"replayed,omitempty"`
	Links    ChangeLinks `json:"links"`
}

// ChangeLinks are the paths of a change (it is read as a media buy) and of its buy's timeline.
type ChangeLinks struct {
	Change string `json:"change"`
	Events string `json:"events"`
}

// Delivery is GET /v1/media-buys/{id}/delivery: the buy's approved budget, its latest delivery
// and the snapshots, newest first.
type Delivery struct {
	OperationID string `json:"operation_id"`
	Currency    string `json:"currency"`
	// Approved is the buy's budget after its applied changes.
	Approved string `json:"approved_budget"`
	// Spend and OverBudget are from the newest snapshot.
	Spend      string                    `json:"spend,omitempty"`
	OverBudget bool                      `json:"over_budget"`
	Snapshots  []record.DeliverySnapshot `json:"snapshots"`
}
