package ledger_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/workflow"
)

// lostResponses sends every write twice and answers the second result: the first write is
// applied but its response is lost, and the SDK retries the very same request. This happens
// on AWS (a connection closed while a 200 body is read; aws/aws-sdk-go-v2#1825) and was seen
// here on the emulators, where it made conditional writes fail their own condition.
type lostResponses struct {
	ledger.API
}

func (l lostResponses) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	_, _ = l.API.PutItem(ctx, in, opts...)
	return l.API.PutItem(ctx, in, opts...)
}

func (l lostResponses) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	_, _ = l.API.UpdateItem(ctx, in, opts...)
	return l.API.UpdateItem(ctx, in, opts...)
}

func (l lostResponses) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	_, _ = l.API.DeleteItem(ctx, in, opts...)
	return l.API.DeleteItem(ctx, in, opts...)
}

func (l lostResponses) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	_, _ = l.API.TransactWriteItems(ctx, in, opts...)
	return l.API.TransactWriteItems(ctx, in, opts...)
}

// Every write the workflow relies on succeeds when its first response is lost and the SDK
// retries it: the retry finds the write's own mark and reports success, never a conflict.
func TestWritesSurviveARetryAfterALostResponse(t *testing.T) {
	t.Parallel()
	client, table := dynamotest.Start(t)
	s := ledger.New(lostResponses{client}, table)
	ctx := context.Background()

	// A lost create answers a conflict, which the submit path already treats as "it exists".
	if _, err := s.CreateOperation(ctx, newOp("op-r")); err != nil && !errors.Is(err, record.ErrConflict) {
		t.Fatal(err)
	}
	op, err := s.GetOperation(ctx, "acme", "op-r")
	if err != nil {
		t.Fatal(err)
	}
	moved, err := s.Transition(ctx, "acme", "op-r", workflow.StatusCheckingGovernance, op.Version, record.Patch{Actor: "test"})
	if err != nil || moved.Status != workflow.StatusCheckingGovernance || moved.Version != op.Version+1 {
		t.Fatalf("transition: %+v, %v", moved, err)
	}
	reason := "r"
	if _, err := s.UpdateFields(ctx, "acme", "op-r", moved.Version, record.Patch{Reason: &reason}); err != nil {
		t.Fatalf("update fields: %v", err)
	}
	if _, err := s.SetTaskToken(ctx, "acme", "op-r", "tok-1"); err != nil {
		t.Fatalf("set task token: %v", err)
	}
	if err := s.ClearTaskToken(ctx, "acme", "op-r", "tok-1"); err != nil {
		t.Fatalf("clear task token: %v", err)
	}
	if err := s.ClearTaskToken(ctx, "acme", "op-r", "tok-1"); !errors.Is(err, record.ErrTokenMismatch) {
		t.Fatalf("a second waker's clear: err = %v, want ErrTokenMismatch", err)
	}
	// An advance that takes the token: its retry must still be the write that took it, or the
	// webhook that won the wake would take it for another waker's and wake nobody.
	if _, err := s.SetTaskToken(ctx, "acme", "op-r", "tok-2"); err != nil {
		t.Fatal(err)
	}
	parked, err := s.GetOperation(ctx, "acme", "op-r")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.Advance(ctx, parked, workflow.StatusAwaitingApproval, record.Patch{Actor: "test"}, true); err != nil || got.TaskToken != "" {
		t.Fatalf("advance taking the token: %+v, %v", got, err)
	}
	if err := s.AppendEvent(ctx, "acme", "op-r", record.Event{Type: "note"}); err != nil {
		t.Fatalf("append event: %v", err)
	}
	// A change begun again passes the buy state's condition (it is this change's) but finds its
	// own event: the stand-ins run a retried transaction again where DynamoDB answers its
	// ClientRequestToken from the first outcome.
	buy := initialBuy()
	buy.OperationID = "op-r"
	begun, err := s.BeginChange(ctx, buy, "chg-r", "budget", time.Now().Add(time.Hour), record.Event{Type: "modification_requested"})
	if err != nil || begun.ChangeID != "chg-r" {
		t.Fatalf("begin change: %+v, %v", begun, err)
	}
	buy.Revision = 3
	if applied, err := s.ApplyChange(ctx, buy, "chg-r", record.Event{Type: "modification_applied"}); err != nil || applied.ChangeID != "" || applied.Revision != 3 {
		t.Fatalf("apply change: %+v, %v", applied, err)
	}
	if _, err := s.BeginChange(ctx, buy, "chg-r2", "pause", time.Now().Add(time.Hour), record.Event{Type: "modification_requested"}); err != nil {
		t.Fatalf("begin a second change: %v", err)
	}
	if ended, err := s.EndChange(ctx, "acme", "op-r", "chg-r2", "denied", "no", record.Event{Type: "modification_ended"}); err != nil || ended.LastChangeID != "chg-r2" {
		t.Fatalf("end change: %+v, %v", ended, err)
	}
	evs, err := s.ListEvents(ctx, "acme", "op-r", 100, "")
	if err != nil {
		t.Fatal(err)
	}
	if notes := countType(evs.Items, "note"); notes != 1 {
		t.Errorf("%d note events, want 1", notes)
	}

	if _, err := s.CreateApproval(ctx, newApproval("ap-r", time.Now().Add(time.Hour))); err != nil {
		t.Fatalf("create approval: %v; want its retry taken for the create", err)
	}
	if _, err := s.CreateApproval(ctx, newApproval("ap-r", time.Now().Add(time.Hour))); !errors.Is(err, record.ErrConflict) {
		t.Fatalf("another create of the approval: err = %v, want a conflict", err)
	}
	a, err := s.Decide(ctx, "ap-r", record.Decision{Outcome: record.ApprovalRejected, By: "U1", Comment: "no"})
	if err != nil || a.Status != record.ApprovalRejected || a.Decider != "U1" {
		t.Fatalf("decide: %+v, %v", a, err)
	}
	// Someone else's later decision is still refused.
	var de *record.DecisionError
	if _, err := s.Decide(ctx, "ap-r", record.Decision{Outcome: record.ApprovalApproved, By: "U2"}); !errors.As(err, &de) {
		t.Fatalf("second decider: err = %v, want a DecisionError", err)
	}

	// A campaign's create is its submit's own: its retry is still the create, and another
	// create of the id is still a conflict.
	if _, err := s.CreateCampaign(ctx, newCampaign("acme", "cp-r")); err != nil {
		t.Fatalf("create campaign: %v; want its retry taken for the create", err)
	}
	if _, err := s.CreateCampaign(ctx, newCampaign("acme", "cp-r")); !errors.Is(err, record.ErrConflict) {
		t.Fatalf("another create of the campaign: err = %v, want a conflict", err)
	}

	// An intent's put is a first send's claim (stage.FixIntent): its retry must still be the put
	// that created it, or the stage would claim it again and resend.
	intent := record.Intent{Tenant: "acme", OperationID: "op-r", Task: "update_media_buy", IdempotencyKey: "key-intent-r",
		Request: []byte(`{"a":1}`), Claims: 1}
	if got, created, err := s.PutIntent(ctx, intent); err != nil || !created || got.Claims != 1 {
		t.Fatalf("put intent: %+v created=%t, %v; want created", got, created, err)
	}
	other := intent
	other.IdempotencyKey, other.Request = "key-intent-other", []byte(`{"b":2}`)
	if got, created, err := s.PutIntent(ctx, other); err != nil || created || got.IdempotencyKey != "key-intent-r" {
		t.Fatalf("another attempt's put: %+v created=%t, %v; want the stored intent, not created", got, created, err)
	}

	// A breaker write is versioned: its retry must not read as another writer's (ErrContention),
	// or the gate decides again on its own write and counts one failure twice.
	b, err := s.PutBreaker(ctx, record.Breaker{AgentID: "seller-r", State: record.BreakerClosed, Failures: 1})
	if err != nil || b.Version != 1 {
		t.Fatalf("first breaker write: %+v, %v", b, err)
	}
	b.Failures = 2
	if b, err = s.PutBreaker(ctx, b); err != nil || b.Version != 2 || b.Failures != 2 {
		t.Fatalf("next breaker write: %+v, %v", b, err)
	}
	if stored, err := s.GetBreaker(ctx, "seller-r"); err != nil || stored.Version != 2 || stored.Failures != 2 {
		t.Fatalf("stored breaker: %+v, %v", stored, err)
	}
	stale := b
	stale.Version, stale.Failures = 1, 9
	if _, err := s.PutBreaker(ctx, stale); !errors.Is(err, record.ErrContention) {
		t.Fatalf("a write from a stale read: err = %v, want ErrContention", err)
	}

	c, err := s.Claim(ctx, "acme", "key-r", "hash")
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	if err := s.CompleteClaim(ctx, c, "op-r", json.RawMessage(`{"ok":true}`)); err != nil {
		t.Fatalf("complete claim: %v", err)
	}
	c2, err := s.Claim(ctx, "acme", "key-r2", "hash")
	if err != nil {
		t.Fatalf("claim 2: %v", err)
	}
	if err := s.ReleaseClaim(ctx, c2); err != nil {
		t.Fatalf("release claim: %v", err)
	}
	// A claim held by another request is still refused.
	if _, err := s.Claim(ctx, "acme", "key-r", "hash"); !errors.Is(err, record.ErrConflict) {
		t.Fatalf("claim of a completed key: err = %v, want a conflict", err)
	}

	// A delivery snapshot's put: its retry must report the snapshot stored, or the read records
	// no delivery event and counts no overspend for those figures.
	snap := record.DeliverySnapshot{Tenant: "acme", OperationID: "op-r", MediaBuyID: "mb-r", AsOf: time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC),
		Impressions: 10, Spend: "1.00", Currency: "USD", Approved: "1500.00"}
	if stored, _, err := s.PutDeliverySnapshot(ctx, snap); err != nil || !stored {
		t.Fatalf("put delivery snapshot: stored %v, %v; want stored", stored, err)
	}
	// The same figures put again by another read are still a duplicate.
	if stored, _, err := s.PutDeliverySnapshot(ctx, snap); err != nil || stored {
		t.Fatalf("the same figures again: stored %v, %v; want not stored", stored, err)
	}

	dup, err := s.RecordReceipt(ctx, record.Receipt{SellerID: "seller-1", IdempotencyKey: "wh-1"})
	if err != nil || dup {
		t.Fatalf("receipt: duplicate %v, %v", dup, err)
	}
	if dup, err := s.RecordReceipt(ctx, record.Receipt{SellerID: "seller-1", IdempotencyKey: "wh-1"}); err != nil || !dup {
		t.Fatalf("a real duplicate delivery: duplicate %v, %v", dup, err)
	}
	seen, err := s.SeenNonce(ctx, "kid", "n-1", time.Now().Add(time.Minute))
	if err != nil || seen {
		t.Fatalf("nonce: seen %v, %v", seen, err)
	}
	if seen, err := s.SeenNonce(ctx, "kid", "n-1", time.Now().Add(time.Minute)); err != nil || !seen {
		t.Fatalf("a replayed nonce: seen %v, %v", seen, err)
	}
}

func countType(evs []record.Event, typ string) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}
