package approve

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/buyflow/buyflow/internal/approval"
	"github.com/buyflow/buyflow/internal/approvalcore"
	"github.com/buyflow/buyflow/internal/httpapi"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/workflow"
)

// InboxPrefix is the path of the IAM-authorized approver routes: GET InboxPrefix lists the
// approvals waiting for the caller, GET InboxPrefix/{approval_id} opens one.
const InboxPrefix = "/v1/approver/approvals"

// InboxItem is one approval waiting for the caller.
type InboxItem struct {
	ApprovalID  string `json:"approval_id"`
	OperationID string `json:"operation_id"`
	Summary     string `json:"summary"`
	Seller      string `json:"seller_id"`
	// Amount is the buy's amount as the page shows it ("USD 20,000.50").
	Amount     string `json:"amount"`
	Reason     string `json:"reason"`
	Requester  string `json:"requester"`
	ExpiresAt  string `json:"expires_at"`
	Escalation bool   `json:"escalation,omitempty"`
}

// InboxApproval is one approval opened by its approver: what is bought, what governance said,
// and the caller's own signed review link (the one Slack sent them, freshly signed) to decide
// it on the confirm page.
type InboxApproval struct {
	InboxItem
	Flight     string           `json:"flight,omitempty"`
	ProposalID string           `json:"proposal_id,omitempty"`
	Packages   []InboxPackage   `json:"packages,omitempty"`
	Governance *InboxGovernance `json:"governance,omitempty"`
	ReviewURL  string           `json:"review_url"`
}

// InboxPackage is one package of an opened approval.
type InboxPackage struct {
	Product string `json:"product_id"`
	Flight  string `json:"flight"`
	Budget  string `json:"budget"`
}

// InboxGovernance is governance's verdict on an opened approval.
type InboxGovernance struct {
	Verdict    string           `json:"verdict"`
	Label      string           `json:"label"`
	Conditions []InboxCondition `json:"conditions,omitempty"`
}

// InboxCondition is one governance condition.
type InboxCondition struct {
	Field       string `json:"field"`
	Reason      string `json:"reason,omitempty"`
	NeedsPerson bool   `json:"needs_person,omitempty"`
}

// InboxPage is the listing.
type InboxPage struct {
	Approver string      `json:"approver"`
	Items    []InboxItem `json:"items"`
}

