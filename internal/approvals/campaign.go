package approvals

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/buyflow/buyflow/internal/approvalcore"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/money"
	"github.com/buyflow/buyflow/internal/workflow"
)

// A campaign's approval is one request, one page and one decision for every leg of a campaign
// (ledger.Approval.CampaignID instead of OperationID). Its own events (requested, viewed,
// refused, decided, expired) are on the campaign's timeline: the ledger's events under the
// campaign id. The request and the decision are also written on every leg's timeline, where
// the leg's projection, its governance re-check and finance read them.

// timelineOf is the id of the timeline that holds a's own events: its operation's, or its
// campaign's.
func timelineOf(a *ledger.Approval) string {
	if a.CampaignID != "" {
		return a.CampaignID
	}
	return a.OperationID
}

// campaignSubject is a campaign and its legs' operations, in the campaign's order.
type campaignSubject struct {
	rec  *ledger.Campaign
	legs []*ledger.Operation
}

func (s *service) campaignSubject(ctx context.Context, tenant, id string) (campaignSubject, error) {
	rec, err := s.cfg.Ledger.GetCampaign(ctx, tenant, id)
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		return campaignSubject{}, &workflow.TerminalError{Code: "campaign_not_found", Reason: "no campaign " + id + " for tenant " + tenant}
	case err != nil:
		return campaignSubject{}, fmt.Errorf("approvals: read campaign %s: %w", id, err)
	}
	out := campaignSubject{rec: rec}
	for _, leg := range rec.Legs {
		op, err := s.operation(ctx, tenant, leg.OperationID)
		if err != nil {
			return campaignSubject{}, err
		}
		out.legs = append(out.legs, op)
	}
	return out, nil
}

// total is the sum of the legs' amounts: each leg's amount is the buy's one amount, as its
// operation stores it. An amount that cannot be read exactly stops the request.
func (c campaignSubject) total() (money.Amount, error) {
	sum := money.Amount{Currency: c.rec.Currency}
	for _, op := range c.legs {
		a, err := money.ParseDecimal(op.BudgetTotal, c.rec.Currency)
		if err != nil || op.Currency != c.rec.Currency {
			return money.Amount{}, &workflow.TerminalError{Code: "invalid_amount",
				Reason: fmt.Sprintf("leg %s's amount %q %s cannot be shown exactly in %s", op.ID, op.BudgetTotal, op.Currency, c.rec.Currency)}
		}
		sum = sum.Add(a)
	}
	return sum, nil
}

