package record

import (
	"errors"
	"time"
)

// Phases of a seller pass stored in SweepProgress.
const (
	PhaseList    = "list"    // reading list_tasks pages
	PhaseCompare = "compare" // comparing operations
)

// SweepProgress is where the reconciliation sweep's last run left a seller: the account group in progress, the phase, the
// seller's list cursor or the last operation compared, and when a pass last completed. The
// zero value means "start from the beginning".
type SweepProgress struct {
	Seller     string    `dynamodbav:"seller"`
	Account    string    `dynamodbav:"account,omitempty"`
	Phase      string    `dynamodbav:"phase,omitempty"`
	ListCursor string    `dynamodbav:"list_cursor,omitempty"`
	AfterOp    string    `dynamodbav:"after_op,omitempty"`
	LastPass   time.Time `dynamodbav:"last_pass,omitempty"`
	// NotBefore is set when the seller's retry_after reaches past the run that got it: no run
	// calls the seller before then.
	NotBefore time.Time `dynamodbav:"not_before,omitempty"`
	// Fence is the reconcile lease fence of the run that wrote it.
	Fence     int64     `dynamodbav:"fence"`
	UpdatedAt time.Time `dynamodbav:"updated_at"`
}

// ErrStaleFence reports a progress write by a run whose lease was taken over.
var ErrStaleFence = errors.New("record: sweep progress written under a newer lease")
