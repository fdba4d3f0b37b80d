package submit

import (
	"context"
	"errors"
	"fmt"

	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/buy"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/workflow"
)

// Reasons of a WaitingView.
const (
	waitingSeller     = "seller_unavailable"
	waitingGovernance = "governance_unavailable"
)

// waiting returns what the buy waits for when its next step calls an agent whose breaker is
// open, or nil. Governance is asked until the buy is placed; the seller from the create on.
func (s *Service) waiting(ctx context.Context, op *record.Operation) (*api.Waiting, error) {
	agent, reason := "", ""
	switch op.Status {
	case workflow.StatusRequested, workflow.StatusCheckingGovernance:
		agent, reason = op.GovernanceAgentID, waitingGovernance
	case workflow.StatusCreating, workflow.StatusSubmitted, workflow.StatusWorking:
		agent, reason = op.SellerID, waitingSeller
	}
	if agent == "" {
		return nil, nil
	}
	b, err := s.ledger.GetBreaker(ctx, agent)
	if errors.Is(err, record.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("submit: circuit breaker of %s: %w", agent, err)
	}
	retryAt := b.RetryAt
	switch b.State {
	case record.BreakerOpen:
	case record.BreakerHalfOpen:
		retryAt = b.ProbeUntil
	default:
		return nil, nil
	}
	return &api.Waiting{Reason: reason, AgentID: agent, Since: buy.RFC3339(b.OpenedAt), RetryAt: buy.RFC3339(retryAt)}, nil
}
