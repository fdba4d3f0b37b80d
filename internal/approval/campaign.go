package approval

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/buyflow/buyflow/internal/approvalcore"
	"github.com/buyflow/buyflow/internal/money"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/workflow"
)

// A campaign's approval is one request, one page and one decision for every leg of a campaign
// (record.Approval.CampaignID instead of OperationID). Its own events (requested, viewed,
// refused, decided, expired) are on the campaign's timeline: the ledger's events under the
// campaign id. The request and the decision are also written on every leg's timeline, where
// the leg's projection, its governance re-check and finance read them.

// TimelineOf is the id of the timeline that holds a's own events: its operation's, or its
// campaign's.
func TimelineOf(a *record.Approval) string {
	if a.CampaignID != "" {
		return a.CampaignID
	}
	return a.OperationID
}

// Campaign is a campaign and its legs' operations, in the campaign's order: the subject of a
// campaign's approval.
type Campaign struct {
	Record *record.Campaign
	Legs   []*record.Operation
}

// Campaign reads the tenant's campaign id and every leg's operation.
func (s *Base) Campaign(ctx context.Context, tenant, id string) (Campaign, error) {
	rec, err := s.Cfg.Ledger.GetCampaign(ctx, tenant, id)
	switch {
	case errors.Is(err, record.ErrNotFound):
		return Campaign{}, &workflow.TerminalError{Code: "campaign_not_found", Reason: "no campaign " + id + " for tenant " + tenant}
	case err != nil:
		return Campaign{}, fmt.Errorf("approval: read campaign %s: %w", id, err)
	}
	out := Campaign{Record: rec}
	for _, leg := range rec.Legs {
		op, err := s.Operation(ctx, tenant, leg.OperationID)
		if err != nil {
			return Campaign{}, err
		}
		out.Legs = append(out.Legs, op)
	}
	return out, nil
}

// Total is the sum of the legs' amounts: each leg's amount is the buy's one amount, as its
// operation stores it. An amount that cannot be read exactly in the campaign's currency stops
// the request: a person approves the exact amount that is bought.
func (c Campaign) Total() (money.Amount, error) {
	sum := money.Amount{Currency: c.Record.Currency}
	for _, op := range c.Legs {
		a, err := money.ParseDecimal(op.BudgetTotal, c.Record.Currency)
		if err != nil || op.Currency != c.Record.Currency {
			return money.Amount{}, &workflow.TerminalError{Code: "invalid_amount",
				Reason: fmt.Sprintf("leg %s's amount %q %s cannot be shown exactly in %s", op.ID, op.BudgetTotal, op.Currency, c.Record.Currency)}
		}
		sum = sum.Add(a)
	}
	return sum, nil
}

// Gate is the campaign approval gate's arithmetic on c's legs (the legs it would buy): their
// total, and needs' sentence (Policy.NeedsCampaign) when that total is at or over the
// threshold ("" when it is not). The campaign function's release decides with it and notify's request records the
// same total and sentence on the approval, so the approver, the requester and finance see the
// amount the gate compared. A total that cannot be summed exactly is Total's error.
func (c Campaign) Gate(needs func(money.Amount) (bool, string)) (money.Amount, string, error) {
	total, err := c.Total()
	if err != nil {
		return money.Amount{}, "", err
	}
	if over, why := needs(total); over {
		return total, why, nil
	}
	return total, "", nil
}

// Covering is c with only the legs named by ids (the operations an approval covers), in the
// campaign's order. An id that is not one of c's legs, or named twice, is an
// *workflow.InvalidInputError: an approval never covers what the campaign does not buy.
func (c Campaign) Covering(ids []string) (Campaign, error) {
	want := make(map[string]bool, len(ids))
	for _, id := range ids {
		if want[id] {
			return Campaign{}, &workflow.InvalidInputError{Field: "legs", Reason: "names leg " + id + " twice"}
		}
		want[id] = true
	}
	out := Campaign{Record: c.Record}
	for _, op := range c.Legs {
		if want[op.ID] {
			out.Legs = append(out.Legs, op)
			delete(want, op.ID)
		}
	}
	for id := range want {
		return Campaign{}, &workflow.InvalidInputError{Field: "legs", Reason: id + " is not a leg of campaign " + c.Record.ID}
	}
	return out, nil
}

