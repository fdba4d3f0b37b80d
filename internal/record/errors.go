package record

import "errors"

// Sentinel errors. Typed errors below match them with errors.Is.
var (
	// ErrNotFound reports a missing item (or one that belongs to another tenant).
	ErrNotFound = errors.New("record: not found")
	// ErrConflict reports a conditional write that lost: the item is not in the state the write
	// required. The typed errors carry the current item.
	ErrConflict = errors.New("record: conflict")
	// ErrPayloadMismatch reports an idempotency key reused with another payload (HTTP 422).
	ErrPayloadMismatch = errors.New("record: idempotency key reused with another payload")
	// ErrContention reports a write that DynamoDB refused because another write touched the
	// same item at the same time, after the ledger's own retries (conflict.go); nothing was
	// written, and sending the request again is safe.
	ErrContention = errors.New("record: transaction conflict, retry")
	// ErrInvalidCursor reports a pagination cursor that is malformed or belongs to another
	// tenant or listing.
	ErrInvalidCursor = errors.New("record: invalid cursor")
	// ErrInvalidArgument reports an identifier or value the ledger refuses to store.
	ErrInvalidArgument = errors.New("record: invalid argument")
)
