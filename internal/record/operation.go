package record

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/buyflow/buyflow/internal/workflow"
)

// The bounds of a page of a listing.
const (
	DefaultListLimit = 50
	MaxListLimit     = 200
)

// Operation is the ledger's record of one media buy, for internal use: it carries the current
// Step Functions task token, which must never leave AWS. Use [Operation.View] for the API.
type Operation struct {
	ID       string          `dynamodbav:"id"`
	Tenant   string          `dynamodbav:"tenant"`
	Status   workflow.Status `dynamodbav:"status"`
	Version  int64           `dynamodbav:"version"`
	SellerID string          `dynamodbav:"seller_id"`
	// GovernanceAgentID names the configured governance agent of the campaign.
	GovernanceAgentID string `dynamodbav:"governance_agent_id,omitempty"`
	// PlanID is the governance plan the buy belongs to.
	PlanID   string `dynamodbav:"plan_id,omitempty"`
	PONumber string `dynamodbav:"po_number,omitempty"`
	// Requester is the principal who submitted the buy; they may not approve it.
	Requester string `dynamodbav:"requester,omitempty"`
	// RequireApproval is true when the buyer asked for a human approval whatever the policy.
	RequireApproval bool `dynamodbav:"require_approval,omitempty"`
	// NotifySlack is the Slack user or channel id the requester asked to hear about the buy in
	// (it rides on the buy's status events, and the requester notifier posts there).
	NotifySlack string `dynamodbav:"notify_slack,omitempty"`
	// BudgetTotal is the budget as a decimal string ("1500.00"); never a float.
	BudgetTotal string `dynamodbav:"budget_total,omitempty"`
	Currency    string `dynamodbav:"currency,omitempty"`
	// Request is the submitted buy, as received (JSON).
	Request             json.RawMessage `dynamodbav:"request,omitempty"`
	SellerTaskID        string          `dynamodbav:"seller_task_id,omitempty"`
	MediaBuyID          string          `dynamodbav:"media_buy_id,omitempty"`
	GovernanceCheckID   string          `dynamodbav:"governance_check_id,omitempty"`
	GovernanceContext   string          `dynamodbav:"governance_context,omitempty"`
	GovernanceExpiresAt time.Time       `dynamodbav:"governance_expires_at,omitempty"`
	// WebhookTokenHash is the SHA-256 (hex) of the per-operation webhook token; the token itself is
	// never stored. See [HashToken].
	WebhookTokenHash string `dynamodbav:"webhook_token_hash,omitempty"`
	Reason           string `dynamodbav:"reason,omitempty"`
	// ErrorCode is the seller's AdCP error code for a task it ended (failed, rejected or an
	// error as its result), kept for the failure report to governance.
	ErrorCode     string    `dynamodbav:"error_code,omitempty"`
	CreatedAt     time.Time `dynamodbav:"created_at"`
	UpdatedAt     time.Time `dynamodbav:"updated_at"`
	Deadline      time.Time `dynamodbav:"deadline,omitempty"`
	ExecutionName string    `dynamodbav:"execution_name,omitempty"`
	// TaskToken is the Step Functions task token the workflow currently waits on (internal only).
	TaskToken string `dynamodbav:"task_token,omitempty"`
	// Kind is KindModification for a change to a placed buy (empty for a buy itself); ParentID
	// then names the buy's operation and Change holds the change as the buyer asked for it.
	Kind     string          `dynamodbav:"kind,omitempty"`
	ParentID string          `dynamodbav:"parent_id,omitempty"`
	Change   json.RawMessage `dynamodbav:"change,omitempty"`
	// SellerPackages are the packages the seller placed, as its create_media_buy answer (or
	// the task's completion) reported them: their ids are what a per-package change names.
	SellerPackages []PackageBudget `dynamodbav:"seller_packages,omitempty"`
	// SellerState is, on a change, the buy's state (active, paused, canceled) as the seller's
	// answer to the update reported it when that contradicts the change (internal only: the
	// change's reason says it in words).
	SellerState string `dynamodbav:"seller_state,omitempty"`
	// LastWrite is the random id of the last Transition or UpdateFields (internal only): a write
	// whose response was lost is retried by the SDK and then fails its own condition; finding
	// its id here tells the ledger the write is in.
	LastWrite string `dynamodbav:"last_write,omitempty"`
	// DeliveryMark is, on a live buy, what its last delivery snapshot recorded (internal only,
	// internal/delivery): a read whose report matches it writes no snapshot, so an unmoved buy
	// costs a read, not a write.
	DeliveryMark string `dynamodbav:"delivery_mark,omitempty"`
	// DeliveryPushed is set on a live buy once its seller pushed a delivery report
	// (reporting_webhook): from then on the delivery read pulls it only as a watchdog.
	DeliveryPushed bool `dynamodbav:"delivery_pushed,omitempty"`
	// DeliveryEntry is set by the ledger's live list on a buy listed by its own small live
	// entry rather than by its operation item (internal/ledger: a buy moves to its entry at its
	// first read, so that each later read rewrites a small item, not the operation and its
	// indexes). DeliveryMark and DeliveryPushed are then the entry's. Never stored.
	DeliveryEntry bool `dynamodbav:"-"`
}

