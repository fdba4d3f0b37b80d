package workflow

import (
	"fmt"
	"slices"
)

// Status is the lifecycle status of one media-buy operation.
type Status string

// The operation statuses. Seller task statuses map onto submitted, working and input_required;
// the terminal ones are completed, failed, rejected, canceled and expired. A placed buy's status
// then follows its applied changes: paused (and completed again on a resume), canceled.
const (
	StatusRequested          Status = "requested"
	StatusCheckingGovernance Status = "checking_governance"
	StatusAwaitingApproval   Status = "awaiting_approval"
	StatusCreating           Status = "creating"
	StatusSubmitted          Status = "submitted"
	StatusWorking            Status = "working"
	StatusInputRequired      Status = "input_required"
	StatusCompleted          Status = "completed"
	StatusFailed             Status = "failed"
	StatusRejected           Status = "rejected"
	StatusCanceled           Status = "canceled"
	StatusExpired            Status = "expired"
	// StatusPaused is a placed buy the seller paused on a change buyflow sent: placed, delivering
	// nothing until a resume moves it back to completed.
	StatusPaused Status = "paused"
)

// Statuses lists every status in lifecycle order.
var Statuses = []Status{
	StatusRequested, StatusCheckingGovernance, StatusAwaitingApproval, StatusCreating,
	StatusSubmitted, StatusWorking, StatusInputRequired,
	StatusCompleted, StatusFailed, StatusRejected, StatusCanceled, StatusExpired, StatusPaused,
}

// endings are the terminal statuses every live status may move to: a failure, a refusal, a
// cancellation or a lapsed deadline can happen at any stage.
var endings = []Status{StatusFailed, StatusRejected, StatusCanceled, StatusExpired}

// Transitions is the legal transition table: the statuses each status may move to. A status
// absent from the table (every terminal one but completed) has no successor.
var Transitions = map[Status][]Status{
	StatusRequested:          with(StatusCheckingGovernance, StatusAwaitingApproval, StatusCreating),
	StatusCheckingGovernance: with(StatusAwaitingApproval, StatusCreating),
	// An approval that outlived the governance token goes back to the check before any spend;
	// an approval of a seller's input-required request resumes the seller task.
	StatusAwaitingApproval: with(StatusCheckingGovernance, StatusCreating, StatusSubmitted, StatusWorking),
	// A campaign leg governance let through waits for the campaign's one approval when another
	// leg needs a person: nothing is created before that decision.
	StatusCreating:      with(StatusAwaitingApproval, StatusSubmitted, StatusWorking, StatusInputRequired, StatusCompleted),
	StatusSubmitted:     with(StatusWorking, StatusInputRequired, StatusCompleted),
	StatusWorking:       with(StatusInputRequired, StatusCompleted),
	StatusInputRequired: with(StatusAwaitingApproval, StatusSubmitted, StatusWorking, StatusCompleted),
	// The moves out of a placed buy, and only from it: a buy the seller completed that buyflow
	// then canceled at the seller (Compensate: governance findings required an undo, or the
	// approval of a seller's input-required request was rejected or expired after the seller
	// went on), and the changes the seller applied after placement (modify): a pause, a
	// cancellation. A resume is not here (FollowsChange).
	StatusCompleted: {StatusCanceled, StatusPaused},
	StatusPaused:    {StatusCanceled},
}

func with(next ...Status) []Status { return append(next, endings...) }

// FollowsChange reports whether a placed buy may move from → to after a change the seller
// answered: between completed and paused, or to canceled. The resume (paused → completed) is
// legal only here, never in Transitions: the table is every transition's condition, and a late
// completion of the buy's own create task must not resume a paused buy.
func FollowsChange(from, to Status) bool {
	return from.Placed() && from != to && (to.Placed() || to == StatusCanceled)
}

// Valid reports whether s is one of the declared statuses.
func (s Status) Valid() bool { return slices.Contains(Statuses, s) }

// Terminal reports whether s ends the operation's workflow: nothing waits on governance, an
// approver or the seller any more. Only a placed buy (Placed) moves on after it, and only on a
// change the seller applied.
func (s Status) Terminal() bool {
	switch s {
	case StatusCompleted, StatusFailed, StatusRejected, StatusCanceled, StatusExpired, StatusPaused:
		return true
	}
	return false
}

// Placed reports whether s is a buy live at the seller: completed (active) or paused. A placed
// buy takes changes, and its delivery is read.
func (s Status) Placed() bool { return s == StatusCompleted || s == StatusPaused }

// Pending reports whether an operation in status s still waits on someone (governance, an
// approver or the seller); reconciliation sweeps pending operations.
func (s Status) Pending() bool { return s.Valid() && !s.Terminal() }

// CanMove reports whether the transition from → to is legal.
func CanMove(from, to Status) bool { return slices.Contains(Transitions[from], to) }

// Predecessors returns the statuses from which a move to s is legal, in lifecycle order. The
// ledger uses them as the condition of a transition.
func Predecessors(s Status) []Status {
	var out []Status
	for _, from := range Statuses {
		if CanMove(from, s) {
			out = append(out, from)
		}
	}
	return out
}

// ParseStatus returns the status named by s, or an error naming the allowed values.
func ParseStatus(s string) (Status, error) {
	st := Status(s)
	if !st.Valid() {
		return "", fmt.Errorf("unknown status %q (one of %v)", s, Statuses)
	}
	return st, nil
}

// FromTaskStatus maps an AdCP task status (the A2A spellings the spec uses) to the operation
// status that follows it. ok is false for statuses that carry no lifecycle meaning for a buy
// (auth-required, unknown) or that are not AdCP statuses at all.
func FromTaskStatus(taskStatus string) (s Status, ok bool) {
	switch taskStatus {
	case "submitted":
		return StatusSubmitted, true
	case "working":
		return StatusWorking, true
	case "input-required":
		return StatusInputRequired, true
	case "completed":
		return StatusCompleted, true
	case "failed":
		return StatusFailed, true
	case "rejected":
		return StatusRejected, true
	case "canceled", "cancelled":
		return StatusCanceled, true
	}
	return "", false
}
