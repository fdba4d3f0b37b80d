package ledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"

	"github.com/buyflow/buyflow/internal/record"
)

const skBreaker = "BREAKER"

func breakerPK(agentID string) string { return "BREAKER#" + agentID }

// GetBreaker reads agent agentID's breaker with a consistent read; an agent whose breaker was
// never written is ErrNotFound (a closed breaker with no failures).
func (s *Store) GetBreaker(ctx context.Context, agentID string) (record.Breaker, error) {
	if err := checkID("agent id", agentID); err != nil {
		return record.Breaker{}, err
	}
	item, err := s.getItem(ctx, key(breakerPK(agentID), skBreaker))
	if err != nil {
		if errors.Is(err, record.ErrNotFound) {
			return record.Breaker{}, err
		}
		return record.Breaker{}, fmt.Errorf("ledger: read breaker of %s: %w", agentID, err)
	}
	var b record.Breaker
	if err := attributevalue.UnmarshalMap(item, &b); err != nil {
		return record.Breaker{}, fmt.Errorf("ledger: decode breaker of %s: %w", agentID, err)
	}
	return b, nil
}

// PutBreaker writes b as the next version of its agent's breaker, in one conditional put:
//
//	attribute_not_exists(pk)   (b.Version == 0: nobody wrote it yet)
//	version = :read            (otherwise)
//
// It returns the stored breaker (Version one more than read), or an error matching
// ErrContention when another function wrote it since it was read: read again and decide again.
func (s *Store) PutBreaker(ctx context.Context, b record.Breaker) (record.Breaker, error) {
	if err := checkID("agent id", b.AgentID); err != nil {
		return record.Breaker{}, err
	}
	read := b.Version
	b.Version, b.UpdatedAt = read+1, s.now()
	item, err := attributevalue.MarshalMap(b)
	if err != nil {
		return record.Breaker{}, fmt.Errorf("ledger: encode breaker of %s: %w", b.AgentID, err)
	}
	for k, v := range key(breakerPK(b.AgentID), skBreaker) {
		item[k] = v
	}
	cond := keyFree()
	if read > 0 {
		cond = expression.Name("version").Equal(expression.Value(read))
	}
	err = s.putIf(ctx, item, cond)
	if err != nil {
		if failed, _ := conditionFailed(err); failed {
			return record.Breaker{}, fmt.Errorf("ledger: breaker of %s changed since version %d: %w", b.AgentID, read, record.ErrContention)
		}
		return record.Breaker{}, fmt.Errorf("ledger: write breaker of %s: %w", b.AgentID, err)
	}
	return b, nil
}
