package notify

import (
	"github.com/buyflow/buyflow/internal/metrics"
)

// recordExpiry records an approval this call marked expired (not a retry that found it so).
func (s *Service) recordExpiry() {
	s.Cfg.Metrics.Count(metrics.Timeouts, metrics.Dims{"Kind": metrics.TimeoutApproval}, 1)
}