// LegIDs are the operation ids of c's legs, in its order.
func (c Campaign) LegIDs() []string {
	ids := make([]string, len(c.Legs))
	for i, op := range c.Legs {
		ids[i] = op.ID
	}
	return ids
}

// Open is c with the legs that have not ended: what an approval requested before its gate
// named the legs it covers (an execution started before that) covered.
func (c Campaign) Open() Campaign {
	out := Campaign{Record: c.Record}
	for _, op := range c.Legs {
		if !op.Status.Terminal() {
			out.Legs = append(out.Legs, op)
		}
	}
	return out
}

// CoveredBy is c with the legs a covers (all of them for an approval stored before approvals
// named their legs).
func (c Campaign) CoveredBy(a *record.Approval) (Campaign, error) {
	if len(a.Legs) == 0 {
		return c, nil
	}
	return c.Covering(a.Legs)
}

// CampaignView is what the page and Slack show of a campaign's approval: every leg it covers
// (seller, PO number, amount, why it asks a person, what governance said) and their total, the
// approval's amount. A leg the gate would not buy is not listed: the legs shown add up to the
// total shown.
func (s *Base) CampaignView(ctx context.Context, a *record.Approval, c Campaign) (approvalcore.Approval, error) {
	c, err := c.CoveredBy(a)
	if err != nil {
		return approvalcore.Approval{}, err
	}
	v := View(a, nil)
	name := c.Record.Name
	if name == "" {
		name = c.Record.ID
	}
	v.Summary = "Campaign " + name + ", " + legsOf(len(c.Legs), len(c.Record.Legs)) + ", plan " + c.Record.PlanID
	var sellers []string
	for _, op := range c.Legs {
		amount, err := money.ParseDecimal(op.BudgetTotal, op.Currency)
		if err != nil {
			return approvalcore.Approval{}, fmt.Errorf("approval: leg %s amount: %w", op.ID, err)
		}
		verdict, err := s.Verdict(ctx, op)
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

// legsOf says how many legs an approval covers: "2 legs", or "2 of 3 legs" when the gate left
// some out.
func legsOf(covered, all int) string {
	n := strconv.Itoa(covered)
	if covered != all {
		n += " of " + strconv.Itoa(all)
	}
	if all == 1 {
		return n + " leg"
	}
	return n + " legs"
}

// legWhy is why one leg asks a person: the reason its governance check recorded (the policy's
// threshold, conditions, the buyer's request), or that it does not on its own.
func legWhy(op *record.Operation) string {
	if r := strings.TrimSpace(op.Reason); r != "" {
		return record.Clip(r, 300)
	}
	return "governance approved it; it needs no approval on its own"
}

// Review is what a page or a request shows of a: the buy with what it buys, or the campaign
// with every leg. Part of a buy is never shown as if it were all of it: an error means nothing
// can be shown.
func (s *Base) Review(ctx context.Context, a *record.Approval, op *record.Operation) (approvalcore.Approval, error) {
	if a.CampaignID != "" {
		c, err := s.Campaign(ctx, a.Tenant, a.CampaignID)
		if err != nil {
			return approvalcore.Approval{}, err
		}
		return s.CampaignView(ctx, a, c)
	}
	v := View(a, op)
	var err error
	if v.Purchase, err = s.Purchase(ctx, op); err != nil {
		return approvalcore.Approval{}, err
	}
	return v, nil
}

// LegIDs are the operations a's decision applies to: the legs it covers, or, for an approval
// stored before approvals named their legs, every leg of its campaign (none for a buy's
// approval). A campaign that cannot be read gives none: the decision is then on the campaign's
// timeline only, and each leg's failure or create still records what happened to it.
func (s *Base) LegIDs(ctx context.Context, a *record.Approval) []string {
	if a.CampaignID == "" {
		return nil
	}
	if len(a.Legs) > 0 {
		return a.Legs
	}
	rec, err := s.Cfg.Ledger.GetCampaign(ctx, a.Tenant, a.CampaignID)
	if err != nil {
		s.Log.WarnContext(ctx, "campaign not readable", "approvalId", a.ID, "campaignId", a.CampaignID, "err", err)
		return nil
	}
	out := make([]string, len(rec.Legs))
	for i, leg := range rec.Legs {
		out[i] = leg.OperationID
	}
	return out
}
