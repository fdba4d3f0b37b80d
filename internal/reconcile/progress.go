package reconcile

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

	"github.com/buyflow/buyflow/internal/ledger"
)

// Phases of a seller pass stored in Progress.
const (
	PhaseList    = "list"    // reading list_tasks pages
	PhaseCompare = "compare" // comparing operations
)

// Progress is where the last run left a seller: the account group in progress, the phase, the
// seller's list cursor or the last operation compared, and when a pass last completed. The
// zero value means "start from the beginning".
type Progress struct {
	Seller     string    `dynamodbav:"seller"`
	Account    string    `dynamodbav:"account,omitempty"`
	Phase      string    `dynamodbav:"phase,omitempty"`
	ListCursor string    `dynamodbav:"list_cursor,omitempty"`
	AfterOp    string    `dynamodbav:"after_op,omitempty"`
	LastPass   time.Time `dynamodbav:"last_pass,omitempty"`
	// NotBefore is set when the seller's retry_after reaches past the run that got it: no run
	// calls the seller before then.
	NotBefore time.Time `dynamodbav:"not_before,omitempty"`
	// Fence is the reconcile lease fence of the run that wrote it.
	Fence     int64     `dynamodbav:"fence"`
	UpdatedAt time.Time `dynamodbav:"updated_at"`
}

// ProgressStore keeps each seller's Progress between runs.
type ProgressStore interface {
	// GetProgress returns the seller's progress, or the zero Progress when none is stored.
	GetProgress(ctx context.Context, seller string) (Progress, error)
	// PutProgress stores p unless a run holding a newer lease (a higher fence) stored one:
	// then it returns ErrStaleFence.
	PutProgress(ctx context.Context, p Progress) error
}

// ErrStaleFence reports a progress write by a run whose lease was taken over.
var ErrStaleFence = errors.New("reconcile: progress written under a newer lease")

// TableAPI is the part of the DynamoDB client TableProgress uses.
type TableAPI interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

// TableProgress stores Progress in the ledger table under pk "RECONCILE#<seller>",
// sk "PROGRESS" (a prefix no ledger item uses), with a put conditioned on the lease fence:
//
//	attribute_not_exists(pk) OR fence <= :fence
type TableProgress struct {
	API   TableAPI
	Table string
	Now   func() time.Time
}

func progressKey(seller string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		ledger.AttrPK: &types.AttributeValueMemberS{Value: "RECONCILE#" + seller},
		ledger.AttrSK: &types.AttributeValueMemberS{Value: "PROGRESS"},
	}
}

// GetProgress implements ProgressStore (consistent read).
func (t *TableProgress) GetProgress(ctx context.Context, seller string) (Progress, error) {
	in := &dynamodb.GetItemInput{TableName: aws.String(t.Table), Key: progressKey(seller), ConsistentRead: aws.Bool(true)}
	out, err := t.API.GetItem(ctx, ledger.PortableInput(in).(*dynamodb.GetItemInput))
	if err != nil {
		return Progress{}, fmt.Errorf("reconcile: read progress of %s: %w", seller, err)
	}
	if len(out.Item) == 0 {
		return Progress{Seller: seller}, nil
	}
	var p Progress
	if err := attributevalue.UnmarshalMap(out.Item, &p); err != nil {
		return Progress{}, fmt.Errorf("reconcile: decode progress of %s: %w", seller, err)
	}
	return p, nil
}

// PutProgress implements ProgressStore.
func (t *TableProgress) PutProgress(ctx context.Context, p Progress) error {
	now := time.Now
	if t.Now != nil {
		now = t.Now
	}
	p.UpdatedAt = now().UTC()
	item, err := attributevalue.MarshalMap(p)
	if err != nil {
		return fmt.Errorf("reconcile: encode progress of %s: %w", p.Seller, err)
	}
	for k, v := range progressKey(p.Seller) {
		item[k] = v
	}
	cond := expression.Or(
		expression.AttributeNotExists(expression.Name(ledger.AttrPK)),
		expression.Name("fence").LessThanEqual(expression.Value(p.Fence)))
	e, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return fmt.Errorf("reconcile: build progress condition: %w", err)
	}
	in := &dynamodb.PutItemInput{TableName: aws.String(t.Table), Item: item,
		ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()}
	_, err = t.API.PutItem(ctx, ledger.PortableInput(in).(*dynamodb.PutItemInput))
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		return ErrStaleFence
	case err != nil:
		return fmt.Errorf("reconcile: store progress of %s: %w", p.Seller, err)
	}
	return nil
}
