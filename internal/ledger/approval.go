package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/buyflow/buyflow/internal/record"
)

type approvalItem struct {
	PK string `dynamodbav:"pk"`
	SK string `dynamodbav:"sk"`
	// ExpiresMS is ExpiresAt in Unix milliseconds: conditions compare numbers, not time strings
	// (RFC 3339 with trimmed fractions does not sort lexically).
	ExpiresMS int64 `dynamodbav:"expires_at_ms"`
	record.Approval
}

// CreateApproval stores a new pending approval (attribute_not_exists(pk)); a taken id is a
// *ConflictError, but not the put's own retry after a lost response.
func (s *Store) CreateApproval(ctx context.Context, a record.Approval) (*record.Approval, error) {
	if err := checkID("approval id", a.ID); err != nil {
		return nil, err
	}
	if err := checkID("tenant", a.Tenant); err != nil {
		return nil, err
	}
	if a.TaskToken == "" || a.ExpiresAt.IsZero() {
		return nil, fmt.Errorf("%w: approval needs a task token and an expiry", record.ErrInvalidArgument)
	}
	a.Status, a.Decider, a.DecidedAt, a.Comment = record.ApprovalPending, "", time.Time{}, ""
	a.CreatedAt, a.ExpiresAt = s.now(), a.ExpiresAt.UTC()
	av, err := attributevalue.MarshalMap(approvalItem{PK: approvalPK(a.ID), SK: skApproval, ExpiresMS: a.ExpiresAt.UnixMilli(), Approval: a})
	if err != nil {
		return nil, fmt.Errorf("ledger: encode approval %s: %w", a.ID, err)
	}
	// The put leaves its random id in last_write: its own retry after a lost response is still
	// the put that created the approval, not a conflict.
	write := s.NewID()
	av[attrLastWrite] = &types.AttributeValueMemberS{Value: write}
	err = s.putIf(ctx, av, keyFree())
	if failed, old := conditionFailed(err); failed {
		cur, rerr := s.oldOrRead(ctx, old, key(approvalPK(a.ID), skApproval))
		if rerr == nil && wroteLast(cur, write) {
			return &a, nil
		}
		return nil, &record.ConflictError{What: "approval " + a.ID}
	}
	if err != nil {
		return nil, fmt.Errorf("ledger: put approval %s: %w", a.ID, err)
	}
	return &a, nil
}

// GetApproval returns the approval id (consistent read) or ErrNotFound. Check Tenant.
func (s *Store) GetApproval(ctx context.Context, id string) (*record.Approval, error) {
	if err := checkID("approval id", id); err != nil {
		return nil, err
	}
	item, err := s.getItem(ctx, key(approvalPK(id), skApproval))
	if err != nil {
		return nil, fmt.Errorf("ledger: get approval %s: %w", id, err)
	}
	return decodeApproval(item)
}

// Decide records a decision once: a conditional pending → approved|rejected (which also requires
// expires_at > now) or pending → expired. It returns the decided approval (with the task token,
// for SendTaskSuccess/Failure), or a *DecisionError carrying the current record.
func (s *Store) Decide(ctx context.Context, id string, d record.Decision) (*record.Approval, error) {
	if err := checkID("approval id", id); err != nil {
		return nil, err
	}
	switch d.Outcome {
	case record.ApprovalApproved, record.ApprovalRejected, record.ApprovalExpired:
	default:
		return nil, fmt.Errorf("%w: decision outcome %q", record.ErrInvalidArgument, d.Outcome)
	}
	if d.By == "" {
		return nil, fmt.Errorf("%w: decision without a decider", record.ErrInvalidArgument)
	}
	now := s.now()
	cond := expression.Name(attrStatus).Equal(expression.Value(string(record.ApprovalPending)))
	if d.Outcome != record.ApprovalExpired {
		cond = cond.And(expression.Name("expires_at_ms").GreaterThan(expression.Value(now.UnixMilli())))
	}
	decision := s.NewID()
	up := expression.Set(expression.Name(attrStatus), expression.Value(string(d.Outcome))).
		Set(expression.Name("decider"), expression.Value(d.By)).
		Set(expression.Name("decided_at"), expression.Value(now)).
		Set(expression.Name("decision_id"), expression.Value(decision))
	if d.Comment != "" {
		up = up.Set(expression.Name("comment"), expression.Value(d.Comment))
	}
	k := key(approvalPK(id), skApproval)
	out, err := s.update(ctx, k, cond, up, types.ReturnValueAllNew)
	if err != nil {
		failed, old := conditionFailed(err)
		if !failed {
			return nil, fmt.Errorf("ledger: decide approval %s: %w", id, err)
		}
		item, rerr := s.oldOrRead(ctx, old, k)
		if errors.Is(rerr, record.ErrNotFound) {
			return nil, fmt.Errorf("ledger: decide approval %s: %w", id, record.ErrNotFound)
		}
		if rerr != nil {
			return nil, fmt.Errorf("ledger: decide approval %s: read current: %w", id, rerr)
		}
		cur, derr := decodeApproval(item)
		if derr != nil {
			return nil, derr
		}
		if cur.DecisionID == decision {
			return cur, nil // this very decision, retried by the SDK after its response was lost
		}
		return nil, &record.DecisionError{Current: cur}
	}
	return decodeApproval(out)
}

// SetSlackMessages records where the approval's Slack messages were posted.
func (s *Store) SetSlackMessages(ctx context.Context, id string, refs []record.SlackRef) error {
	if err := checkID("approval id", id); err != nil {
		return err
	}
	_, err := s.update(ctx, key(approvalPK(id), skApproval), expression.AttributeExists(expression.Name(AttrPK)),
		expression.Set(expression.Name("slack_messages"), expression.Value(refs)), "")
	if err != nil {
		if failed, _ := conditionFailed(err); failed {
			return fmt.Errorf("ledger: set slack messages of approval %s: %w", id, record.ErrNotFound)
		}
		return fmt.Errorf("ledger: set slack messages of approval %s: %w", id, err)
	}
	return nil
}

func decodeApproval(item map[string]types.AttributeValue) (*record.Approval, error) {
	var it approvalItem
	if err := attributevalue.UnmarshalMap(item, &it); err != nil {
		return nil, fmt.Errorf("ledger: decode approval: %w", err)
	}
	return &it.Approval, nil
}
