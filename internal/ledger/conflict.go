package ledger

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/buyflow/buyflow/internal/dynamoretry"
	"github.com/buyflow/buyflow/internal/record"
)

// Every write of the ledger that lost a race on its item (another write touched it at that
// moment, and nothing was applied) is sent again by dynamoretry before any caller sees it;
// every conditional write re-checks its condition and recognises its own earlier success (see
// the package comment), so the same request is safe to send. A race still lost after that is
// ErrContention, which the HTTP routes answer 409.

// conflictRetrying is the DynamoDB API with every write that lost a race sent again; reads
// pass through.
type conflictRetrying struct {
	API
	retrier dynamoretry.Retrier
}

func retryConflicts(api API) conflictRetrying {
	return conflictRetrying{API: api, retrier: dynamoretry.Retrier{Contention: record.ErrContention}}
}

func (c conflictRetrying) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return dynamoretry.Do(ctx, c.retrier, func() (*dynamodb.PutItemOutput, error) { return c.API.PutItem(ctx, in, opts...) })
}

func (c conflictRetrying) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return dynamoretry.Do(ctx, c.retrier, func() (*dynamodb.UpdateItemOutput, error) { return c.API.UpdateItem(ctx, in, opts...) })
}

func (c conflictRetrying) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return dynamoretry.Do(ctx, c.retrier, func() (*dynamodb.DeleteItemOutput, error) { return c.API.DeleteItem(ctx, in, opts...) })
}

func (c conflictRetrying) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return dynamoretry.TransactWriteItems(ctx, c.retrier, c.API, in, opts...)
}
