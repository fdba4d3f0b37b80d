package approve

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/approval"
	"github.com/buyflow/buyflow/internal/approvalcore"
	"github.com/buyflow/buyflow/internal/httpapi"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/workflow"
)

// InboxPrefix is the path of the IAM-authorized approver routes: GET InboxPrefix lists the
// approvals waiting for the caller, GET InboxPrefix/{approval_id} opens one.
const InboxPrefix = "/v1/approver/approvals"

// HandleInbox answers the IAM-authorized approver routes. The tenant is the caller's AWS
// account and the approver the id Policy.Identities gives the caller's IAM principal, both as
// API Gateway verified them (the local stack's dev headers stand in where its emulator has no
// IAM identity). An approver sees only pending approvals of their tenant that name them; any
// other approval id is "not found", the same answer as one that does not exist.
func (s *Service) handleInbox(ctx context.Context, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
	if m := strings.ToUpper(req.RequestContext.HTTP.Method); m != "GET" {
		resp := httpapi.Error(405, "method_not_allowed", "the approver routes are read-only: decide on the review page", "")
		resp.Headers["Allow"] = "GET"
		return resp
	}
	caller, err := httpapi.Identify(req, s.devTenantHeader)
	if err != nil {
		return httpapi.Error(401, "no_identity", "sign the request with SigV4 (IAM)", "")
	}
	approver, ok := s.Cfg.Policy.ApproverFor(caller.Principal)
	if !ok {
		return httpapi.Error(403, "not_an_approver", "your IAM identity is not mapped to an approver (the approval policy's identities)", "")
	}
	path := strings.TrimRight(req.RawPath, "/")
	id := req.PathParameters["approval_id"]
	if i := strings.Index(path, InboxPrefix+"/"); id == "" && i >= 0 {
		id = path[i+len(InboxPrefix)+1:]
	}
	switch {
	case id == "" && strings.HasSuffix(path, InboxPrefix):
		items, err := s.inbox(ctx, caller.Tenant, approver)
		if err != nil {
			s.Log.ErrorContext(ctx, "approver inbox failed", "err", err)
			return httpapi.Error(500, "internal", "buyflow could not list your approvals; try again", "")
		}
		return httpapi.JSON(200, api.Inbox{Approver: approver, Items: items})
	case id != "" && !strings.Contains(id, "/"):
		out, err := s.open(ctx, caller.Tenant, approver, id)
		if errors.Is(err, record.ErrNotFound) {
			return httpapi.Error(404, "not_found", "no approval with that id is waiting for you", "")
		}
		if err != nil {
			s.Log.ErrorContext(ctx, "approver open failed", "approvalId", safeID(id), "err", err)
			return httpapi.Error(500, "internal", "buyflow could not open the approval; try again", "")
		}
		return httpapi.JSON(200, out)
	}
	return httpapi.Error(404, "no_route", "no such approver route: GET "+InboxPrefix+" or "+InboxPrefix+"/{approval_id}", "")
}

// inbox lists the tenant's buys waiting for an approval and keeps the pending approvals that
// name approver. Buys are found by status (the ledger's status index), approvals by each buy's
// timeline: the ledger keeps no index of approvals by approver, and a tenant has few buys
// waiting for a person at once. A campaign's approval is found through its legs (each waits
// for it, its request on each leg's timeline) and listed once.
func (s *Service) inbox(ctx context.Context, tenant, approver string) ([]api.InboxItem, error) {
	items := []api.InboxItem{}
	listed := map[string]bool{}
	cursor := ""
	for page := 0; page < 50; page++ {
		p, err := s.Cfg.Ledger.ListOperations(ctx, tenant, record.ListOptions{Status: workflow.StatusAwaitingApproval, Limit: record.MaxListLimit, Cursor: cursor})
		if err != nil {
			return nil, fmt.Errorf("approve: list buys awaiting approval: %w", err)
		}
		for _, v := range p.Items {
			a, rd, err := s.waitingFor(ctx, tenant, v.ID, approver)
			if errors.Is(err, record.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, err
			}
			if listed[a.ID] {
				continue
			}
			listed[a.ID] = true
			if a.CampaignID != "" {
				it, err := s.campaignItem(ctx, a, rd)
				if err != nil {
					return nil, err
				}
				items = append(items, it)
				continue
			}
			items = append(items, inboxItem(a, rd, v.SellerID, approval.Summary(v.ID, v.PONumber, v.Kind, v.ParentID)))
		}
		if p.Cursor == "" {
			break
		}
		cursor = p.Cursor
	}
	return items, nil
}

