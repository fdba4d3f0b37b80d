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
}
