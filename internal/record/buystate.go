package record

import (
	"errors"
	"fmt"
	"time"

	"github.com/buyflow/buyflow/internal/workflow"
)

// BuyState is the ledger's record of a placed buy after its changes: the seller's revision,
// the package budgets, paused/active/canceled, and the change in flight. It sits beside the
// operation that placed the buy, whose status and budget follow it once a change ends
// (completed, paused or canceled, and the committed budget), so every reader of the status
// sees the same buy. Every write is conditional: one change at a time, the revision only
// moves forward, nothing follows a cancellation.
type BuyState struct {
	Tenant      string `dynamodbav:"tenant"`
	OperationID string `dynamodbav:"operation_id"`
	MediaBuyID  string `dynamodbav:"media_buy_id"`
	// Revision is the seller's revision of the buy, sent as the expected revision of the next
	// update.
	Revision int    `dynamodbav:"revision"`
	State    string `dynamodbav:"state"` // active | paused | canceled
	// BudgetTotal is the sum of the package budgets (a decimal string, never a float).
	BudgetTotal string          `dynamodbav:"budget_total"`
	Currency    string          `dynamodbav:"currency"`
	Packages    []PackageBudget `dynamodbav:"packages,omitempty"`
	EndTime     string          `dynamodbav:"end_time,omitempty"`
	// ChangeID names the change in flight (empty when none is); ChangeKind says what it does
	// and ChangeExpires when its run's deadline has passed for certain: a change whose run died
	// blocks the buy no longer than that.
	ChangeID      string    `dynamodbav:"change_id,omitempty"`
	ChangeKind    string    `dynamodbav:"change_kind,omitempty"`
	ChangeExpires time.Time `dynamodbav:"change_expires,omitempty,unixtime"`
	// LastChangeID, LastOutcome and LastReason say how the last change ended (applied, denied,
	// rejected, failed, expired) and why.
	LastChangeID string    `dynamodbav:"last_change_id,omitempty"`
	LastOutcome  string    `dynamodbav:"last_outcome,omitempty"`
	LastReason   string    `dynamodbav:"last_reason,omitempty"`
	UpdatedAt    time.Time `dynamodbav:"updated_at"`
}

// PackageBudget is one seller package and its budget (a decimal string).
type PackageBudget struct {
	PackageID string `dynamodbav:"package_id" json:"package_id"`
	Budget    string `dynamodbav:"budget" json:"budget"`
}

// The buy states; BuyStateCanceled is the one after which a buy takes no change.
const (
	BuyStateActive   = "active"
	BuyStatePaused   = "paused"
	BuyStateCanceled = "canceled"
)

// OutcomeContradicted is a change's outcome when the seller answered success but its answer
// shows the buy not as the change asked (still active after a cancel, another budget): the
// buy's state records what the seller said, and the change's reason is the finding.
const OutcomeContradicted = "contradicted"

// PlacedStatus is the status of a placed buy in state (active, paused or canceled).
func PlacedStatus(state string) workflow.Status {
	switch state {
	case BuyStatePaused:
		return workflow.StatusPaused
	case BuyStateCanceled:
		return workflow.StatusCanceled
	}
	return workflow.StatusCompleted
}

// ChangeRefusedError is a BeginChange the buy's state refuses: a change is in flight, or the
// buy is canceled. Current is the state as it is.
type ChangeRefusedError struct {
	Current  *BuyState
	Canceled bool
}

func (e *ChangeRefusedError) Error() string {
	if e.Canceled {
		return fmt.Sprintf("record: media buy %s is canceled", e.Current.OperationID)
	}
	return fmt.Sprintf("record: media buy %s has change %s in flight", e.Current.OperationID, e.Current.ChangeID)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ChangeRefusedError) Is(target error) bool { return target == ErrConflict }

// ErrStaleRevision reports an ApplyChange whose revision is below the one recorded.
var ErrStaleRevision = errors.New("record: the seller's revision is below the one recorded")
