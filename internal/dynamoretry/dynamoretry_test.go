package dynamoretry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// errContention stands for the caller's contention error.
var errContention = errors.New("contention")

// reasons builds the TransactionCanceledException DynamoDB answers, one reason per item.
func reasons(codes ...string) *types.TransactionCanceledException {
	tce := &types.TransactionCanceledException{Message: aws.String("Transaction cancelled, please refer cancellation reasons for specific reasons")}
	for _, c := range codes {
		tce.CancellationReasons = append(tce.CancellationReasons, types.CancellationReason{Code: aws.String(c)})
	}
	return tce
}

// asSDK wraps err as the SDK's client returns it: an operation error around the HTTP
// response error around the modeled exception.
func asSDK(op string, err error) error {
	return &smithy.OperationError{ServiceID: "DynamoDB", OperationName: op, Err: &awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: 400}}, Err: err},
		RequestID:     "req-1",
	}}
}

func TestLostRaceIsOnlyAConflictThatAppliedNothing(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"a transaction cancelled by a conflict on one item", reasons("None", "TransactionConflict"), true},
		{"as the SDK returns it", asSDK("TransactWriteItems", reasons("TransactionConflict", "None", "None")), true},
		{"kumo's form: the other items' codes empty", reasons("", "TransactionConflict"), true},
		{"a single write on an item a transaction is writing", asSDK("UpdateItem", &types.TransactionConflictException{Message: aws.String("Transaction is ongoing for the item")}), true},
		{"wrapped again by a caller", fmt.Errorf("ledger: transition: %w", asSDK("TransactWriteItems", reasons("TransactionConflict", "None"))), true},
		{"reasons only in the message", &types.TransactionCanceledException{Message: aws.String("Transaction cancelled, please refer cancellation reasons for specific reasons [None, TransactionConflict]")}, true},

		{"a failed condition alongside a conflict keeps its meaning", reasons("ConditionalCheckFailed", "TransactionConflict"), false},
		{"a conflict alongside a failed condition", reasons("TransactionConflict", "ConditionalCheckFailed"), false},
		{"a failed condition", asSDK("TransactWriteItems", reasons("ConditionalCheckFailed", "None")), false},
		{"a failed condition, in the message", &types.TransactionCanceledException{Message: aws.String("Transaction cancelled [TransactionConflict, ConditionalCheckFailed]")}, false},
		{"a failed condition of a single write", asSDK("PutItem", &types.ConditionalCheckFailedException{}), false},
		{"a validation error", reasons("ValidationError", "None"), false},
		{"throttled items (the SDK's business, not a race)", reasons("ThrottlingError", "TransactionConflict"), false},
		{"no reason at all", reasons("None", "None"), false},
		{"an idempotent retry still in progress (the SDK retries it)", asSDK("TransactWriteItems", &types.TransactionInProgressException{}), false},
		{"anything else", errors.New("connection reset"), false},
		{"nil", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := LostRace(tt.err); got != tt.want {
				t.Errorf("LostRace(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

// scriptedTransact answers TransactWriteItems from a script of errors, then succeeds.
type scriptedTransact struct {
	errs   []error
	inputs []*dynamodb.TransactWriteItemsInput
}

func (s *scriptedTransact) TransactWriteItems(_ context.Context, in *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	s.inputs = append(s.inputs, in)
	if n := len(s.inputs); n <= len(s.errs) {
		return nil, s.errs[n-1]
	}
	return &dynamodb.TransactWriteItemsOutput{}, nil
}

func TestALostRaceIsSentAgainBoundedWithJitter(t *testing.T) {
	conflict := asSDK("TransactWriteItems", reasons("TransactionConflict", "None"))
	run := func(t *testing.T, errs ...error) (*scriptedTransact, []time.Duration, error) {
		t.Helper()
		api := &scriptedTransact{errs: errs}
		var waits []time.Duration
		r := Retrier{Contention: errContention, Sleep: func(_ context.Context, d time.Duration) error {
			waits = append(waits, d)
			return nil
		}}
		token := aws.String("the caller's token")
		in := &dynamodb.TransactWriteItemsInput{ClientRequestToken: token}
		_, err := TransactWriteItems(context.Background(), r, api, in)
		if in.ClientRequestToken != token {
			t.Error("the caller's input was changed")
		}
		for i, sent := range api.inputs {
			if sent.ClientRequestToken != nil {
				t.Errorf("attempt %d carried a token (%q): a retry must be a request of its own", i+1, *sent.ClientRequestToken)
			}
		}
		return api, waits, err
	}

	t.Run("lost twice, then written", func(t *testing.T) {
		api, waits, err := run(t, conflict, conflict)
		if err != nil || len(api.inputs) != 3 || len(waits) != 2 {
			t.Fatalf("err %v after %d attempts and %d waits, want success on the third", err, len(api.inputs), len(waits))
		}
		for i, w := range waits {
			if ceiling := Backoff<<i + time.Millisecond; w <= 0 || w > ceiling {
				t.Errorf("wait %d is %v, want within (0, %v]", i+1, w, ceiling)
			}
		}
	})
	t.Run("lost every time", func(t *testing.T) {
		errs := make([]error, Attempts+3)
		for i := range errs {
			errs[i] = conflict
		}
		api, waits, err := run(t, errs...)
		if !errors.Is(err, errContention) || len(api.inputs) != Attempts || len(waits) != Attempts-1 {
			t.Fatalf("err %v after %d attempts, want errContention after %d", err, len(api.inputs), Attempts)
		}
		if !errors.Is(err, conflict) {
			t.Errorf("the last cancellation is not kept in the error: %v", err)
		}
		for _, w := range waits {
			if w > BackoffMax+time.Millisecond {
				t.Errorf("a wait of %v is over the cap %v", w, BackoffMax)
			}
		}
	})
	t.Run("a failed condition is answered at once", func(t *testing.T) {
		cond := asSDK("TransactWriteItems", reasons("ConditionalCheckFailed", "TransactionConflict"))
		api, waits, err := run(t, cond)
		if !errors.Is(err, cond) || errors.Is(err, errContention) || len(api.inputs) != 1 || len(waits) != 0 {
			t.Fatalf("err %v after %d attempts, want the failed condition after 1", err, len(api.inputs))
		}
	})
	t.Run("a cancelled context stops the retries", func(t *testing.T) {
		api := &scriptedTransact{errs: []error{conflict, conflict}}
		r := Retrier{Contention: errContention}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := TransactWriteItems(ctx, r, api, &dynamodb.TransactWriteItemsInput{})
		if len(api.inputs) != 1 || !errors.Is(err, conflict) || !errors.Is(err, errContention) || !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v after %d attempts, want errContention, the conflict and the cancellation after 1", err, len(api.inputs))
		}
	})
}
