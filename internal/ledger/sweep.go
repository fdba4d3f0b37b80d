package ledger

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/buyflow/buyflow/internal/record"
)

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
func (s *Store) GetProgress(ctx context.Context, seller string) (record.SweepProgress, error) {
	in := &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: progressKey(seller), ConsistentRead: aws.Bool(true)}
	out, err := s.api.GetItem(ctx, in)
	if err != nil {
		return record.SweepProgress{}, fmt.Errorf("ledger: read sweep progress of %s: %w", seller, err)
	}
	if len(out.Item) == 0 {
		return record.SweepProgress{Seller: seller}, nil
	}
	var p record.SweepProgress
	if err := attributevalue.UnmarshalMap(out.Item, &p); err != nil {
		return record.SweepProgress{}, fmt.Errorf("ledger: decode sweep progress of %s: %w", seller, err)
	}
	return p, nil
}

// PutProgress stores p unless a sweep run holding a newer lease (a higher fence) stored one:
// then it returns ErrStaleFence.
func (s *Store) PutProgress(ctx context.Context, p record.SweepProgress) error {
	p.UpdatedAt = s.now()
	item, err := attributevalue.MarshalMap(p)
	if err != nil {
		return fmt.Errorf("ledger: encode sweep progress of %s: %w", p.Seller, err)
	}
	for k, v := range progressKey(p.Seller) {
		item[k] = v
	}
	cond := expression.Or(
		keyFree(),
		expression.Name("fence").LessThanEqual(expression.Value(p.Fence)))
	err = s.putIf(ctx, item, cond)
	if failed, _ := conditionFailed(err); failed {
		return record.ErrStaleFence
	}
	if err != nil {
		return fmt.Errorf("ledger: store sweep progress of %s: %w", p.Seller, err)
	}
	return nil
}