// requestCampaign is Request for a campaign: one approval for every leg, after every leg's
// governance check. Every leg moves to awaiting_approval (a leg governance let through waits
// too: nothing is created before the decision), the request is recorded on the campaign's
// timeline and each leg's, and one Slack request lists every leg. A retry converges as a
// buy's request does (the approval id derives from the token).
func (s *Notifier) requestCampaign(ctx context.Context, in workflow.CallbackInput) error {
	c, err := s.campaignSubject(ctx, in.Tenant, in.CampaignID)
	if err != nil {
		return err
	}
	if c.rec.Outcome != "" {
		return &workflow.TerminalError{Code: "campaign_ended", Reason: fmt.Sprintf("campaign %s is already %s; no approval is requested", c.rec.ID, c.rec.Outcome)}
	}
	total, err := c.total()
	if err != nil {
		return err
	}
	id := ApprovalID(in.TaskToken)
	h, err := s.history(ctx, in.Tenant, in.CampaignID)
	if err != nil {
		return err
	}
	rd, known := h.roundOf(id)
	approvers, escalateTo, timeout, err := s.audience(rd, c.rec.Requester, in.Config)
	if err != nil {
		return err
	}
	a, err := s.storeApproval(ctx, ledger.Approval{
		ID: id, Tenant: in.Tenant, CampaignID: in.CampaignID, TaskToken: in.TaskToken,
		Approvers: approvers, EscalationApprovers: escalateTo, Requester: c.rec.Requester, Amount: total.Decimal(), Currency: total.Currency,
		Reason: string(approvalcore.ReasonCampaignLegs), ExpiresAt: s.now().Add(timeout),
	})
	if err != nil {
		return err
	}
	if a.Tenant != in.Tenant || a.CampaignID != in.CampaignID || a.TaskToken != in.TaskToken {
		return &workflow.TerminalError{Code: "approval_mismatch", Reason: fmt.Sprintf("approval %s belongs to another subject", id)}
	}
	if err := s.cfg.Ledger.SetCampaignApproval(ctx, in.Tenant, in.CampaignID, id); err != nil {
		return fmt.Errorf("approvals: name approval %s on campaign %s: %w", id, in.CampaignID, err)
	}
	requested := ledger.Event{
		Type: ledger.EventApprovalRequested, Actor: actorSystem, Amount: a.Amount, Currency: a.Currency, Reason: a.Reason,
		Detail: eventDetail{ApprovalID: id, Round: rd.Round, Escalation: rd.Escalation, Approvers: a.Approvers, CampaignID: in.CampaignID}.raw(),
	}
	if !known {
		if err := s.cfg.Ledger.AppendEvent(ctx, in.Tenant, in.CampaignID, requested); err != nil {
			return fmt.Errorf("approvals: record request of approval %s: %w", id, err)
		}
	}
	for _, leg := range c.legs {
		if leg.Status.Terminal() {
			continue // a leg that ended (denied) is not bought whatever the decision
		}
		// The move first: the leg's governance stage reads a request recorded after the leg's
		// last move into awaiting_approval as this approval's (its re-check after a slow one).
		if err := s.awaitApproval(ctx, leg, id); err != nil {
			return err
		}
		lh, err := s.history(ctx, in.Tenant, leg.ID)
		if err != nil {
			return err
		}
		if _, done := lh.byID(id); !done {
			ev := requested
			ev.Amount, ev.Currency = leg.BudgetTotal, leg.Currency
			if err := s.cfg.Ledger.AppendEvent(ctx, in.Tenant, leg.ID, ev); err != nil {
				return fmt.Errorf("approvals: record request of approval %s on leg %s: %w", id, leg.ID, err)
			}
		}
	}
	if len(a.SlackMessages) == 0 && a.Status == ledger.ApprovalPending && s.now().Before(a.ExpiresAt) {
		v, err := s.campaignView(ctx, a, c)
		if err != nil {
			return err
		}
		if err := s.postView(ctx, a, v); err != nil {
			return err
		}
	}
	s.log.InfoContext(ctx, "campaign approval requested", "campaignId", in.CampaignID, "approvalId", id,
		"legs", len(c.legs), "round", rd.Round, "escalation", rd.Escalation, "approvers", len(a.Approvers), "expiresAt", a.ExpiresAt)
	return nil
}

// campaignView is what the page and Slack show of a campaign's approval: every leg (seller, PO
// number, amount, why it asks a person, what governance said) and the total.
func (s *service) campaignView(ctx context.Context, a *ledger.Approval, c campaignSubject) (approvalcore.Approval, error) {
	v := view(a, nil)
	v.OperationID = c.rec.ID
	name := c.rec.Name
	if name == "" {
		name = c.rec.ID
	}
	v.Summary = "Campaign " + name + ", " + strconv.Itoa(len(c.legs)) + " legs, plan " + c.rec.PlanID
	var sellers []string
	for _, op := range c.legs {
		amount, err := money.ParseDecimal(op.BudgetTotal, op.Currency)
		if err != nil {
			return approvalcore.Approval{}, fmt.Errorf("approvals: leg %s amount: %w", op.ID, err)
		}
		verdict, err := s.verdict(ctx, op)
		if err != nil {
			return approvalcore.Approval{}, err
		}
		v.Legs = append(v.Legs, approvalcore.Leg{
			OperationID: op.ID, Seller: op.SellerID, PONumber: op.PONumber,
			Amount: approvalcore.Money{Minor: amount.Minor, Currency: op.Currency}, Why: legWhy(op), Governance: verdict,
		})
		if !slices.Contains(sellers, op.SellerID) {
			sellers = append(sellers, op.SellerID)
		}
	}
	v.Seller = strings.Join(sellers, ", ")
	return v, nil
}

