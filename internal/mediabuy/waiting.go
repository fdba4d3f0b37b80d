package mediabuy

import (
	"context"
	"errors"
	"fmt"

	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/workflow"
)

// WaitingView says a buy is waiting for an agent that is unavailable: the agent's circuit
// breaker (internal/breaker) is open, so the buy's next step does not call it and waits.
type WaitingView struct {
	// Reason is seller_unavailable or governance_unavailable.
	Reason  string `json:"reason"`
	AgentID string `json:"agent_id"`
	// Since is when the agent's breaker opened; RetryAt is when it lets the next call through
	// (a probe: the buy goes on when it succeeds).
	Since   string `json:"since"`
	RetryAt string `json:"retry_at"`
}

// Reasons of a WaitingView.
const (
	waitingSeller     = "seller_unavailable"
	waitingGovernance = "governance_unavailable"
)

// waiting returns what the buy waits for when its next step calls an agent whose breaker is
// open, or nil. Governance is asked until the buy is placed; the seller from the create on.
func (s *Service) waiting(ctx context.Context, op *ledger.Operation) (*WaitingView, error) {
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
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("mediabuy: circuit breaker of %s: %w", agent, err)
	}
	retryAt := b.RetryAt
	switch b.State {
	case ledger.BreakerOpen:
	case ledger.BreakerHalfOpen:
		retryAt = b.ProbeUntil
	default:
		return nil, nil
	}
	return &WaitingView{Reason: reason, AgentID: agent, Since: rfc3339(b.OpenedAt), RetryAt: rfc3339(retryAt)}, nil
}
