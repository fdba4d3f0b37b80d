package webhookrx

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/workflow"
)

// The operation-id index item this package reads and that ledger.CreateOperation is asked to
// write in its create transaction (Put if attribute_not_exists(pk), never updated, no TTL):
//
//	pk OPIDX#<operation id>  sk OPIDX  tenant <tenant>  operation_id <id>
//
// It maps the id, which is all the public webhook route carries, to the one tenant that owns it;
// the operation itself is then read with that tenant's key, so nothing crosses tenants.
const (
	IndexPKPrefix = "OPIDX#"
	IndexSK       = "OPIDX"
)

// IndexAPI is the part of the DynamoDB client IndexFinder uses; *dynamodb.Client satisfies it.
type IndexAPI interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

// OperationReader reads a tenant's operation; *ledger.Store satisfies it.
type OperationReader interface {
	GetOperation(ctx context.Context, tenant, id string) (*ledger.Operation, error)
}

// IndexFinder implements Operations until the ledger has a lookup by id: it reads the
// OPIDX#<id> item and, for operations created before that item existed, falls back on the
// sparse pending index (gsi1), which only lists operations that still wait. A terminal
// operation without an index item is therefore "not found"; late deliveries for it are refused
// like any unknown operation (nothing to change on a terminal operation anyway).
type IndexFinder struct {
	api    IndexAPI
	table  string
	ledger OperationReader
	// MaxPages bounds the fallback's pages per pending status (default 20).
	MaxPages int
}

// NewIndexFinder returns an IndexFinder over the ledger table.
func NewIndexFinder(api IndexAPI, table string, l OperationReader) *IndexFinder {
	return &IndexFinder{api: api, table: table, ledger: l, MaxPages: 20}
}

// FindOperation implements Operations.
func (f *IndexFinder) FindOperation(ctx context.Context, id string) (*ledger.Operation, error) {
	if !ValidOperationID(id) {
		return nil, ledger.ErrNotFound
	}
	out, err := f.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(f.table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{
			ledger.AttrPK: &types.AttributeValueMemberS{Value: IndexPKPrefix + id},
			ledger.AttrSK: &types.AttributeValueMemberS{Value: IndexSK},
		}})
	if err != nil {
		return nil, fmt.Errorf("webhookrx: read operation index %s: %w", id, err)
	}
	if len(out.Item) > 0 {
		var idx struct {
			Tenant string `dynamodbav:"tenant"`
		}
		if err := attributevalue.UnmarshalMap(out.Item, &idx); err != nil || idx.Tenant == "" {
			return nil, fmt.Errorf("webhookrx: operation index %s has no tenant", id)
		}
		return f.ledger.GetOperation(ctx, idx.Tenant, id)
	}
	return f.pending(ctx, id)
}

// pending looks for id among the operations that still wait (gsi1, one partition per status).
func (f *IndexFinder) pending(ctx context.Context, id string) (*ledger.Operation, error) {
	for _, st := range workflow.Statuses {
		if !st.Pending() {
			continue
		}
		e, err := expression.NewBuilder().
			WithKeyCondition(expression.Key(ledger.AttrGSI1PK).Equal(expression.Value("PENDING#" + string(st)))).
			WithFilter(expression.Name("id").Equal(expression.Value(id))).
			WithProjection(expression.NamesList(expression.Name("id"), expression.Name("tenant"))).
			Build()
		if err != nil {
			return nil, fmt.Errorf("webhookrx: build pending query: %w", err)
		}
		in := &dynamodb.QueryInput{TableName: aws.String(f.table), IndexName: aws.String(ledger.IndexPending),
			KeyConditionExpression: e.KeyCondition(), FilterExpression: e.Filter(), ProjectionExpression: e.Projection(),
			ExpressionAttributeNames: e.Names(), ExpressionAttributeValues: e.Values()}
		for page := 0; page < f.MaxPages; page++ {
			q, ok := ledger.PortableInput(in).(*dynamodb.QueryInput)
			if !ok {
				return nil, errors.New("webhookrx: portable query input")
			}
			out, err := f.api.Query(ctx, q)
			if err != nil {
				return nil, fmt.Errorf("webhookrx: query pending %s: %w", st, err)
			}
			for _, item := range out.Items {
				var hit struct {
					ID     string `dynamodbav:"id"`
					Tenant string `dynamodbav:"tenant"`
				}
				if attributevalue.UnmarshalMap(item, &hit) == nil && hit.ID == id && hit.Tenant != "" {
					return f.ledger.GetOperation(ctx, hit.Tenant, id)
				}
			}
			if len(out.LastEvaluatedKey) == 0 {
				break
			}
			in.ExclusiveStartKey = out.LastEvaluatedKey
		}
	}
	return nil, ledger.ErrNotFound
}
