package reconcile

import "context"

// Shard is a worker's run: one seller's pass of plan m.Plan, in its own invocation, as the
// queue's worker will run it (its SQS handler is not built yet, so only the tests call it). It
// returns an error only when the seller's pending operations cannot be read.
func (s *Service) Shard(ctx context.Context, m ShardMessage) (Summary, error) {
	r := s.newRun(ctx)
	defer s.flush(ctx, r)
	err := s.shard(ctx, r, m, nil)
	s.logSummary(ctx, r, "reconciliation shard")
	return *r.sum, err
}
