package ledger

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/buyflow/buyflow/internal/dynamoretry"
	"github.com/buyflow/buyflow/internal/record"
)

// cancelled builds the TransactionCanceledException DynamoDB answers, one reason per item, as
// the SDK's client returns it: an operation error around the HTTP response error around it.
func cancelled(codes ...string) error {
	tce := &types.TransactionCanceledException{Message: aws.String("Transaction cancelled, please refer cancellation reasons for specific reasons")}
	for _, c := range codes {
		tce.CancellationReasons = append(tce.CancellationReasons, types.CancellationReason{Code: aws.String(c)})
	}
	return asSDK("TransactWriteItems", tce)
}

// asSDK wraps err as the SDK's client returns it.
func asSDK(op string, err error) error {
	return &smithy.OperationError{ServiceID: "DynamoDB", OperationName: op, Err: &awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: 400}}, Err: err},
		RequestID:     "req-1",
	}}
}

// scriptedTransact answers TransactWriteItems from a script of errors, then succeeds.
type scriptedTransact struct {
	API
	errs  []error
	calls int
}

func (s *scriptedTransact) TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	if s.calls++; s.calls <= len(s.errs) {
		return nil, s.errs[s.calls-1]
	}
	return &dynamodb.TransactWriteItemsOutput{}, nil
}

// The ledger's client ends a race lost every time in ErrContention with the last cancellation
// kept, so canceledAt still reads it, and passes a failed condition through at once.
func TestTheLedgersTransactionsRetryLostRaces(t *testing.T) {
	noWait := func(context.Context, time.Duration) error { return nil }
	t.Run("lost every time", func(t *testing.T) {
		api := &scriptedTransact{}
		for range 20 {
			api.errs = append(api.errs, cancelled("TransactionConflict", "None"))
		}
		c := retryConflicts(api)
		c.retrier.Sleep = noWait
		_, err := c.TransactWriteItems(context.Background(), &dynamodb.TransactWriteItemsInput{})
		if !errors.Is(err, record.ErrContention) || api.calls != dynamoretry.Attempts {
			t.Fatalf("err %v after %d attempts, want ErrContention after %d", err, api.calls, dynamoretry.Attempts)
		}
		if failed, _, contention := canceledAt(err, 0); failed || !contention {
			t.Errorf("the last cancellation is not kept in the error: failed %v, contention %v", failed, contention)
		}
	})
	t.Run("a failed condition", func(t *testing.T) {
		api := &scriptedTransact{errs: []error{cancelled("ConditionalCheckFailed", "TransactionConflict")}}
		c := retryConflicts(api)
		c.retrier.Sleep = noWait
		_, err := c.TransactWriteItems(context.Background(), &dynamodb.TransactWriteItemsInput{})
		if errors.Is(err, record.ErrContention) || api.calls != 1 {
			t.Fatalf("err %v after %d attempts, want the failed condition after 1", err, api.calls)
		}
		if failed, _, _ := canceledAt(err, 0); !failed {
			t.Error("the failed condition lost its meaning")
		}
	})
}

// A single write refused by a transaction in flight on its item is sent again too.
func TestASingleWriteThatLostARaceIsSentAgain(t *testing.T) {
	calls := 0
	f := &fakeAPI{t: t, put: func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
		if calls++; calls == 1 {
			return nil, asSDK("PutItem", &types.TransactionConflictException{})
		}
		return &dynamodb.PutItemOutput{}, nil
	}}
	s := fakeStore(f)
	if err := s.AppendEvent(context.Background(), "acme", "op-1", record.Event{Type: "note"}); err != nil || calls != 2 {
		t.Fatalf("err %v after %d puts, want success on the second", err, calls)
	}
}
