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

// Phases of a seller pass stored in SweepProgress.
const (
	PhaseList    = "list"    // reading list_tasks pages
	PhaseCompare = "compare" // comparing operations
)

// SweepProgress is where the reconciliation sweep's last run left a seller: the account group in progress, the phase, the
// seller's list cursor or the last operation compared, and when a pass last completed. The
// zero value means "start from the beginning".
type SweepProgress struct {
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

// ErrStaleFence reports a progress write by a run whose lease was taken over.
var ErrStaleFence = errors.New("ledger: sweep progress written under a newer lease")

// The sweep's progress of a seller lives under pk "RECONCILE#<seller>", sk "PROGRESS" (a
// prefix no other item uses), written with a put conditioned on the lease fence:
//
//	attribute_not_exists(pk) OR fence <= :fence
func progressKey(seller string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		AttrPK: &types.AttributeValueMemberS{Value: "RECONCILE#" + seller},
		AttrSK: &types.AttributeValueMemberS{Value: "PROGRESS"},
	}
}

// GetProgress returns the sweep's progress of seller (a consistent read), or the zero
// SweepProgress of the seller when none is stored.
func (s *Store) GetProgress(ctx context.Context, seller string) (SweepProgress, error) {
	in := &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: progressKey(seller), ConsistentRead: aws.Bool(true)}
	out, err := s.api.GetItem(ctx, in)
	if err != nil {
		return SweepProgress{}, fmt.Errorf("ledger: read sweep progress of %s: %w", seller, err)
	}
	if len(out.Item) == 0 {
		return SweepProgress{Seller: seller}, nil
	}
	var p SweepProgress
	if err := attributevalue.UnmarshalMap(out.Item, &p); err != nil {
		return SweepProgress{}, fmt.Errorf("ledger: decode sweep progress of %s: %w", seller, err)
	}
	return p, nil
}

// PutProgress stores p unless a sweep run holding a newer lease (a higher fence) stored one:
// then it returns ErrStaleFence.
func (s *Store) PutProgress(ctx context.Context, p SweepProgress) error {
	p.UpdatedAt = s.now()
	item, err := attributevalue.MarshalMap(p)
	if err != nil {
		return fmt.Errorf("ledger: encode sweep progress of %s: %w", p.Seller, err)
	}
	for k, v := range progressKey(p.Seller) {
		item[k] = v
	}
	cond := expression.Or(
		expression.AttributeNotExists(expression.Name(AttrPK)),
		expression.Name("fence").LessThanEqual(expression.Value(p.Fence)))
	e, err := expression.NewBuilder().WithCondition(cond).Build()
	if err != nil {
		return fmt.Errorf("ledger: build sweep progress condition: %w", err)
	}
	in := &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item,
		ConditionExpression: e.Condition(), ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()}
	_, err = s.api.PutItem(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		return ErrStaleFence
	case err != nil:
		return fmt.Errorf("ledger: store sweep progress of %s: %w", p.Seller, err)
	}
	return nil
}
