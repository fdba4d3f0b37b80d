package approve

import (
	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/record"
)

// recordDecision records a decision the ledger just took: one ApprovalDecided and one
// ApprovalLatency sample (request stored → decision, both on the ledger's clock) by Outcome,
// and one ApprovalRejected for a rejection. It runs once per decision, never for a retried
// hand-over or a lost race.
func (s *Service) recordDecision(a *record.Approval) {
	outcome := metrics.Dims{"Outcome": string(a.Status)}
	s.Cfg.Metrics.Count(metrics.ApprovalDecided, outcome, 1)
	if !a.CreatedAt.IsZero() && !a.DecidedAt.Before(a.CreatedAt) {
		s.Cfg.Metrics.Duration(metrics.ApprovalLatency, outcome, a.DecidedAt.Sub(a.CreatedAt))
	}
	if a.Status == record.ApprovalRejected {
		s.Cfg.Metrics.Count(metrics.ApprovalRejected, nil, 1)
	}
}
