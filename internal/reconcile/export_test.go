package reconcile

import "context"

// Shard is a worker's run of one shard (Shards with a batch of one), for the tests that follow
// one seller's pass; it returns the shard's failure.
func (s *Service) Shard(ctx context.Context, m ShardMessage) (Summary, error) {
	sum, errs := s.Shards(ctx, []ShardMessage{m})
	return sum, errs[0]
}
