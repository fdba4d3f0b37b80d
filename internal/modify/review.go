package modify

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/approvalcore"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/workflow"
)

// storeReview writes, once, what the approver of the change is shown: the buy, each line the
// change changes (now and after, from the plan governance checked), and governance's verdict.
// The notify and approve functions read it (record.ChangeReviewIntent); a retried check keeps
// the first record.
func (s *Service) storeReview(ctx context.Context, r *run, p *frozenPlan, res *adcp.GovernanceResult) error {
	rec := reviewRecord(r, p, res)
	raw, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("modify: encode the review of %s: %w", r.op.ID, err)
	}
	if _, _, err := approvalcore.ParseChange(raw); err != nil {
		return &workflow.TerminalError{Code: "unreadable_review", Reason: fmt.Sprintf("change %s cannot be shown to an approver exactly: %v", r.op.ID, err)}
	}
	_, _, err = s.ledger.PutIntent(ctx, record.Intent{Tenant: r.op.Tenant, OperationID: r.op.ID, Task: record.ChangeReviewIntent,
		IdempotencyKey: "review-" + r.op.ID, Request: raw, CreatedAt: s.now()})
	if err != nil {
		return &workflow.TransientError{Reason: fmt.Sprintf("store the review of %s: %v", r.op.ID, err)}
	}
	return nil
}

// reviewRecord lists what the change changes, line by line.
func reviewRecord(r *run, p *frozenPlan, res *adcp.GovernanceResult) approvalcore.ChangeRecord {
	rec := approvalcore.ChangeRecord{BuyID: r.parent.ID, MediaBuyID: r.parent.MediaBuyID, Kind: string(r.change.Kind), Summary: p.Summary,
		Currency: r.parent.Currency, BudgetBefore: p.Before, BudgetAfter: p.After,
		Governance: approvalcore.VerdictRecord{Verdict: res.Verdict}}
	if p.Before != p.After {
		rec.Lines = append(rec.Lines, approvalcore.ChangeRecordLine{What: "Total budget", Before: p.Before, After: p.After, Amount: true})
	}
	before := map[string]string{}
	for _, pk := range p.PackagesBefore {
		before[pk.PackageID] = pk.Budget
	}
	for _, pk := range p.Packages {
		if b, ok := before[pk.PackageID]; ok && b != pk.Budget && len(p.Packages) > 1 {
			rec.Lines = append(rec.Lines, approvalcore.ChangeRecordLine{What: "Package " + pk.PackageID, Before: b, After: pk.Budget, Amount: true})
		}
	}
	if r.change.Kind == KindEndTime {
		rec.Lines = append(rec.Lines, approvalcore.ChangeRecordLine{What: "End of the flight", Before: orElse(p.EndTimeBefore, "as booked"), After: p.EndTime})
	}
	if p.StateBefore != p.State || r.change.Kind == KindCancel {
		rec.Lines = append(rec.Lines, approvalcore.ChangeRecordLine{What: "Delivery", Before: string(orElse(p.StateBefore, StateActive)), After: string(p.State)})
	}
	if len(rec.Lines) == 0 { // a budget change that moves nothing: still say what it is
		rec.Lines = append(rec.Lines, approvalcore.ChangeRecordLine{What: "Total budget", Before: p.Before, After: p.After, Amount: true})
	}
	for _, c := range res.Conditions {
		req := strings.TrimSpace(string(c.RequiredValue))
		rec.Governance.Conditions = append(rec.Governance.Conditions, approvalcore.ConditionRecord{Field: record.Clip(c.Field, 200),
			Reason: record.Clip(c.Reason, 300), NeedsPerson: req == "" || req == "null"})
	}
	return rec
}

func orElse[T ~string](s, def T) T {
	if s == "" {
		return def
	}
	return s
}

// approvedByPerson reports whether an approver approved this change: its timeline holds the
// approve function's decision event with outcome approved.
func (s *Service) approvedByPerson(ctx context.Context, r *run) (bool, error) {
	cursor := ""
	for page := 0; page < 20; page++ {
		p, err := s.ledger.ListEvents(ctx, r.op.Tenant, r.op.ID, record.MaxListLimit, cursor)
		if err != nil {
			return false, &workflow.TransientError{Reason: fmt.Sprintf("read the timeline of %s: %v", r.op.ID, err)}
		}
		for _, ev := range p.Items {
			var d struct {
				Outcome string `json:"outcome"`
			}
			if ev.Type == record.EventDecision && json.Unmarshal(ev.Detail, &d) == nil && d.Outcome == string(record.ApprovalApproved) {
				return true, nil
			}
		}
		if p.Cursor == "" {
			break
		}
		cursor = p.Cursor
	}
	return false, nil
}