// View is the API projection of an operation: every field but the task token.
type View struct {
	ID                  string          `json:"id"`
	Tenant              string          `json:"tenant"`
	Status              workflow.Status `json:"status"`
	Version             int64           `json:"version"`
	SellerID            string          `json:"seller_id"`
	GovernanceAgentID   string          `json:"governance_agent_id,omitempty"`
	PlanID              string          `json:"plan_id,omitempty"`
	PONumber            string          `json:"po_number,omitempty"`
	Requester           string          `json:"requester,omitempty"`
	RequireApproval     bool            `json:"require_approval,omitempty"`
	NotifySlack         string          `json:"notify_slack,omitempty"`
	BudgetTotal         string          `json:"budget_total,omitempty"`
	Currency            string          `json:"currency,omitempty"`
	Request             json.RawMessage `json:"request,omitempty"`
	SellerTaskID        string          `json:"seller_task_id,omitempty"`
	MediaBuyID          string          `json:"media_buy_id,omitempty"`
	GovernanceCheckID   string          `json:"governance_check_id,omitempty"`
	GovernanceExpiresAt *time.Time      `json:"governance_expires_at,omitempty"`
	Reason              string          `json:"reason,omitempty"`
	CreatedAt           time.Time       `json:"created_at"`
	UpdatedAt           time.Time       `json:"updated_at"`
	Deadline            *time.Time      `json:"deadline,omitempty"`
	Kind                string          `json:"kind,omitempty"`
	ParentID            string          `json:"parent_id,omitempty"`
	Change              json.RawMessage `json:"change,omitempty"`
	SellerPackages      []PackageBudget `json:"seller_packages,omitempty"`
}

// KindModification is the Kind of an operation that changes a placed buy.
const KindModification = "modification"

// View returns the API projection of o (no task token, no webhook token hash, no governance
// context, no execution name).
func (o *Operation) View() View {
	opt := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		return &t
	}
	return View{
		ID: o.ID, Tenant: o.Tenant, Status: o.Status, Version: o.Version, SellerID: o.SellerID,
		GovernanceAgentID: o.GovernanceAgentID, PlanID: o.PlanID, PONumber: o.PONumber,
		Requester: o.Requester, RequireApproval: o.RequireApproval, NotifySlack: o.NotifySlack, BudgetTotal: o.BudgetTotal,
		Currency: o.Currency, Request: o.Request, SellerTaskID: o.SellerTaskID, MediaBuyID: o.MediaBuyID,
		GovernanceCheckID: o.GovernanceCheckID, GovernanceExpiresAt: opt(o.GovernanceExpiresAt),
		Reason: o.Reason, CreatedAt: o.CreatedAt, UpdatedAt: o.UpdatedAt, Deadline: opt(o.Deadline),
		Kind: o.Kind, ParentID: o.ParentID, Change: o.Change, SellerPackages: o.SellerPackages,
	}
}

// HashToken returns the hex SHA-256 of a per-operation webhook token, the only form stored.
func HashToken(token string) string { return hashHex(token) }

// hashHex is the hex SHA-256 of s, the form free-form keys take inside the ledger's keys.
func hashHex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// ConflictError reports a create whose key is already taken; Operation is the existing item when
// the conflict is on an operation.
type ConflictError struct {
	What      string
	Operation *Operation
}

func (e *ConflictError) Error() string { return fmt.Sprintf("record: %s already exists", e.What) }

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// Changes are the fields a transition sets along with the status; nil fields are left as they
// are. Event fields describe the audit event written in the same transaction.
type Patch struct {
	SellerTaskID        *string
	MediaBuyID          *string
	GovernanceCheckID   *string
	GovernanceContext   *string
	GovernanceExpiresAt *time.Time
	WebhookTokenHash    *string
	Reason              *string
	ErrorCode           *string
	Deadline            *time.Time
	ExecutionName       *string
	// SellerPackages, when not nil, records the seller's packages (the placed buy's ids).
	SellerPackages []PackageBudget
	// BudgetTotal, when set, is a placed buy's committed budget after a change the seller
	// applied; the audit event carries it as its amount, in EventCurrency.
	BudgetTotal   *string
	EventCurrency string
	// SellerState records what the seller's answer said of a change it contradicted.
	SellerState *string

	// From, when set, narrows the condition to exactly this current status (it must be a legal
	// predecessor of the target) and is recorded in the event.
	From workflow.Status
	// Actor, EventType (default EventTransition) and Detail describe the audit event.
	Actor     string
	EventType string
	Detail    json.RawMessage
}

