// Package statusevent is the contract of buyflow's status events: what the publisher puts on
// the stack's EventBridge bus for every status change the ledger records (a buy's, a change's,
// a campaign's), and what a consumer (the requester notifier, a cloud team's rule target)
// reads back. It is versioned: SchemaVersion changes only when a field changes meaning or goes
// away; new optional fields keep it.
//
// Exactly one event is published per transition, from the ledger's own record of it (a
// DynamoDB stream), never by the code that asked for the transition. Delivery is at least
// once: a publish that is retried sends the same EventID again, so a consumer that keeps the
// ids it has seen never acts twice. Sequence orders one operation's events (it is the
// operation's version after the transition; EventBridge itself does not keep order).
//
// An event never carries a task token, a webhook token or its hash, a signed link, the
// governance context or a credential: only the fields of Detail.
package statusevent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/buyflow/buyflow/internal/charclass"
)

// Source is the EventBridge source of every status event.
const Source = "buyflow"

// SchemaVersion is the version of Detail.
const SchemaVersion = "1"

// The detail-types, one per kind of thing whose status changed.
const (
	DetailTypeMediaBuy = "MediaBuy Status Changed"
	DetailTypeChange   = "MediaBuy Change Status Changed"
	DetailTypeCampaign = "Campaign Status Changed"
)

// kind says what changed status.
type kind string

// The kinds.
const (
	KindMediaBuy kind = "media_buy"
	KindChange   kind = "change"
	KindCampaign kind = "campaign"
)

// DetailType is the EventBridge detail-type of the kind's events ("" for an unknown kind).
func (k kind) DetailType() string {
	switch k {
	case KindMediaBuy:
		return DetailTypeMediaBuy
	case KindChange:
		return DetailTypeChange
	case KindCampaign:
		return DetailTypeCampaign
	}
	return ""
}

// Detail is the detail of a status event.
type Detail struct {
	SchemaVersion string `json:"schema_version"`
	// EventID is stable across retries of the same publish: "<kind>:<id>:<sequence>".
	EventID string `json:"event_id"`
	Kind    kind   `json:"kind"`
	// OperationID is the buy's or the change's operation id, or the campaign id.
	OperationID string `json:"operation_id"`
	// ParentID is the buy a change applies to.
	ParentID string `json:"parent_id,omitempty"`
	Tenant   string `json:"tenant"`
	// Sequence orders one operation's events: its version after the transition.
	Sequence int64 `json:"sequence"`
	// From is the status before ("" when the operation was just created), To the status after.
	// A campaign's are running (created), running -> awaiting_approval (each round of its one
	// approval; it runs on after the decision) and running -> its outcome.
	// A placed buy then moves with the changes the seller applied: completed -> paused ->
	// completed, and to canceled.
	From       string `json:"from,omitempty"`
	To         string `json:"to"`
	SellerID   string `json:"seller_id,omitempty"`
	MediaBuyID string `json:"media_buy_id,omitempty"`
	// Amount is the buy's amount: after a change, the budget committed after it.
	Amount *Amount `json:"amount,omitempty"`
	// Reason is why a buy failed, was rejected or was canceled, as the ledger recorded it.
	Reason string `json:"reason,omitempty"`
	// ErrorCode is the seller's AdCP error code when the seller ended the task.
	ErrorCode  string    `json:"error_code,omitempty"`
	OccurredAt time.Time `json:"occurred_at"`
	Links      Links     `json:"links"`
	// Notify is the requester's notification target, when the submit asked for one.
	Notify *Notify `json:"notify,omitempty"`
}

// Amount is an exact amount: a decimal string (never a float) and its ISO 4217 currency.
type Amount struct {
	Value    string `json:"value"`
	Currency string `json:"currency"`
}

// Links are the API resources of the operation (IAM-authenticated, never signed links).
type Links struct {
	Self   string `json:"self"`
	Events string `json:"events"`
}

