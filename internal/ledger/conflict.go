package ledger

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// DynamoDB serialises writes to one item optimistically: a transaction that names an item
// another transaction is writing at that moment is cancelled (TransactionCanceledException,
// reason TransactionConflict at that item), and a PutItem, UpdateItem or DeleteItem on an item
// a transaction is writing is rejected (TransactionConflictException). Neither is retried by
// the SDK, and neither applied anything: sending the same request again is exactly what its
// caller would do, and every conditional write of the ledger re-checks its condition and
// recognises its own earlier success (see the package comment). So the ledger sends a write
// that lost such a race again, a bounded number of times with full jitter, before any caller
// sees it; a race still lost after that is ErrContention, which the HTTP routes answer 409.
//
// A cancellation that names a failed condition (ConditionalCheckFailed) is never retried,
// whatever else it names: the item is not in the state the write requires, and the caller's
// answer to that (a refusal, a replay, "no change") is the write's meaning.
const (
	conflictAttempts   = 8
	conflictBackoff    = 10 * time.Millisecond
	conflictBackoffMax = 200 * time.Millisecond
)

// Cancellation reason codes of TransactWriteItems (the API reference's list); kumo leaves the
// code empty where DynamoDB sends None.
const (
	reasonNone                = "None"
	reasonConditionalCheck    = "ConditionalCheckFailed"
	reasonTransactionConflict = "TransactionConflict"
)

// lostRace reports whether err is a write DynamoDB refused only because another write touched
// the same item at the same moment: nothing was applied, and the same request may be sent again.
func lostRace(err error) bool {
	if _, ok := errors.AsType[*types.TransactionConflictException](err); ok {
		return true
	}
	tce, ok := errors.AsType[*types.TransactionCanceledException](err)
	if !ok {
		return false
	}
	if len(tce.CancellationReasons) == 0 {
		// SDKs of other languages carry the reasons only in the message ("... [None,
		// TransactionConflict]"); a stand-in may do the same.
		msg := tce.ErrorMessage()
		return strings.Contains(msg, reasonTransactionConflict) && !strings.Contains(msg, reasonConditionalCheck)
	}
	conflict := false
	for _, r := range tce.CancellationReasons {
		switch aws.ToString(r.Code) {
		case reasonTransactionConflict:
			conflict = true
		case "", reasonNone:
		default: // a failed condition, a validation error, throttling: not a lost race
			return false
		}
	}
	return conflict
}

// conflictRetrying is the DynamoDB API with every write that lost a race sent again (see
// above); reads pass through.
type conflictRetrying struct {
	API
	// sleep waits d or until ctx is done; tests replace it to count the waits.
	sleep func(ctx context.Context, d time.Duration) error
}

func retryConflicts(api API) conflictRetrying {
	return conflictRetrying{API: api, sleep: sleepCtx}
}

// retry calls write until it does not lose a race or the attempts are spent. The waits are full
// jitter over an exponential ceiling, so writers that collided do not collide again in step.
func retry[T any](ctx context.Context, c conflictRetrying, write func() (T, error)) (T, error) {
	for attempt := 1; ; attempt++ {
		out, err := write()
		if err == nil || !lostRace(err) {
			return out, err
		}
		if attempt == conflictAttempts {
			return out, fmt.Errorf("%w after %d attempts: %w", ErrContention, attempt, err)
		}
		ceiling := min(conflictBackoff<<(attempt-1), conflictBackoffMax)
		if serr := c.sleep(ctx, rand.N(ceiling)+time.Millisecond); serr != nil {
			return out, fmt.Errorf("%w after %d attempts (%w): %w", ErrContention, attempt, serr, err)
		}
	}
}

func (c conflictRetrying) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return retry(ctx, c, func() (*dynamodb.PutItemOutput, error) { return c.API.PutItem(ctx, in, opts...) })
}

func (c conflictRetrying) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return retry(ctx, c, func() (*dynamodb.UpdateItemOutput, error) { return c.API.UpdateItem(ctx, in, opts...) })
}

func (c conflictRetrying) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return retry(ctx, c, func() (*dynamodb.DeleteItemOutput, error) { return c.API.DeleteItem(ctx, in, opts...) })
}

// TransactWriteItems sends each attempt with a token of its own: the SDK fills
// ClientRequestToken into the input it is given, and DynamoDB treats a token it has seen within
// ten minutes as the same request, so a new attempt must not carry the token of the one that
// lost.
func (c conflictRetrying) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return retry(ctx, c, func() (*dynamodb.TransactWriteItemsOutput, error) {
		attempt := *in
		attempt.ClientRequestToken = nil
		return c.API.TransactWriteItems(ctx, &attempt, opts...)
	})
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
