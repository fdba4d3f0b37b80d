package record

import "time"

// DeliverySnapshot is what a seller reported a live buy delivered, as of a moment: one read of
// get_media_buy_delivery. Snapshots are append-only, one per (buy, as-of): reading the same
// report twice stores it once.
type DeliverySnapshot struct {
	Tenant      string `dynamodbav:"tenant" json:"-"`
	OperationID string `dynamodbav:"operation_id" json:"operation_id"`
	MediaBuyID  string `dynamodbav:"media_buy_id" json:"media_buy_id"`
	// AsOf is the end of the reporting period the seller reported.
	AsOf        time.Time `dynamodbav:"as_of" json:"as_of"`
	Impressions int64     `dynamodbav:"impressions" json:"impressions"`
	// Spend is exact (a decimal string in Currency).
	Spend    string `dynamodbav:"spend" json:"spend"`
	Currency string `dynamodbav:"currency" json:"currency"`
	// Pacing is the seller's pacing index when it reports one (a decimal string, 1 = on pace).
	Pacing string `dynamodbav:"pacing,omitempty" json:"pacing,omitempty"`
	// Approved is the budget approved when the snapshot was read, for spend-against-budget.
	Approved string    `dynamodbav:"approved" json:"approved"`
	ReadAt   time.Time `dynamodbav:"read_at" json:"read_at"`
	// Pushed is set when the seller pushed this report (its reporting_webhook); a pull read
	// the others.
	Pushed bool `dynamodbav:"pushed,omitempty" json:"pushed,omitempty"`
	// PushKey is the idempotency_key of the pushed delivery that wrote this snapshot: the
	// receiver's dedupe for a redelivery of the newest report (internal/delivery.Push).
	PushKey string `dynamodbav:"push_key,omitempty" json:"-"`
	// PushHash is that delivery's payload hash: the same key with another payload is a
	// conflict, not a redelivery (AdCP 3.2's retry rules).
	PushHash string `dynamodbav:"push_hash,omitempty" json:"-"`
}
