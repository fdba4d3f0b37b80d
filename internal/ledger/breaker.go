package ledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

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
// The put leaves its random id in last_write, so that a put the SDK retried after its response
// was lost is recognised as this one: were it taken for another writer's, the gate would decide
// again on its own write and count one failure twice.
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
	k := key(breakerPK(b.AgentID), skBreaker)
	for name, v := range k {
		item[name] = v
	}
	write := s.NewID()
	item[attrLastWrite] = &types.AttributeValueMemberS{Value: write}
	cond := keyFree()
	if read > 0 {
		cond = expression.Name("version").Equal(expression.Value(read))
	}
	err = s.putIf(ctx, item, cond)
	if err == nil {
		return b, nil
	}
	failed, old := conditionFailed(err)
	if !failed {
		return record.Breaker{}, fmt.Errorf("ledger: write breaker of %s: %w", b.AgentID, err)
	}
	if cur, rerr := s.oldOrRead(ctx, old, k); rerr == nil {
		var stored struct {
			LastWrite string `dynamodbav:"last_write"`
		}
		if attributevalue.UnmarshalMap(cur, &stored) == nil && stored.LastWrite == write {
			return b, nil // this very put, retried by the SDK after its response was lost
		}
	}
	return record.Breaker{}, fmt.Errorf("ledger: breaker of %s changed since version %d: %w", b.AgentID, read, record.ErrContention)
}
