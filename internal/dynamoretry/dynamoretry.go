// Package dynamoretry sends a DynamoDB write that lost a race on its item again, a bounded
// number of times with full jitter, before any caller sees it. Every package that writes the
// table conditionally (the ledger, the agent registry) sends its writes through it, so a race
// is retried the same way everywhere.
//
// DynamoDB serialises writes to one item optimistically: a transaction that names an item
// another transaction is writing at that moment is cancelled (TransactionCanceledException,
// reason TransactionConflict at that item), and a PutItem, UpdateItem or DeleteItem on an item
// a transaction is writing is rejected (TransactionConflictException). Neither is retried by
// the SDK, and neither applied anything: sending the same request again is exactly what its
// caller would do, provided every conditional write re-checks its condition and recognises its
// own earlier success (the callers' rule). A race still lost after the attempts wraps the
// caller's contention error.
//
// A cancellation that names a failed condition (ConditionalCheckFailed) is never retried,
// whatever else it names: the item is not in the state the write requires, and the caller's
// answer to that (a refusal, a replay, "no change") is the write's meaning.
package dynamoretry

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

	"github.com/buyflow/buyflow/internal/ctxwait"
)

// The retry budget: at most Attempts sends, waiting a random time up to Backoff doubling per
// attempt, capped at BackoffMax (about 1 s over all eight).
const (
	Attempts   = 8
	Backoff    = 10 * time.Millisecond
	BackoffMax = 200 * time.Millisecond
)

// Cancellation reason codes of TransactWriteItems (the API reference's list); kumo leaves the
// code empty where DynamoDB sends None.
const (
	reasonNone                = "None"
	ReasonConditionalCheck    = "ConditionalCheckFailed"
	ReasonTransactionConflict = "TransactionConflict"
)

// LostRace reports whether err is a write DynamoDB refused only because another write touched
// the same item at the same moment: nothing was applied, and the same request may be sent again.
func LostRace(err error) bool {
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
		return strings.Contains(msg, ReasonTransactionConflict) && !strings.Contains(msg, ReasonConditionalCheck)
	}
	conflict := false
	for _, r := range tce.CancellationReasons {
		switch aws.ToString(r.Code) {
		case ReasonTransactionConflict:
			conflict = true
		case "", reasonNone:
		default: // a failed condition, a validation error, throttling: not a lost race
			return false
		}
	}
	return conflict
}

// Retrier is one caller's retry of lost races.
type Retrier struct {
	// Contention is what the error of a race still lost after Attempts wraps (with the last
	// refusal), so the caller's errors.Is checks and HTTP answers keep working.
	Contention error
	// Sleep waits d or until ctx is done; nil is the real clock. Tests replace it to count
	// the waits.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Do calls write until it does not lose a race or the attempts are spent. The waits are full
// jitter over an exponential ceiling, so writers that collided do not collide again in step.
func Do[T any](ctx context.Context, r Retrier, write func() (T, error)) (T, error) {
	sleep := r.Sleep
	if sleep == nil {
		sleep = ctxwait.Sleep
	}
	for attempt := 1; ; attempt++ {
		out, err := write()
		if err == nil || !LostRace(err) {
			return out, err
		}
		if attempt == Attempts {
			return out, fmt.Errorf("%w after %d attempts: %w", r.Contention, attempt, err)
		}
		ceiling := min(Backoff<<(attempt-1), BackoffMax)
		if serr := sleep(ctx, rand.N(ceiling)+time.Millisecond); serr != nil {
			return out, fmt.Errorf("%w after %d attempts (%w): %w", r.Contention, attempt, serr, err)
		}
	}
}

// transactWriter is the DynamoDB call a transaction needs; *dynamodb.Client satisfies it.
type transactWriter interface {
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

// TransactWriteItems is Do for a transaction, each attempt sent with a token of its own: the
// SDK fills ClientRequestToken into the input it is given (and keeps it for its own resends
// of that attempt, which DynamoDB answers from the first outcome), and DynamoDB treats a token
// it has seen within ten minutes as the same request, so a new attempt must not carry the
// token of the one that lost. The caller's input is left as it was.
func TransactWriteItems(ctx context.Context, r Retrier, api transactWriter, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return Do(ctx, r, func() (*dynamodb.TransactWriteItemsOutput, error) {
		attempt := *in
		attempt.ClientRequestToken = nil
		return api.TransactWriteItems(ctx, &attempt, opts...)
	})
}
