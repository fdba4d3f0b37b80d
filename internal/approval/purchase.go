package approval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/buyflow/buyflow/internal/approvalcore"
	"github.com/buyflow/buyflow/internal/record"
)

// purchase reads what the approver is asked to buy. The packages come from the payload the
// operation's governance check approved, which the create stage sends as it is stored (both
// are write-once); an operation that no check stored a payload for shows the submitted
// media_buy, which is what the create stage then sends. The verdict and conditions come from
// the check's event on the timeline.
func (s *Base) Purchase(ctx context.Context, op *record.Operation) (approvalcore.Purchase, error) {
	if op.Kind == record.KindModification {
		return s.change(ctx, op)
	}
	payload, err := s.checkedPayload(ctx, op)
	if err != nil {
		return approvalcore.Purchase{}, err
	}
	p, err := approvalcore.ParsePurchase(payload, op.Currency)
	if err != nil {
		return approvalcore.Purchase{}, fmt.Errorf("approval: what operation %s buys: %w", op.ID, err)
	}
	if p.Governance, err = s.Verdict(ctx, op); err != nil {
		return approvalcore.Purchase{}, err
	}
	return p, nil
}

func (s *Base) checkedPayload(ctx context.Context, op *record.Operation) ([]byte, error) {
	if op.GovernanceCheckID != "" {
		in, err := s.Cfg.Ledger.GetIntent(ctx, op.Tenant, op.ID, record.CheckedIntentPrefix+op.GovernanceCheckID)
		switch {
		case err == nil:
			return in.Request, nil
		case !errors.Is(err, record.ErrNotFound):
			return nil, fmt.Errorf("approval: read checked payload of operation %s: %w", op.ID, err)
		}
	}
	var req struct {
		MediaBuy json.RawMessage `json:"media_buy"`
	}
	if err := json.Unmarshal(op.Request, &req); err != nil || len(bytes.TrimSpace(req.MediaBuy)) == 0 {
		return nil, fmt.Errorf("approval: operation %s has no stored media_buy", op.ID)
	}
	return req.MediaBuy, nil
}

// verdict returns what the operation's latest governance check that decided (proceed or
// needs_approval) said.
func (s *Base) Verdict(ctx context.Context, op *record.Operation) (approvalcore.Verdict, error) {
	var v approvalcore.Verdict
	err := s.eachEvent(ctx, op.Tenant, op.ID, func(ev record.Event) {
		if ev.Type != record.EventGovernanceCheck {
			return
		}
		var d struct {
			Verdict    string `json:"verdict"`
			Decision   string `json:"decision"`
			Conditions []struct {
				Field         string          `json:"field"`
				RequiredValue json.RawMessage `json:"required_value"`
				Reason        string          `json:"reason"`
			} `json:"conditions"`
		}
		if json.Unmarshal(ev.Detail, &d) != nil || d.Decision == "" || d.Verdict == "" {
			return
		}
		v = approvalcore.Verdict{Verdict: d.Verdict}
		for _, c := range d.Conditions {
			v.Conditions = append(v.Conditions, approvalcore.Condition{Field: record.Clip(c.Field, 200), Reason: record.Clip(c.Reason, 300),
				NeedsPerson: len(bytes.TrimSpace(c.RequiredValue)) == 0 || string(bytes.TrimSpace(c.RequiredValue)) == "null"})
		}
	})
	return v, err
}

// eachEvent calls fn on every event of the operation's timeline, oldest first.
func (s *Base) eachEvent(ctx context.Context, tenant, opID string, fn func(record.Event)) error {
	cursor := ""
	for page := 0; page < 200; page++ {
		p, err := s.Cfg.Ledger.ListEvents(ctx, tenant, opID, record.MaxListLimit, cursor)
		if err != nil {
			return fmt.Errorf("approval: read timeline of operation %s: %w", opID, err)
		}
		for _, ev := range p.Items {
			fn(ev)
		}
		if p.Cursor == "" {
			return nil
		}
		cursor = p.Cursor
	}
	return nil
}

// change reads what the approver of a change to a placed buy decides: the record the modify
// stage stored when it asked (write-once), with governance's verdict on the change.
func (s *Base) change(ctx context.Context, op *record.Operation) (approvalcore.Purchase, error) {
	in, err := s.Cfg.Ledger.GetIntent(ctx, op.Tenant, op.ID, record.ChangeReviewIntent)
	if err != nil {
		return approvalcore.Purchase{}, fmt.Errorf("approval: read what change %s does: %w", op.ID, err)
	}
	c, v, err := approvalcore.ParseChange(in.Request)
	if err != nil {
		return approvalcore.Purchase{}, fmt.Errorf("approval: what change %s does: %w", op.ID, err)
	}
	return approvalcore.Purchase{Change: &c, Governance: v}, nil
}