// waitingFor returns the operation's latest approval when it is pending, unexpired, of this
// tenant's operation (or of its campaign, covering it) and addressed to approver; otherwise
// record.ErrNotFound.
func (s *Service) waitingFor(ctx context.Context, tenant, opID, approver string) (*record.Approval, approval.Round, error) {
	h, err := s.History(ctx, tenant, opID)
	if err != nil {
		return nil, approval.Round{}, err
	}
	rd, ok := h.Latest()
	if !ok {
		return nil, approval.Round{}, record.ErrNotFound
	}
	a, err := s.Cfg.Ledger.GetApproval(ctx, rd.ApprovalID)
	if err != nil {
		return nil, approval.Round{}, err
	}
	if !s.addressed(a, tenant, approver) || !covers(a, opID) {
		return nil, approval.Round{}, record.ErrNotFound
	}
	return a, rd, nil
}

// addressed reports whether a is pending, unexpired, of tenant and asks approver, who did not
// request it.
func (s *Service) addressed(a *record.Approval, tenant, approver string) bool {
	return a.Tenant == tenant && a.Status == record.ApprovalPending && s.Now().Before(a.ExpiresAt) &&
		slices.Contains(a.Approvers, approver) && a.Requester != approver
}

// covers reports whether a decides operation opID: a buy's or a change's approval of it, or a
// campaign's approval covering that leg (an approval stored before approvals named their legs
// covers every leg whose timeline recorded its request).
func covers(a *record.Approval, opID string) bool {
	if a.CampaignID == "" {
		return a.OperationID == opID
	}
	return len(a.Legs) == 0 || slices.Contains(a.Legs, opID)
}

// campaignWaiting returns a, a campaign's approval, with its round on the campaign's timeline
// when it is the campaign's latest approval and waits for approver; otherwise
// record.ErrNotFound.
func (s *Service) campaignWaiting(ctx context.Context, a *record.Approval, tenant, approver string) (approval.Round, error) {
	if !s.addressed(a, tenant, approver) {
		return approval.Round{}, record.ErrNotFound
	}
	h, err := s.History(ctx, tenant, a.CampaignID)
	if err != nil {
		return approval.Round{}, err
	}
	rd, ok := h.Latest()
	if !ok || rd.ApprovalID != a.ID { // a later round replaced it
		return approval.Round{}, record.ErrNotFound
	}
	return rd, nil
}

// campaignItem is the inbox entry of a campaign's approval: the legs it covers and their
// total, as its page shows them.
func (s *Service) campaignItem(ctx context.Context, a *record.Approval, rd approval.Round) (api.InboxItem, error) {
	c, err := s.Campaign(ctx, a.Tenant, a.CampaignID)
	if err != nil {
		return api.InboxItem{}, err
	}
	v, err := s.CampaignView(ctx, a, c)
	if err != nil {
		return api.InboxItem{}, err
	}
	it := inboxItem(a, rd, v.Seller, v.Summary)
	it.CampaignID = a.CampaignID
	for _, l := range v.Legs {
		it.Legs = append(it.Legs, api.InboxLeg{OperationID: l.OperationID, Seller: l.Seller, PONumber: l.PONumber,
			Amount: l.Amount.String(), Why: l.Why, Governance: l.Governance.Label()})
	}
	return it, nil
}

