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
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ApprovalStatus is the state of an approval request.
type ApprovalStatus string

// The approval statuses; every one but pending is final.
const (
	ApprovalPending  ApprovalStatus = "pending"
	ApprovalApproved ApprovalStatus = "approved"
	ApprovalRejected ApprovalStatus = "rejected"
	ApprovalExpired  ApprovalStatus = "expired"
)

// SlackRef locates one Slack message posted for an approval (to update it after the decision).
type SlackRef struct {
	Channel string `dynamodbav:"channel" json:"channel"`
	TS      string `dynamodbav:"ts" json:"ts"`
}

// Approval is a human approval request. Its key is the approval id alone (a link carries only
// the id), so callers must compare Tenant with the caller's tenant where one is known. TaskToken
// is internal: it never leaves AWS.
type Approval struct {
	ID          string `dynamodbav:"approval_id"`
	Tenant      string `dynamodbav:"tenant"`
	OperationID string `dynamodbav:"operation_id"`
	// CampaignID is set, instead of OperationID, on a campaign's approval: one decision for
	// every leg of the campaign.
	CampaignID string `dynamodbav:"campaign_id,omitempty"`
	// Legs are the operations a campaign's approval covers, in the campaign's order: the legs
	// its gate would buy (not a leg governance denied or whose check failed). Amount is their
	// total, the one the gate compared with the policy's threshold.
	Legs                []string `dynamodbav:"legs,omitempty"`
	TaskToken           string   `dynamodbav:"task_token"`
	Approvers           []string `dynamodbav:"approvers,omitempty"`
	EscalationApprovers []string `dynamodbav:"escalation_approvers,omitempty"`
	Requester           string   `dynamodbav:"requester,omitempty"`
	Amount              string   `dynamodbav:"amount,omitempty"`
	Currency            string   `dynamodbav:"currency,omitempty"`
	Reason              string   `dynamodbav:"reason,omitempty"`
	// ReasonText is what the party that asked for the approval said (the seller's
	// input-required message, the governance agent's conditions), shown to the approvers.
	ReasonText    string         `dynamodbav:"reason_text,omitempty"`
	ExpiresAt     time.Time      `dynamodbav:"expires_at"`
	Status        ApprovalStatus `dynamodbav:"status"`
	Decider       string         `dynamodbav:"decider,omitempty"`
	DecidedAt     time.Time      `dynamodbav:"decided_at,omitempty"`
	Comment       string         `dynamodbav:"comment,omitempty"`
	SlackMessages []SlackRef     `dynamodbav:"slack_messages,omitempty"`
	CreatedAt     time.Time      `dynamodbav:"created_at"`
	// DecisionID is the random id of the Decide that recorded the decision (internal): a
	// decision whose response was lost is retried by the SDK and then fails its own condition;
	// finding its id here tells the ledger the decision is in.
	DecisionID string `dynamodbav:"decision_id,omitempty"`
}

type approvalItem struct {
	PK string `dynamodbav:"pk"`
	SK string `dynamodbav:"sk"`
	// ExpiresMS is ExpiresAt in Unix milliseconds: conditions compare numbers, not time strings
	// (RFC 3339 with trimmed fractions does not sort lexically).
	ExpiresMS int64 `dynamodbav:"expires_at_ms"`
	Approval
}

// CreateApproval stores a new pending approval (attribute_not_exists(pk)); a taken id is a
// *ConflictError.
func (s *Store) CreateApproval(ctx context.Context, a Approval) (*Approval, error) {
	if err := checkID("approval id", a.ID); err != nil {
		return nil, err
	}
	if err := checkID("tenant", a.Tenant); err != nil {
		return nil, err
	}
	if a.TaskToken == "" || a.ExpiresAt.IsZero() {
		return nil, fmt.Errorf("%w: approval needs a task token and an expiry", ErrInvalidArgument)
	}
	a.Status, a.Decider, a.DecidedAt, a.Comment = ApprovalPending, "", time.Time{}, ""
	a.CreatedAt, a.ExpiresAt = s.now(), a.ExpiresAt.UTC()
	av, err := attributevalue.MarshalMap(approvalItem{PK: approvalPK(a.ID), SK: skApproval, ExpiresMS: a.ExpiresAt.UnixMilli(), Approval: a})
	if err != nil {
		return nil, fmt.Errorf("ledger: encode approval %s: %w", a.ID, err)
	}
	e, err := build(expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name(AttrPK))))
	if err != nil {
		return nil, err
	}
	_, err = s.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table), Item: av, ConditionExpression: e.Condition(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	})
	if err != nil {
		if failed, _ := conditionFailed(err); failed {
			return nil, &ConflictError{What: "approval " + a.ID}
		}
		return nil, fmt.Errorf("ledger: put approval %s: %w", a.ID, err)
	}
	return &a, nil
}

