package record

import (
	"encoding/json"
	"fmt"
	"time"
)

// claimStatus is the state of an idempotency claim.
type claimStatus string

// The claim statuses (Powertools spelling).
const (
	ClaimInProgress claimStatus = "INPROGRESS"
	ClaimCompleted  claimStatus = "COMPLETED"
)

// Claim is an idempotency record: the Idempotency-Key of one tenant's request, the hash of its
// payload, and, once completed, the operation id and response to replay.
type Claim struct {
	Tenant      string      `dynamodbav:"tenant"`
	Key         string      `dynamodbav:"idempotency_key"`
	Status      claimStatus `dynamodbav:"status"`
	PayloadHash string      `dynamodbav:"payload_hash"`
	// Owner identifies the claimer; Complete and Release require it.
	Owner string `dynamodbav:"owner"`
	// Expiry (Unix seconds, the table's TTL) ends the record: after it the key may be reused.
	Expiry int64 `dynamodbav:"ttl"`
	// InProgressExpiry (Unix milliseconds) ends an INPROGRESS claim's hold on the key.
	InProgressExpiry int64           `dynamodbav:"in_progress_expiry,omitempty"`
	OperationID      string          `dynamodbav:"operation_id,omitempty"`
	Response         json.RawMessage `dynamodbav:"response,omitempty"`
	CreatedAt        time.Time       `dynamodbav:"created_at"`
}

// ClaimExistsError reports an idempotency key held by a live record with the same payload:
// Existing.Status COMPLETED means replay Existing.Response; INPROGRESS means another attempt of
// the request is running (or died before completing the claim).
type ClaimExistsError struct{ Existing *Claim }

func (e *ClaimExistsError) Error() string {
	return fmt.Sprintf("record: idempotency key is %s", e.Existing.Status)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ClaimExistsError) Is(target error) bool { return target == ErrConflict }

// PayloadMismatchError reports an idempotency key held by a record for another payload (HTTP 422).
type PayloadMismatchError struct{ Existing *Claim }

func (e *PayloadMismatchError) Error() string {
	return "record: idempotency key was used with another payload"
}

// Is makes errors.Is(err, ErrPayloadMismatch) true.
func (e *PayloadMismatchError) Is(target error) bool { return target == ErrPayloadMismatch }
