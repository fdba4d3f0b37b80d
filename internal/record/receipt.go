package record

import "time"

// Receipt is the deduplication record of one seller webhook delivery.
type Receipt struct {
	// SellerID is the authenticated sender (from the verified signature, never from the body).
	SellerID       string    `dynamodbav:"seller_id"`
	IdempotencyKey string    `dynamodbav:"idempotency_key"`
	Tenant         string    `dynamodbav:"tenant,omitempty"`
	OperationID    string    `dynamodbav:"operation_id,omitempty"`
	TaskID         string    `dynamodbav:"task_id,omitempty"`
	ReceivedAt     time.Time `dynamodbav:"received_at"`
	// PayloadHash is the SHA-256 of the delivery's canonical payload (RFC 8785-equivalent), so
	// a retry under the same key can be told from a different payload reusing it (AdCP 3.2:
	// 409). Empty on receipts written before it was kept, and on inform's.
	PayloadHash string `dynamodbav:"payload_hash,omitempty"`
	// Done says the delivery's effects are recorded: a retry is answered 2xx. Until then it is
	// in progress and a retry is answered 503 (AdCP 3.2), unless its holder has been at it so
	// long it must have died (ledger.ClaimReceipt).
	Done bool `dynamodbav:"done,omitempty"`
}