// ApplyTo sets on op the fields p changes, as the ledger's transitions write them (times in
// UTC): a caller that knows the item a conditioned write changed can tell what it became
// without reading it again. The event fields and From are not the operation's.
func (p Patch) ApplyTo(op *Operation) {
	strs := [...]struct{ dst, v *string }{
		{&op.SellerTaskID, p.SellerTaskID}, {&op.MediaBuyID, p.MediaBuyID}, {&op.GovernanceCheckID, p.GovernanceCheckID},
		{&op.GovernanceContext, p.GovernanceContext}, {&op.WebhookTokenHash, p.WebhookTokenHash}, {&op.Reason, p.Reason},
		{&op.ErrorCode, p.ErrorCode}, {&op.ExecutionName, p.ExecutionName}, {&op.BudgetTotal, p.BudgetTotal},
		{&op.SellerState, p.SellerState},
	}
	for _, f := range strs {
		if f.v != nil {
			*f.dst = *f.v
		}
	}
	for _, f := range [...]struct{ dst, v *time.Time }{{&op.GovernanceExpiresAt, p.GovernanceExpiresAt}, {&op.Deadline, p.Deadline}} {
		if f.v != nil {
			*f.dst = f.v.UTC()
		}
	}
	if p.SellerPackages != nil {
		op.SellerPackages = p.SellerPackages
	}
}

// ConflictKind says why a transition's condition failed.
type ConflictKind string

// The kinds of transition conflict.
const (
	// ConflictTerminal: the operation is already in a terminal status.
	ConflictTerminal ConflictKind = "terminal"
	// ConflictIllegal: the current status may not move to the target.
	ConflictIllegal ConflictKind = "illegal"
	// ConflictVersion: the status allows the move but the version moved on.
	ConflictVersion ConflictKind = "version"
)

// TransitionError reports a transition refused by its condition, with the current operation.
type TransitionError struct {
	Kind            ConflictKind
	To              workflow.Status
	ExpectedVersion int64
	Current         *Operation
}

func (e *TransitionError) Error() string {
	switch e.Kind {
	case ConflictTerminal:
		if e.To == "" {
			return fmt.Sprintf("record: operation %s is already %s (version %d), cannot be updated",
				e.Current.ID, e.Current.Status, e.Current.Version)
		}
		return fmt.Sprintf("record: operation %s is already %s (version %d), cannot move to %s",
			e.Current.ID, e.Current.Status, e.Current.Version, e.To)
	case ConflictIllegal:
		return fmt.Sprintf("record: operation %s cannot move from %s to %s", e.Current.ID, e.Current.Status, e.To)
	default:
		if e.ExpectedVersion == AnyVersion {
			return fmt.Sprintf("record: operation %s changed concurrently (now %s, version %d)",
				e.Current.ID, e.Current.Status, e.Current.Version)
		}
		return fmt.Sprintf("record: operation %s moved to version %d (expected %d)",
			e.Current.ID, e.Current.Version, e.ExpectedVersion)
	}
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *TransitionError) Is(target error) bool { return target == ErrConflict }

// AnyVersion disables the version check of a transition.
const AnyVersion int64 = -1

// ErrTokenMismatch reports a ClearTaskToken whose token is no longer the stored one (a newer
// wait replaced it, or it was already cleared). It matches ErrConflict.
var ErrTokenMismatch = fmt.Errorf("%w: task token is not the current one", ErrConflict)

// ListOptions filter and page a tenant's operations.
type ListOptions struct {
	Status   workflow.Status // optional
	SellerID string          // optional
	Limit    int             // default DefaultListLimit, at most MaxListLimit
	Cursor   string          // from a previous page
}

// Page is one page of a listing; Cursor is empty on the last page.
type Page[T any] struct {
	Items  []T
	Cursor string
}

// OperationOwner is who owns an operation id, as the ledger's operation index says: what a
// seller's webhook, whose URL names only the operation, needs before it reads the operation.
type OperationOwner struct {
	Tenant string
	// SellerID is the operation's seller; "" where the index item was written before it was
	// kept.
	SellerID string
}
