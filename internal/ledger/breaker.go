package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// BreakerState is where an agent's circuit breaker stands.
type BreakerState string

// The breaker states: closed lets calls through, open lets none through until RetryAt,
// half_open lets one probe through (until ProbeUntil) and refuses the others.
const (
	BreakerClosed   BreakerState = "closed"
	BreakerOpen     BreakerState = "open"
	BreakerHalfOpen BreakerState = "half_open"
)

// Breaker is the circuit breaker of one agent (seller or governance agent), shared by every
// function that calls it. It is deployment-wide, like the agent registry: agent ids are. The
// rules that move it live in internal/breaker; the ledger stores it under a version so that
// concurrent functions never lose each other's updates.
type Breaker struct {
	AgentID string       `dynamodbav:"agent_id"`
	State   BreakerState `dynamodbav:"state"`
	// Failures counts the consecutive transient failures since FirstFailureAt.
	Failures       int       `dynamodbav:"failures"`
	FirstFailureAt time.Time `dynamodbav:"first_failure_at,omitempty"`
	// OpenedAt is when the breaker last opened from closed (a failed probe keeps it).
	OpenedAt time.Time `dynamodbav:"opened_at,omitempty"`
	// RetryAt is when an open breaker lets a probe through.
	RetryAt time.Time `dynamodbav:"retry_at,omitempty"`
	// ProbeUntil is when a half-open breaker's probe counts as lost and another may be claimed.
	ProbeUntil time.Time `dynamodbav:"probe_until,omitempty"`
	// LastError is the last transient failure counted (the agent's text, clipped).
	LastError string `dynamodbav:"last_error,omitempty"`
	// Trips counts the times the breaker opened from closed.
	Trips int64 `dynamodbav:"trips"`
	// Version counts the writes; every write is conditioned on the version it read (0: none).
	Version   int64     `dynamodbav:"version"`
	UpdatedAt time.Time `dynamodbav:"updated_at,omitempty"`
}

const skBreaker = "BREAKER"

func breakerPK(agentID string) string { return "BREAKER#" + agentID }

// GetBreaker reads agent agentID's breaker with a consistent read; an agent whose breaker was
// never written is ErrNotFound (a closed breaker with no failures).
func (s *Store) GetBreaker(ctx context.Context, agentID string) (Breaker, error) {
	if err := checkID("agent id", agentID); err != nil {
		return Breaker{}, err
	}
	item, err := s.getItem(ctx, key(breakerPK(agentID), skBreaker))
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return Breaker{}, err
		}
		return Breaker{}, fmt.Errorf("ledger: read breaker of %s: %w", agentID, err)
	}
	var b Breaker
	if err := attributevalue.UnmarshalMap(item, &b); err != nil {
		return Breaker{}, fmt.Errorf("ledger: decode breaker of %s: %w", agentID, err)
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
func (s *Store) PutBreaker(ctx context.Context, b Breaker) (Breaker, error) {
	if err := checkID("agent id", b.AgentID); err != nil {
		return Breaker{}, err
	}
	read := b.Version
	b.Version, b.UpdatedAt = read+1, s.now()
	item, err := attributevalue.MarshalMap(b)
	if err != nil {
		return Breaker{}, fmt.Errorf("ledger: encode breaker of %s: %w", b.AgentID, err)
	}
	for k, v := range key(breakerPK(b.AgentID), skBreaker) {
		item[k] = v
	}
	cond := expression.AttributeNotExists(expression.Name(AttrPK))
	if read > 0 {
		cond = expression.Name("version").Equal(expression.Value(read))
	}
	e, err := build(expression.NewBuilder().WithCondition(cond))
	if err != nil {
		return Breaker{}, err
	}
	_, err = s.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table), Item: item,
		ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	})
	if err != nil {
		if failed, _ := conditionFailed(err); failed {
			return Breaker{}, fmt.Errorf("ledger: breaker of %s changed since version %d: %w", b.AgentID, read, ErrContention)
		}
		return Breaker{}, fmt.Errorf("ledger: write breaker of %s: %w", b.AgentID, err)
	}
	return b, nil
}
