package notify

import (
	"context"
	"fmt"

	"github.com/buyflow/buyflow/internal/approval"
	"github.com/buyflow/buyflow/internal/approvalcore"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/workflow"
)

// requestCampaign is Request for a campaign: one approval for the legs the release gate would
// buy (in.Legs), after every leg's governance check. The approval's amount is their total, the
// one the gate compared with the threshold, and it names them; every one of them moves to
// awaiting_approval (a leg governance let through waits too: nothing is created before the
// decision), the request is recorded on the campaign's timeline and each of theirs, and one
// Slack request lists them. A leg the gate left out (denied, its check failed) is neither
// counted, shown nor moved. A retry converges as a buy's request does (the approval id derives
// from the token).
func (s *Service) requestCampaign(ctx context.Context, in workflow.CallbackInput) error {
	c, err := s.Campaign(ctx, in.Tenant, in.CampaignID)
	if err != nil {
		return err
	}
	if c.Record.Outcome != "" {
		return &workflow.TerminalError{Code: "campaign_ended", Reason: fmt.Sprintf("campaign %s is already %s; no approval is requested", c.Record.ID, c.Record.Outcome)}
	}
	covered := c.Open() // an execution started before the gate named its legs
	if len(in.Legs) > 0 {
		if covered, err = c.Covering(in.Legs); err != nil {
			return err
		}
	}
	// The page, Slack and the timelines say it when the total is what needs a person: legs
	// each under the threshold may add up to it.
	total, why, err := covered.Gate(s.Cfg.Policy.NeedsCampaign)
	if err != nil {
		return err
	}
	id := approval.ApprovalID(in.TaskToken)
	rd, known, err := s.roundOf(ctx, in.Tenant, in.CampaignID, id)
	if err != nil {
		return err
	}
	approvers, escalateTo := s.approversFor(rd, c.Record.Requester)
	if len(approvers) == 0 {
		return &workflow.TerminalError{Code: "no_approver", Reason: "no approver other than the requester is configured"}
	}
	a, err := s.createOnce(ctx, record.Approval{
		ID: id, Tenant: in.Tenant, CampaignID: in.CampaignID, TaskToken: in.TaskToken,
		Legs:      covered.LegIDs(),
		Approvers: approvers, EscalationApprovers: escalateTo, Requester: c.Record.Requester, Amount: total.Decimal(), Currency: total.Currency,
		Reason: string(approvalcore.ReasonCampaignLegs), ReasonText: why, ExpiresAt: s.Now().Add(s.timeout(rd, in.Config)),
	})
	if err != nil {
		return err
	}
	if err := s.Cfg.Ledger.SetCampaignApproval(ctx, in.Tenant, in.CampaignID, id); err != nil {
		return fmt.Errorf("notify: name approval %s on campaign %s: %w", id, in.CampaignID, err)
	}
	reason := a.Reason
	if a.ReasonText != "" {
		reason = a.ReasonText
	}
	requested := record.Event{
		Type: record.EventApprovalRequested, Actor: actorSystem, Amount: a.Amount, Currency: a.Currency, Reason: reason,
		Detail: approval.EventDetail{ApprovalID: id, Round: rd.Round, Escalation: rd.Escalation, Approvers: a.Approvers, CampaignID: in.CampaignID}.Raw(),
	}
	if !known {
		if err := s.Cfg.Ledger.AppendEvent(ctx, in.Tenant, in.CampaignID, requested); err != nil {
			return fmt.Errorf("notify: record request of approval %s: %w", id, err)
		}
	}
	for _, leg := range covered.Legs {
		// The move first: the leg's governance stage reads a request recorded after the leg's
		// last move into awaiting_approval as this approval's (its re-check after a slow one).
		if err := s.awaitApproval(ctx, leg, id); err != nil {
			return err
		}
		lh, err := s.History(ctx, in.Tenant, leg.ID)
		if err != nil {
			return err
		}
		if _, done := lh.ByID(id); !done {
			ev := requested
			ev.Amount, ev.Currency = leg.BudgetTotal, leg.Currency
			if err := s.Cfg.Ledger.AppendEvent(ctx, in.Tenant, leg.ID, ev); err != nil {
				return fmt.Errorf("notify: record request of approval %s on leg %s: %w", id, leg.ID, err)
			}
		}
	}
	if len(a.SlackMessages) == 0 && a.Status == record.ApprovalPending && s.Now().Before(a.ExpiresAt) {
		v, err := s.CampaignView(ctx, a, covered)
		if err != nil {
			return err
		}
		if err := s.postView(ctx, a, v); err != nil {
			return err
		}
	}
	s.Log.InfoContext(ctx, "campaign approval requested", "campaignId", in.CampaignID, "approvalId", id,
		"legs", len(covered.Legs), "round", rd.Round, "escalation", rd.Escalation, "approvers", len(a.Approvers), "expiresAt", a.ExpiresAt)
	return nil
}