// HandleInbox answers the IAM-authorized approver routes. The tenant is the caller's AWS
// account and the approver the id Policy.Identities gives the caller's IAM principal, both as
// API Gateway verified them (the local stack's dev headers stand in where its emulator has no
// IAM identity). An approver sees only pending approvals of their tenant that name them; any
// other approval id is "not found", the same answer as one that does not exist.
func (s *Approver) handleInbox(ctx context.Context, req events.APIGatewayV2HTTPRequest) events.APIGatewayV2HTTPResponse {
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
		return httpapi.JSON(200, InboxPage{Approver: approver, Items: items})
	case id != "" && !strings.Contains(id, "/"):
		out, err := s.open(ctx, caller.Tenant, approver, id)
		if errors.Is(err, ledger.ErrNotFound) {
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
// waiting for a person at once.
func (s *Approver) inbox(ctx context.Context, tenant, approver string) ([]InboxItem, error) {
	items := []InboxItem{}
	cursor := ""
	for page := 0; page < 50; page++ {
		p, err := s.Cfg.Ledger.ListOperations(ctx, tenant, ledger.ListOptions{Status: workflow.StatusAwaitingApproval, Limit: ledger.MaxListLimit, Cursor: cursor})
		if err != nil {
			return nil, fmt.Errorf("approve: list buys awaiting approval: %w", err)
		}
		for _, v := range p.Items {
			a, rd, err := s.waitingFor(ctx, tenant, v.ID, approver)
			if errors.Is(err, ledger.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, err
			}
			items = append(items, inboxItem(a, rd, v.SellerID, v.PONumber))
		}
		if p.Cursor == "" {
			break
		}
		cursor = p.Cursor
	}
	return items, nil
}

// waitingFor returns the operation's latest approval when it is pending, unexpired, of this
// tenant's operation and addressed to approver; otherwise ledger.ErrNotFound.
func (s *Approver) waitingFor(ctx context.Context, tenant, opID, approver string) (*ledger.Approval, approval.Round, error) {
	h, err := s.History(ctx, tenant, opID)
	if err != nil {
		return nil, approval.Round{}, err
	}
	rd, ok := h.Latest()
	if !ok {
		return nil, approval.Round{}, ledger.ErrNotFound
	}
	a, err := s.Cfg.Ledger.GetApproval(ctx, rd.ApprovalID)
	if err != nil {
		return nil, approval.Round{}, err
	}
	if a.Tenant != tenant || a.OperationID != opID || a.Status != ledger.ApprovalPending ||
		!s.Now().Before(a.ExpiresAt) || !slices.Contains(a.Approvers, approver) || a.Requester == approver {
		return nil, approval.Round{}, ledger.ErrNotFound
	}
	return a, rd, nil
}

// open returns one approval waiting for approver, with what is bought and a fresh review link.
func (s *Approver) open(ctx context.Context, tenant, approver, id string) (InboxApproval, error) {
	if len(id) > approvalcore.MaxApprovalIDLen {
		return InboxApproval{}, ledger.ErrNotFound
	}
	a, err := s.Cfg.Ledger.GetApproval(ctx, id)
	if err != nil {
		return InboxApproval{}, err
	}
	if a.Tenant != tenant { // checked before anything else of the approval is read
		return InboxApproval{}, ledger.ErrNotFound
	}
	a, rd, err := s.waitingFor(ctx, tenant, a.OperationID, approver)
	if err != nil {
		return InboxApproval{}, err
	}
	if a.ID != id { // a later round replaced it
		return InboxApproval{}, ledger.ErrNotFound
	}
	op, err := s.Cfg.Ledger.GetOperation(ctx, tenant, a.OperationID)
	if err != nil {
		return InboxApproval{}, err
	}
	pu, err := s.Purchase(ctx, op)
	if err != nil {
		return InboxApproval{}, err
	}
	link, err := s.Cfg.Signer.Sign(s.Cfg.BaseURL, a.ID, approver, s.LinkExpiry(a))
	if err != nil {
		return InboxApproval{}, fmt.Errorf("approve: sign review link of %s: %w", a.ID, err)
	}
	out := InboxApproval{InboxItem: inboxItem(a, rd, op.SellerID, op.PONumber), Flight: pu.Flight(), ProposalID: pu.ProposalID, ReviewURL: link}
	for _, pk := range pu.Packages {
		out.Packages = append(out.Packages, InboxPackage{Product: pk.Product, Flight: pk.Flight(), Budget: pk.Budget.String()})
	}
	if g := pu.Governance; g.Verdict != "" {
		out.Governance = &InboxGovernance{Verdict: g.Verdict, Label: g.Label()}
		for _, c := range g.Conditions {
			out.Governance.Conditions = append(out.Governance.Conditions, InboxCondition{Field: c.Field, Reason: c.Reason, NeedsPerson: c.NeedsPerson})
		}
	}
	return out, nil
}

func inboxItem(a *ledger.Approval, rd approval.Round, seller, po string) InboxItem {
	summary := "Media buy " + a.OperationID
	if po != "" {
		summary = "Media buy, PO " + po
	}
	return InboxItem{
		ApprovalID: a.ID, OperationID: a.OperationID, Summary: summary, Seller: seller,
		Amount: approval.ToMoney(a.Amount, a.Currency).String(), Reason: approvalcore.ReasonCode(a.Reason).Label(),
		Requester: a.Requester, ExpiresAt: a.ExpiresAt.UTC().Format(time.RFC3339), Escalation: rd.Escalation,
	}
}
