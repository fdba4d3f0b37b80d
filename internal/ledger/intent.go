package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Intent is the write-ahead record of one mutating seller call: the frozen request bytes and the
// seller idempotency_key, stored before the first attempt and reused by every retry.
type Intent struct {
	Tenant      string `dynamodbav:"tenant"`
	OperationID string `dynamodbav:"operation_id"`
	// Task is the AdCP task name ("create_media_buy", "update_media_buy#cancel", ...).
	Task           string    `dynamodbav:"task"`
	IdempotencyKey string    `dynamodbav:"idempotency_key"`
	Request        []byte    `dynamodbav:"request"`
	CreatedAt      time.Time `dynamodbav:"created_at"`
}

// CheckedIntentPrefix, followed by a governance check id, names the intent that holds the
// create_media_buy payload that check approved (conditions applied): what the create stage
// sends, and so what an approver is shown.
const CheckedIntentPrefix = "check_governance#"

// ChangeReviewIntent names the intent, on a change's operation, that holds what an approver
// of the change is shown (an approvalcore.ChangeRecord: the buy, each line before and after,
// governance's verdict), written once by the stage that asks for the approval.
const ChangeReviewIntent = "approval_subject#change"

type intentItem struct {
	PK string `dynamodbav:"pk"`
	SK string `dynamodbav:"sk"`
	Intent
}

// PutIntent stores in with attribute_not_exists(pk). If an intent for the same operation and task
// already exists, it is returned unchanged with created false (same-intent semantics: the caller
// must then send the stored bytes and key, not its own).
func (s *Store) PutIntent(ctx context.Context, in Intent) (stored *Intent, created bool, err error) {
	if err := checkID("tenant", in.Tenant); err != nil {
		return nil, false, err
	}
	if err := checkID("operation id", in.OperationID); err != nil {
		return nil, false, err
	}
	if in.Task == "" || in.IdempotencyKey == "" || len(in.Request) == 0 {
		return nil, false, fmt.Errorf("%w: intent needs a task, an idempotency key and the request bytes", ErrInvalidArgument)
	}
	if in.CreatedAt.IsZero() {
		in.CreatedAt = s.now()
	}
	k := key(opPK(in.Tenant, in.OperationID), skIntentPfx+in.Task)
	av, err := attributevalue.MarshalMap(intentItem{PK: opPK(in.Tenant, in.OperationID), SK: skIntentPfx + in.Task, Intent: in})
	if err != nil {
		return nil, false, fmt.Errorf("ledger: encode intent %s of operation %s: %w", in.Task, in.OperationID, err)
	}
	e, err := build(expression.NewBuilder().WithCondition(expression.AttributeNotExists(expression.Name(AttrPK))))
	if err != nil {
		return nil, false, err
	}
	_, err = s.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table), Item: av, ConditionExpression: e.Condition(),
		ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values(),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		return &in, true, nil
	}
	failed, old := conditionFailed(err)
	if !failed {
		return nil, false, fmt.Errorf("ledger: put intent %s of operation %s: %w", in.Task, in.OperationID, err)
	}
	item, err := s.oldOrRead(ctx, old, k)
	if err != nil {
		return nil, false, fmt.Errorf("ledger: put intent %s of operation %s: read existing: %w", in.Task, in.OperationID, err)
	}
	existing, err := decodeIntent(item)
	if err != nil {
		return nil, false, err
	}
	return existing, false, nil
}

// GetIntent returns the stored intent of the tenant's operation for task, or ErrNotFound.
func (s *Store) GetIntent(ctx context.Context, tenant, operationID, task string) (*Intent, error) {
	if err := checkID("tenant", tenant); err != nil {
		return nil, err
	}
	if err := checkID("operation id", operationID); err != nil {
		return nil, err
	}
	item, err := s.getItem(ctx, key(opPK(tenant, operationID), skIntentPfx+task))
	if err != nil {
		return nil, fmt.Errorf("ledger: get intent %s of operation %s: %w", task, operationID, err)
	}
	return decodeIntent(item)
}

func decodeIntent(item map[string]types.AttributeValue) (*Intent, error) {
	var it intentItem
	if err := attributevalue.UnmarshalMap(item, &it); err != nil {
		return nil, fmt.Errorf("ledger: decode intent: %w", err)
	}
	return &it.Intent, nil
}
