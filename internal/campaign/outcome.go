package campaign

import (
	"github.com/buyflow/buyflow/internal/money"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/workflow"
)

// Status is a campaign's status, derived from its legs.
type Status string

// The campaign statuses. Running is the only one that is not final.
const (
	Running            Status = "running"
	Completed          Status = "completed"
	PartiallyCompleted Status = "partially_completed"
	Failed             Status = "failed"
	Canceled           Status = "canceled"
)

// LegState is what the outcome of a campaign depends on for one leg.
type LegState struct {
	SellerID string
	Status   workflow.Status
	Amount   money.Amount
}

// Outcome is a campaign's status and what its legs committed.
type Outcome struct {
	Status Status
	// Committed is the sum of the completed legs' amounts.
	Committed money.Amount
	// BySeller is the committed amount per seller, in the order sellers first appear in the
	// legs; a seller whose legs all failed is there with zero.
	BySeller []sellerAmount
}

// sellerAmount is what one seller committed.
type sellerAmount struct {
	SellerID string
	Amount   money.Amount
}

// Decide derives a campaign's outcome from its legs: running while any leg is; completed when
// every leg completed; partially_completed when some did and others failed or were rejected;
// canceled when every leg was canceled (the campaign was called off); failed otherwise (every
// leg failed, was denied, rejected or expired, or some of each). A committed amount counts only placed legs (completed, or paused
// since): a leg canceled by compensation committed nothing.
func Decide(currency string, legs []LegState) Outcome {
	out := Outcome{Committed: money.Amount{Currency: currency}}
	idx := map[string]int{}
	completed, canceled, pending := 0, 0, 0
	for _, l := range legs {
		i, seen := idx[l.SellerID]
		if !seen {
			i = len(out.BySeller)
			idx[l.SellerID] = i
			out.BySeller = append(out.BySeller, sellerAmount{SellerID: l.SellerID, Amount: money.Amount{Currency: currency}})
		}
		switch {
		case !l.Status.Terminal():
			pending++
		case l.Status.Placed(): // completed, or paused by a change since: committed either way
			completed++
			out.Committed = out.Committed.Add(l.Amount)
			out.BySeller[i].Amount = out.BySeller[i].Amount.Add(l.Amount)
		case l.Status == workflow.StatusCanceled:
			canceled++
		}
	}
	switch {
	case pending > 0:
		out.Status = Running
	case completed == len(legs):
		out.Status = Completed
	case completed > 0:
		out.Status = PartiallyCompleted
	case canceled == len(legs):
		out.Status = Canceled
	default:
		out.Status = Failed
	}
	return out
}

// approvalOutcome is a campaign's status once its one approval decided: a campaign whose
// approver rejected it, or whose approval expired, bought nothing and reads canceled, which
// its approval explains; otherwise status stands. a must be the campaign's (the caller read it
// by the id the campaign names).
func approvalOutcome(a *record.Approval, status Status) Status {
	if a != nil && status == Failed && (a.Status == record.ApprovalRejected || a.Status == record.ApprovalExpired) {
		return Canceled
	}
	return status
}