// legWhy is why one leg asks a person: the reason its governance check recorded (the policy's
// threshold, conditions, the buyer's request), or that it does not on its own.
func legWhy(op *ledger.Operation) string {
	if r := strings.TrimSpace(op.Reason); r != "" {
		return ledger.Clip(r, 300)
	}
	return "governance approved it; it needs no approval on its own"
}

// legIDs are the operations of the approval's campaign (none for a buy's approval). A campaign
// that cannot be read gives none: the decision event is then on the campaign's timeline only,
// and the legs' failures or creates still record what happened to each.
func (s *service) legIDs(ctx context.Context, a *ledger.Approval) []string {
	if a.CampaignID == "" {
		return nil
	}
	rec, err := s.cfg.Ledger.GetCampaign(ctx, a.Tenant, a.CampaignID)
	if err != nil {
		s.log.WarnContext(ctx, "campaign not readable", "approvalId", a.ID, "campaignId", a.CampaignID, "err", err)
		return nil
	}
	out := make([]string, len(rec.Legs))
	for i, leg := range rec.Legs {
		out[i] = leg.OperationID
	}
	return out
}

// review is what the confirm page shows of a: the buy with what it buys, or the campaign with
// every leg.
func (s *service) review(ctx context.Context, a *ledger.Approval, op *ledger.Operation) (approvalcore.Approval, error) {
	if a.CampaignID != "" {
		c, err := s.campaignSubject(ctx, a.Tenant, a.CampaignID)
		if err != nil {
			return approvalcore.Approval{}, err
		}
		return s.campaignView(ctx, a, c)
	}
	v := view(a, op)
	var err error
	if v.Purchase, err = s.purchase(ctx, op); err != nil {
		return approvalcore.Approval{}, err
	}
	return v, nil
}

// audience is who a round asks (the approvers, or the escalation approvers, never the
// requester), who is asked next if nobody decides, and the round's timeout.
func (s *service) audience(rd round, requester string, cfg workflow.RunConfig) (approvers, escalateTo []string, timeout time.Duration, err error) {
	group := s.cfg.Policy.Approvers
	if rd.Escalation {
		group = s.cfg.Policy.EscalationApprovers
	}
	// The requester may not approve their own buy, so they get no link.
	approvers = slices.DeleteFunc(slices.Clone(group), func(a string) bool { return a == requester })
	if len(approvers) == 0 {
		return nil, nil, 0, &workflow.TerminalError{Code: "no_approver", Reason: "no approver other than the requester is configured"}
	}
	timeout = time.Duration(cfg.ApprovalTimeoutSeconds) * time.Second
	if et := time.Duration(s.cfg.Policy.EscalationTimeoutSeconds) * time.Second; rd.Escalation && et > 0 && et < timeout {
		timeout = et
	}
	if !rd.Escalation && s.cfg.Policy.OnTimeout == TimeoutEscalate {
		escalateTo = slices.DeleteFunc(slices.Clone(s.cfg.Policy.EscalationApprovers), func(a string) bool { return a == requester })
	}
	return approvers, escalateTo, timeout, nil
}

// storeApproval creates the approval once, or reads the one a concurrent or earlier attempt
// with the same token created.
func (s *service) storeApproval(ctx context.Context, want ledger.Approval) (*ledger.Approval, error) {
	a, err := s.cfg.Ledger.GetApproval(ctx, want.ID)
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		a, err = s.cfg.Ledger.CreateApproval(ctx, want)
		if errors.Is(err, ledger.ErrConflict) {
			a, err = s.cfg.Ledger.GetApproval(ctx, want.ID)
		}
		if err != nil {
			return nil, fmt.Errorf("approvals: create approval %s: %w", want.ID, err)
		}
	case err != nil:
		return nil, fmt.Errorf("approvals: read approval %s: %w", want.ID, err)
	}
	return a, nil
}
