package webhook

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/buyflow/buyflow/internal/charclass"
	"github.com/buyflow/buyflow/internal/webhookauth"
)

// Delivery is one AdCP task webhook (core/mcp-webhook-payload.json, the MCP envelope that every
// push_notification_config yields), as far as buyflow reads it.
type Delivery struct {
	// IdempotencyKey is the sender's dedup key: stable across retries of one event, new for
	// every distinct event.
	IdempotencyKey string `json:"idempotency_key"`
	// OperationID is the operation the seller echoes (AdCP 3.1); empty from 3.0 sellers.
	OperationID string `json:"operation_id"`
	TaskID      string `json:"task_id"`
	TaskType    string `json:"task_type"`
	// Status is the AdCP task status (submitted, working, input-required, completed, ...).
	Status string `json:"status"`
	// Timestamp is when the seller produced the event.
	Timestamp time.Time `json:"-"`
	// NotificationID is stable across re-emissions of one state event (optional).
	NotificationID string `json:"notification_id,omitempty"`
	Protocol       string `json:"protocol,omitempty"`
	ContextID      string `json:"context_id,omitempty"`
	Message        string `json:"message,omitempty"`
	// Token is the per-operation token of our push_notification_config, echoed verbatim. It is
	// a secret: never log it.
	Token   string          `json:"token,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Context json.RawMessage `json:"context,omitempty"`
	// PayloadHash is the SHA-256 (hex) of the whole payload in canonical form: what AdCP 3.2
	// binds an idempotency_key to (a retry must repeat the payload, a different one under the
	// same key is refused 409).
	PayloadHash string `json:"-"`
}

// ErrInvalidDelivery reports a payload that is not a valid AdCP webhook envelope.
var ErrInvalidDelivery = errors.New("webhook: invalid delivery")

// DeliveryError says which field of a delivery is invalid; it matches ErrInvalidDelivery.
type DeliveryError struct {
	Field  string
	Reason string
}

func (e *DeliveryError) Error() string {
	return fmt.Sprintf("webhook: invalid delivery: %s %s", e.Field, e.Reason)
}

// Is makes errors.Is(err, ErrInvalidDelivery) true.
func (e *DeliveryError) Is(target error) bool { return target == ErrInvalidDelivery }

// keyChars is the class of the schema's patterns for idempotency_key (16–255 of them) and for
// push-notification-config's operation_id (1–255).
var keyChars = charclass.Of("A-Za-z0-9_.:-")

// Bounds on free-form fields before they reach the ledger.
const (
	maxIDLen      = 255
	minTokenLen   = 16
	maxTokenLen   = 4096
	maxMessageLen = 4096
)

// ValidOperationID reports whether id has the shape of an AdCP operation_id (and so can name a
// ledger operation: it contains no '#').
func ValidOperationID(id string) bool { return keyChars.Span(id, 1, 255) }

// ParseDelivery decodes and validates a webhook body that already passed signature
// verification. It first runs webhookauth.CheckJSON (at most MaxBodyBytes, one JSON object, no
// duplicate keys at any depth, which Go's decoder would silently resolve to the last one), then
// bounds the numbers and checks the required
// fields of core/mcp-webhook-payload.json and their patterns, operation_id excepted (3.0
// sellers leave it out); unknown fields are allowed
// (forward compatibility) and nothing is re-serialised.
func ParseDelivery(body []byte) (*Delivery, error) {
	if err := webhookauth.CheckJSON(body); err != nil {
		return nil, &DeliveryError{Field: "body", Reason: "must be one JSON object without duplicate keys: " + err.Error()}
	}
	if err := boundNumbers(body); err != nil {
		return nil, err
	}
	var wire struct {
		Delivery
		Timestamp *string `json:"timestamp"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&wire); err != nil {
		return nil, &DeliveryError{Field: "body", Reason: "is not a JSON object of the webhook envelope's shape"}
	}
	if dec.More() {
		return nil, &DeliveryError{Field: "body", Reason: "has data after the JSON object"}
	}
	d := wire.Delivery
	switch {
	case !keyChars.Span(d.IdempotencyKey, 16, 255):
		return nil, &DeliveryError{Field: "idempotency_key", Reason: "must be 16-255 characters of [A-Za-z0-9_.:-]"}
	case d.OperationID != "" && !keyChars.Span(d.OperationID, 1, 255):
		// Optional: AdCP 3.0 sellers (the official SDK's included) do not send it; the URL path,
		// which the signature covers, names the operation.
		return nil, &DeliveryError{Field: "operation_id", Reason: "must be 1-255 characters of [A-Za-z0-9_.:-] when present"}
	case d.TaskID == "" || len(d.TaskID) > maxIDLen:
		return nil, &DeliveryError{Field: "task_id", Reason: "is required (at most 255 bytes)"}
	case d.TaskType == "" || len(d.TaskType) > maxIDLen:
		return nil, &DeliveryError{Field: "task_type", Reason: "is required"}
	case d.Status == "" || len(d.Status) > 64:
		return nil, &DeliveryError{Field: "status", Reason: "is required"}
	case wire.Timestamp == nil:
		return nil, &DeliveryError{Field: "timestamp", Reason: "is required"}
	case d.Token != "" && (len(d.Token) < minTokenLen || len(d.Token) > maxTokenLen):
		return nil, &DeliveryError{Field: "token", Reason: "must be 16-4096 characters"}
	case len(d.NotificationID) > maxIDLen:
		return nil, &DeliveryError{Field: "notification_id", Reason: "is longer than 255 bytes"}
	}
	ts, err := time.Parse(time.RFC3339Nano, *wire.Timestamp)
	if err != nil {
		return nil, &DeliveryError{Field: "timestamp", Reason: "must be an RFC 3339 date-time"}
	}
	d.Timestamp = ts.UTC()
	d.PayloadHash = canonicalHash(body)
	if len(d.Message) > maxMessageLen {
		d.Message = strings.ToValidUTF8(d.Message[:maxMessageLen], "")
	}
	return &d, nil
}

// syncTaskPrefix starts the task id 3.0 sellers built on the official SDK give the completion
// webhook they send after a synchronous create or update: a task buyflow never saw, since the call
// answered inline.
const syncTaskPrefix = "sync-"

// canonicalHash is the SHA-256 (hex) of body re-encoded with sorted keys, no insignificant
// space, numbers as IEEE doubles printed the ECMAScript way and no HTML escaping: RFC 8785's
// equivalence for the payloads sellers send, which is what "the same payload" means for a
// retry (3.2 senders may re-serialise it, and a fresh signature changes only headers). body
// has passed CheckJSON and the number bounds; should it not decode, its raw bytes are hashed.
func canonicalHash(body []byte) string {
	var v any
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	b := body
	if json.Unmarshal(body, &v) == nil && enc.Encode(v) == nil {
		b = bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