// open returns one approval waiting for approver, with what is bought and a fresh review link.
func (s *Service) open(ctx context.Context, tenant, approver, id string) (api.InboxApproval, error) {
	if len(id) > approvalcore.MaxApprovalIDLen {
		return api.InboxApproval{}, record.ErrNotFound
	}
	a, err := s.Cfg.Ledger.GetApproval(ctx, id)
	if err != nil {
		return api.InboxApproval{}, err
	}
	if a.Tenant != tenant { // checked before anything else of the approval is read
		return api.InboxApproval{}, record.ErrNotFound
	}
	if a.CampaignID != "" {
		return s.openCampaign(ctx, a, approver)
	}
	a, rd, err := s.waitingFor(ctx, tenant, a.OperationID, approver)
	if err != nil {
		return api.InboxApproval{}, err
	}
	if a.ID != id { // a later round replaced it
		return api.InboxApproval{}, record.ErrNotFound
	}
	op, err := s.Cfg.Ledger.GetOperation(ctx, tenant, a.OperationID)
	if err != nil {
		return api.InboxApproval{}, err
	}
	pu, err := s.Purchase(ctx, op)
	if err != nil {
		return api.InboxApproval{}, err
	}
	link, err := s.reviewLink(a, approver)
	if err != nil {
		return api.InboxApproval{}, err
	}
	out := api.InboxApproval{InboxItem: inboxItem(a, rd, op.SellerID, approval.Summary(op.ID, op.PONumber, op.Kind, op.ParentID)), Flight: pu.Flight(), ProposalID: pu.ProposalID, ReviewURL: link}
	for _, pk := range pu.Packages {
		out.Packages = append(out.Packages, api.InboxPackage{Product: pk.Product, Flight: pk.Flight(), Budget: pk.Budget.String()})
	}
	if c := pu.Change; c != nil {
		for _, l := range c.Lines {
			out.Changes = append(out.Changes, api.InboxChangeLine(l))
		}
	}
	if g := pu.Governance; g.Verdict != "" {
		out.Governance = &api.InboxGovernance{Verdict: g.Verdict, Label: g.Label()}
		for _, c := range g.Conditions {
			out.Governance.Conditions = append(out.Governance.Conditions, api.InboxCondition{Field: c.Field, Reason: c.Reason, NeedsPerson: c.NeedsPerson})
		}
	}
	return out, nil
}

// openCampaign is open for a campaign's approval: every leg it covers, their total and the
// caller's review link.
func (s *Service) openCampaign(ctx context.Context, a *record.Approval, approver string) (api.InboxApproval, error) {
	rd, err := s.campaignWaiting(ctx, a, a.Tenant, approver)
	if err != nil {
		return api.InboxApproval{}, err
	}
	it, err := s.campaignItem(ctx, a, rd)
	if err != nil {
		return api.InboxApproval{}, err
	}
	link, err := s.reviewLink(a, approver)
	if err != nil {
		return api.InboxApproval{}, err
	}
	return api.InboxApproval{InboxItem: it, ReviewURL: link}, nil
}

// reviewLink is approver's own signed link to a's confirm page, the one Slack sent them.
func (s *Service) reviewLink(a *record.Approval, approver string) (string, error) {
	link, err := s.Cfg.Signer.Sign(s.Cfg.BaseURL, a.ID, approver, s.LinkExpiry(a))
	if err != nil {
		return "", fmt.Errorf("approve: sign review link of %s: %w", a.ID, err)
	}
	return link, nil
}

func inboxItem(a *record.Approval, rd approval.Round, seller, summary string) api.InboxItem {
	return api.InboxItem{
		ApprovalID: a.ID, OperationID: a.OperationID, Summary: summary, Seller: seller,
		Amount: approval.ToMoney(a.Amount, a.Currency).String(), Reason: approvalcore.ReasonCode(a.Reason).Label(),
		ReasonText: record.Clip(a.ReasonText, 500), Requester: a.Requester, ExpiresAt: a.ExpiresAt.UTC().Format(time.RFC3339), Escalation: rd.Escalation,
	}
}