// Notify is where the requester asked to hear about their buy.
type Notify struct {
	// Slack is a Slack user id (U…, W…: a direct message) or channel id (C…, G…, D…).
	Slack string `json:"slack,omitempty"`
}

// isSlackID reports whether id has the shape of a Slack user (U, W) or conversation (C, G, D)
// id: the letter, then 2–31 of [A-Z0-9].
func isSlackID(id string) bool {
	return id != "" && strings.IndexByte("UWCGD", id[0]) >= 0 && slackIDChars.Span(id[1:], 2, 31)
}

var slackIDChars = charclass.Of("A-Z0-9")

// CheckSlackID checks that id is a Slack user id (U…, W…) or channel id (C…, G…, D…): the one
// form chat.postMessage takes as its channel, which reaches a person or a channel and nothing
// else (no mention, no link, no markup).
func CheckSlackID(id string) error {
	if !isSlackID(id) {
		return fmt.Errorf("%q is not a Slack user id (U…, W…) or channel id (C…, G…, D…)", id)
	}
	return nil
}

// EventID is the stable id of the event of kind k on id at sequence seq.
func EventID(k kind, id string, seq int64) string {
	return string(k) + ":" + id + ":" + strconv.FormatInt(seq, 10)
}

// Event is the EventBridge envelope a rule target receives, with its Detail.
type Event struct {
	ID         string    `json:"id"`
	Source     string    `json:"source"`
	DetailType string    `json:"detail-type"`
	Time       time.Time `json:"time"`
	Detail     Detail    `json:"detail"`
}

// MaxEventBytes is EventBridge's limit on an event (256 KB); anything larger is not one.
const MaxEventBytes = 256 << 10

// ErrNotStatusEvent reports input that is not a buyflow status event of this schema version.
var ErrNotStatusEvent = errors.New("statusevent: not a buyflow status event")

// Parse reads an EventBridge event as a target receives it and checks that it is a status
// event this package understands: the source, a detail-type that matches its kind, this schema
// version, the ids and the event id they derive. Anything else is an error wrapping
// ErrNotStatusEvent.
func Parse(b []byte) (Event, error) {
	if len(b) > MaxEventBytes {
		return Event{}, fmt.Errorf("%w: %d bytes is over EventBridge's limit", ErrNotStatusEvent, len(b))
	}
	var ev Event
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&ev); err != nil {
		return Event{}, fmt.Errorf("%w: %w", ErrNotStatusEvent, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Event{}, fmt.Errorf("%w: trailing data after the event", ErrNotStatusEvent)
	}
	d := ev.Detail
	switch {
	case ev.Source != Source:
		return Event{}, fmt.Errorf("%w: source %q", ErrNotStatusEvent, ev.Source)
	case d.SchemaVersion != SchemaVersion:
		return Event{}, fmt.Errorf("%w: schema version %q (this reader knows %s)", ErrNotStatusEvent, d.SchemaVersion, SchemaVersion)
	case d.Kind.DetailType() == "" || d.Kind.DetailType() != ev.DetailType:
		return Event{}, fmt.Errorf("%w: detail-type %q with kind %q", ErrNotStatusEvent, ev.DetailType, d.Kind)
	case d.OperationID == "" || d.Tenant == "" || d.To == "" || d.Sequence < 1:
		return Event{}, fmt.Errorf("%w: operation id, tenant, status and sequence are required", ErrNotStatusEvent)
	case d.EventID != EventID(d.Kind, d.OperationID, d.Sequence):
		return Event{}, fmt.Errorf("%w: event id %q does not match its operation and sequence", ErrNotStatusEvent, d.EventID)
	}
	if d.Notify != nil {
		if err := CheckSlackID(d.Notify.Slack); err != nil {
			return Event{}, fmt.Errorf("%w: notify: %w", ErrNotStatusEvent, err)
		}
	}
	return ev, nil
}
