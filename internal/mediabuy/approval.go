package mediabuy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/buyflow/buyflow/internal/ledger"
)

// ApprovalView is a buy's latest approval as its buyer may see it: who is asked (approver ids
// as configured: Slack user or group ids), until when, what happens if nobody decides, and,
// once decided, who decided and when. It never carries a link, a signature or a task token.
type ApprovalView struct {
	ApprovalID string `json:"approval_id"`
	// CampaignID is set when the approval is a campaign's: one decision for all its legs.
	CampaignID string `json:"campaign_id,omitempty"`
	// Status is pending, approved, rejected or expired.
	Status      string   `json:"status"`
	Approvers   []string `json:"approvers"`
	RequestedAt string   `json:"requested_at"`
	ExpiresAt   string   `json:"expires_at"`
	// Reason is why a person is asked (policy_threshold, governance_conditions, ...).
	Reason string `json:"reason,omitempty"`
	// Round counts the requests of this buy from 0; Escalation is true when this request went
	// to the escalation approvers after an earlier one expired.
	Round      int  `json:"round"`
	Escalation bool `json:"escalation,omitempty"`
	// EscalatesTo lists who is asked next if this request expires; empty means the buy is
	// rejected when it expires.
	EscalatesTo []string `json:"escalates_to,omitempty"`
	DecidedBy   string   `json:"decided_by,omitempty"`
	DecidedAt   string   `json:"decided_at,omitempty"`
}

// latestApproval finds the operation's latest approval request on its timeline and reads it;
// errNoApproval says no person was asked.
func (s *Service) latestApproval(ctx context.Context, tenant, opID string) (*ApprovalView, error) {
	var last struct {
		ApprovalID string `json:"approval_id"`
		Round      int    `json:"round"`
		Escalation bool   `json:"escalation"`
		CampaignID string `json:"campaign_id"`
	}
	var requestedAt time.Time
	cursor := ""
	for page := 0; page < 200; page++ {
		p, err := s.ledger.ListEvents(ctx, tenant, opID, ledger.MaxListLimit, cursor)
		if err != nil {
			return nil, fmt.Errorf("mediabuy: timeline of %s: %w", opID, err)
		}
		for _, ev := range p.Items {
			if ev.Type != ledger.EventApprovalRequested {
				continue
			}
			if json.Unmarshal(ev.Detail, &last) != nil {
				continue
			}
			requestedAt = ev.At
		}
		if p.Cursor == "" {
			break
		}
		cursor = p.Cursor
	}
	if last.ApprovalID == "" {
		return nil, errNoApproval
	}
	a, err := s.ledger.GetApproval(ctx, last.ApprovalID)
	if err != nil {
		return nil, fmt.Errorf("mediabuy: approval of %s: %w", opID, err)
	}
	// Approvals are keyed by id alone: one that is not this tenant's operation's (or the
	// campaign's whose request this leg's timeline records) is not shown.
	mine := a.OperationID == opID || (a.CampaignID != "" && a.CampaignID == last.CampaignID)
	if a.Tenant != tenant || !mine {
		return nil, errNoApproval
	}
	v := ApprovalViewOf(a)
	v.RequestedAt, v.Round, v.Escalation = rfc3339(requestedAt), last.Round, last.Escalation
	return v, nil
}

// ApprovalViewOf is the API view of a stored approval (without the request's time and round,
// which its subject's timeline holds).
func ApprovalViewOf(a *ledger.Approval) *ApprovalView {
	v := &ApprovalView{
		ApprovalID: a.ID, CampaignID: a.CampaignID, Status: string(a.Status), Approvers: a.Approvers, Reason: a.Reason,
		ExpiresAt: rfc3339(a.ExpiresAt), EscalatesTo: a.EscalationApprovers,
	}
	if a.Status == ledger.ApprovalApproved || a.Status == ledger.ApprovalRejected {
		v.DecidedBy, v.DecidedAt = a.Decider, rfc3339(a.DecidedAt)
	}
	return v
}

var errNoApproval = errors.New("mediabuy: no approval")

func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}