// GetApproval returns the approval id (consistent read) or ErrNotFound. Check Tenant.
func (s *Store) GetApproval(ctx context.Context, id string) (*Approval, error) {
	if err := checkID("approval id", id); err != nil {
		return nil, err
	}
	item, err := s.getItem(ctx, key(approvalPK(id), skApproval))
	if err != nil {
		return nil, fmt.Errorf("ledger: get approval %s: %w", id, err)
	}
	return decodeApproval(item)
}

// Decision is what an approver (or the timeout path) decides.
type Decision struct {
	Outcome ApprovalStatus // approved, rejected or expired
	By      string
	Comment string
}

// DecisionError reports a decision that lost: Current is the approval as it is now (already
// decided by Current.Decider at Current.DecidedAt, or still pending but expired).
type DecisionError struct{ Current *Approval }

func (e *DecisionError) Error() string {
	if e.Current.Status == ApprovalPending {
		return fmt.Sprintf("ledger: approval %s expired at %s", e.Current.ID, e.Current.ExpiresAt.Format(time.RFC3339))
	}
	return fmt.Sprintf("ledger: approval %s already %s by %s at %s", e.Current.ID, e.Current.Status,
		e.Current.Decider, e.Current.DecidedAt.Format(time.RFC3339))
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *DecisionError) Is(target error) bool { return target == ErrConflict }

// Decide records a decision once: a conditional pending → approved|rejected (which also requires
// expires_at > now) or pending → expired. It returns the decided approval (with the task token,
// for SendTaskSuccess/Failure), or a *DecisionError carrying the current record.
func (s *Store) Decide(ctx context.Context, id string, d Decision) (*Approval, error) {
	if err := checkID("approval id", id); err != nil {
		return nil, err
	}
	switch d.Outcome {
	case ApprovalApproved, ApprovalRejected, ApprovalExpired:
	default:
		return nil, fmt.Errorf("%w: decision outcome %q", ErrInvalidArgument, d.Outcome)
	}
	if d.By == "" {
		return nil, fmt.Errorf("%w: decision without a decider", ErrInvalidArgument)
	}
	now := s.now()
	cond := expression.Name(attrStatus).Equal(expression.Value(string(ApprovalPending)))
	if d.Outcome != ApprovalExpired {
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
	e, err := build(expression.NewBuilder().WithCondition(cond).WithUpdate(up))
	if err != nil {
		return nil, err
	}
	k := key(approvalPK(id), skApproval)
	out, err := s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: k,
		ConditionExpression: e.Condition(), UpdateExpression: e.Update(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err != nil {
		failed, old := conditionFailed(err)
		if !failed {
			return nil, fmt.Errorf("ledger: decide approval %s: %w", id, err)
		}
		item, rerr := s.oldOrRead(ctx, old, k)
		if errors.Is(rerr, ErrNotFound) {
			return nil, fmt.Errorf("ledger: decide approval %s: %w", id, ErrNotFound)
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
		return nil, &DecisionError{Current: cur}
	}
	return decodeApproval(out.Attributes)
}

// SetSlackMessages records where the approval's Slack messages were posted.
func (s *Store) SetSlackMessages(ctx context.Context, id string, refs []SlackRef) error {
	if err := checkID("approval id", id); err != nil {
		return err
	}
	e, err := build(expression.NewBuilder().
		WithCondition(expression.AttributeExists(expression.Name(AttrPK))).
		WithUpdate(expression.Set(expression.Name("slack_messages"), expression.Value(refs))))
	if err != nil {
		return err
	}
	_, err = s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.table), Key: key(approvalPK(id), skApproval),
		ConditionExpression: e.Condition(), UpdateExpression: e.Update(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
	})
	if err != nil {
		if failed, _ := conditionFailed(err); failed {
			return fmt.Errorf("ledger: set slack messages of approval %s: %w", id, ErrNotFound)
		}
		return fmt.Errorf("ledger: set slack messages of approval %s: %w", id, err)
	}
	return nil
}

func decodeApproval(item map[string]types.AttributeValue) (*Approval, error) {
	var it approvalItem
	if err := attributevalue.UnmarshalMap(item, &it); err != nil {
		return nil, fmt.Errorf("ledger: decode approval: %w", err)
	}
	return &it.Approval, nil
}
