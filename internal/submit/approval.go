package submit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/buy"
	"github.com/buyflow/buyflow/internal/record"
)

// latestApproval finds the operation's latest approval request on its timeline and reads it;
// errNoApproval says no person was asked. also, when set, sees every event of the walk: what
// else the view reads from the timeline costs no second walk.
func (s *Service) latestApproval(ctx context.Context, tenant, opID string, also func(record.Event)) (*api.Approval, error) {
	var last struct {
		ApprovalID string `json:"approval_id"`
		Round      int    `json:"round"`
		Escalation bool   `json:"escalation"`
		CampaignID string `json:"campaign_id"`
	}
	var requestedAt time.Time
	cursor := ""
	for page := 0; page < 200; page++ {
		p, err := s.ledger.ListEvents(ctx, tenant, opID, record.MaxListLimit, cursor)
		if err != nil {
			return nil, fmt.Errorf("submit: timeline of %s: %w", opID, err)
		}
		for _, ev := range p.Items {
			if also != nil {
				also(ev)
			}
			if ev.Type != record.EventApprovalRequested {
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
		return nil, fmt.Errorf("submit: approval of %s: %w", opID, err)
	}
	// Approvals are keyed by id alone: one that is not this tenant's operation's (or the
	// campaign's whose request this leg's timeline records) is not shown.
	mine := a.OperationID == opID || (a.CampaignID != "" && a.CampaignID == last.CampaignID)
	if a.Tenant != tenant || !mine {
		return nil, errNoApproval
	}
	v := buy.ApprovalOf(a)
	v.RequestedAt, v.Round, v.Escalation = buy.RFC3339(requestedAt), last.Round, last.Escalation
	return v, nil
}

var errNoApproval = errors.New("submit: no approval")
