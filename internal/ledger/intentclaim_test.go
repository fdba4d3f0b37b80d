package ledger_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/record"
)

// A claim refused before anything was sent is released, and the next claim is a first send
// again, its replay window starting then; a claim another attempt took since keeps the
// intent maybe sent.
func TestIntentClaimsAndReleases(t *testing.T) {
	t.Parallel()
	s, clk := newStore(t)
	ctx := context.Background()
	fixed := clk.Now()
	first, created, err := s.PutIntent(ctx, record.Intent{Tenant: "acme", OperationID: "op-1", Task: "create_media_buy",
		IdempotencyKey: "k-1", Request: []byte(`{"a":1}`), CreatedAt: fixed, Claims: 1})
	if err != nil || !created {
		t.Fatalf("put: %v, created %v", err, created)
	}
	if err := s.ReleaseIntent(ctx, first); err != nil {
		t.Fatalf("release the put's claim: %v", err)
	}
	// The SDK resends a release whose answer was lost: the same release, not a conflict.
	if err := s.ReleaseIntent(ctx, first); err != nil {
		t.Fatalf("the release again: %v", err)
	}
	unsent, err := s.GetIntent(ctx, "acme", "op-1", "create_media_buy")
	if err != nil || !unsent.Unsent || unsent.Claims != 1 {
		t.Fatalf("after the release: %+v, %v; want unsent with 1 claim", unsent, err)
	}

	clk.Advance(time.Hour)
	second, err := s.ClaimIntent(ctx, unsent)
	if err != nil {
		t.Fatalf("claim the unsent intent: %v", err)
	}
	if second.Unsent || second.Claims != 2 || !second.CreatedAt.Equal(clk.Now()) {
		t.Fatalf("claim = %+v; want 2 claims, maybe sent, created now", second)
	}
	if _, err := s.ClaimIntent(ctx, unsent); !errors.Is(err, record.ErrConflict) {
		t.Fatalf("a claim of the intent as read before: err = %v, want ErrConflict", err)
	}
	stored, err := s.GetIntent(ctx, "acme", "op-1", "create_media_buy")
	if err != nil || stored.Claims != 2 || stored.Unsent || !stored.CreatedAt.Equal(clk.Now()) || stored.IdempotencyKey != "k-1" || string(stored.Request) != `{"a":1}` {
		t.Fatalf("stored = %+v, %v; want the same key and bytes, claimed twice, created now", stored, err)
	}

	// Another attempt resends it (it may have been sent) before the second claim's holder
	// learns its call was refused: that release must not mark it unsent.
	third, err := s.ClaimIntent(ctx, stored)
	if err != nil || third.Claims != 3 || third.Unsent {
		t.Fatalf("resend claim = %+v, %v", third, err)
	}
	if err := s.ReleaseIntent(ctx, second); !errors.Is(err, record.ErrConflict) {
		t.Fatalf("release after another claim: err = %v, want ErrConflict", err)
	}
	if got, _ := s.GetIntent(ctx, "acme", "op-1", "create_media_buy"); got.Unsent || got.Claims != 3 {
		t.Fatalf("after the refused release: %+v; want maybe sent, 3 claims", got)
	}

	if _, err := s.ClaimIntent(ctx, &record.Intent{Tenant: "acme", OperationID: "op-1", Task: "update_media_buy#cancel"}); !errors.Is(err, record.ErrNotFound) {
		t.Fatalf("claim of a missing intent: err = %v, want ErrNotFound", err)
	}
	if err := s.ReleaseIntent(ctx, unsent); !errors.Is(err, record.ErrInvalidArgument) {
		t.Fatalf("release of an unsent intent: err = %v, want ErrInvalidArgument", err)
	}
}

// An intent stored before claims were counted is maybe sent: its first claim is a resend.
func TestIntentWithoutClaimsIsMaybeSent(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	old, _, err := s.PutIntent(ctx, record.Intent{Tenant: "acme", OperationID: "op-1", Task: "create_media_buy", IdempotencyKey: "k-1", Request: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.ClaimIntent(ctx, old)
	if err != nil || got.Claims != 1 || got.Unsent || !got.CreatedAt.Equal(old.CreatedAt) {
		t.Fatalf("claim = %+v, %v; want 1 claim, maybe sent, the original creation time", got, err)
	}
	if _, err := s.ClaimIntent(ctx, old); !errors.Is(err, record.ErrConflict) {
		t.Fatalf("second claim of the unclaimed read: err = %v, want ErrConflict", err)
	}
}

// Concurrent attempts that read the same unsent intent: exactly one claims it for its first
// send, the others must read it again (and then see it maybe sent).
func TestIntentClaimHasOneWinner(t *testing.T) {
	dynamotest.SkipOnMoto(t, motoNotIsolated)
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	in, _, err := s.PutIntent(ctx, record.Intent{Tenant: "acme", OperationID: "op-1", Task: "create_media_buy",
		IdempotencyKey: "k-1", Request: []byte(`{}`), Claims: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ReleaseIntent(ctx, in); err != nil {
		t.Fatal(err)
	}
	seen, err := s.GetIntent(ctx, "acme", "op-1", "create_media_buy")
	if err != nil {
		t.Fatal(err)
	}
	const n = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	won, lost := 0, 0
	for range n {
		wg.Go(func() {
			_, err := s.ClaimIntent(ctx, seen)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won++
			case errors.Is(err, record.ErrConflict):
				lost++
			default:
				t.Errorf("claim: %v", err)
			}
		})
	}
	wg.Wait()
	if won != 1 || lost != n-1 {
		t.Fatalf("%d claims won, %d lost; want exactly one winner", won, lost)
	}
}

// A campaign's plan intent is stored unsent with the campaign (whatever claims the caller
// passed) and claimed on the campaign's item as an intent item is: a first send, a release
// after a refusal, a first send again, then a resend; the plan's bytes and the campaign stay.
func TestCampaignPlanIntentClaimsOnTheCampaign(t *testing.T) {
	t.Parallel()
	s, clk := newStore(t)
	ctx := context.Background()
	c := newCampaign("acme", "cp-plan")
	c.PlanIntent, c.PlanClaims, c.PlanClaimedBy = []byte(`{"task":"sync_plans"}`), 7, "someone"
	if _, err := s.CreateCampaign(ctx, c); err != nil {
		t.Fatal(err)
	}
	read := func() *record.Intent {
		t.Helper()
		got, err := s.GetCampaign(ctx, "acme", "cp-plan")
		if err != nil {
			t.Fatal(err)
		}
		in, err := got.PlanIntentRecord()
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Legs) != 2 || string(in.Request) != `{"task":"sync_plans"}` || in.Task != record.SyncPlansIntent {
			t.Fatalf("campaign %+v, plan intent %+v: the campaign or its plan changed", got, in)
		}
		return in
	}
	fresh := read()
	if !fresh.Unsent || fresh.Claims != 0 || fresh.ClaimedBy != "" {
		t.Fatalf("stored plan: %d claims by %q, unsent %v; want unsent and unclaimed", fresh.Claims, fresh.ClaimedBy, fresh.Unsent)
	}
	first, err := s.ClaimIntent(ctx, fresh)
	if err != nil || first.Claims != 1 || first.Unsent || !first.CreatedAt.Equal(clk.Now()) {
		t.Fatalf("first claim: %+v, %v", first, err)
	}
	if got := read(); got.Claims != 1 || got.Unsent || !got.CreatedAt.Equal(clk.Now()) || got.ClaimedBy != first.ClaimedBy {
		t.Fatalf("after the first claim the campaign holds %+v", got)
	}
	if err := s.ReleaseIntent(ctx, first); err != nil {
		t.Fatalf("release: %v", err)
	}
	released := read()
	if !released.Unsent {
		t.Fatalf("after the release: %+v, want unsent", released)
	}
	clk.Advance(time.Hour)
	again, err := s.ClaimIntent(ctx, released)
	if err != nil || again.Claims != 2 || again.Unsent || !again.CreatedAt.Equal(clk.Now()) {
		t.Fatalf("the claim after the release: %+v, %v; want a first send again, sent now", again, err)
	}
	if _, err := s.ClaimIntent(ctx, released); !errors.Is(err, record.ErrConflict) {
		t.Fatalf("a claim of the plan as read before: %v, want ErrConflict", err)
	}
	resend, err := s.ClaimIntent(ctx, read())
	if err != nil || resend.Claims != 3 || resend.Unsent {
		t.Fatalf("resend claim: %+v, %v", resend, err)
	}
	if err := s.ReleaseIntent(ctx, again); !errors.Is(err, record.ErrConflict) {
		t.Fatalf("release of a claim another one followed: %v, want ErrConflict", err)
	}
	if got := read(); got.Unsent || got.Claims != 3 {
		t.Fatalf("the plan after a refused release: %+v, want maybe sent", got)
	}
}

// A campaign stored before its plan's claims were counted reads maybe sent: its next claim is
// a resend. A campaign without a plan has no plan intent.
func TestCampaignPlanIntentStoredWithoutClaimsIsMaybeSent(t *testing.T) {
	t.Parallel()
	client, table := dynamotest.Start(t)
	s := ledger.New(client, table)
	ctx := context.Background()
	c := newCampaign("acme", "cp-old")
	c.PlanIntent = []byte(`{"task":"sync_plans"}`)
	if _, err := s.CreateCampaign(ctx, c); err != nil {
		t.Fatal(err)
	}
	// What the campaign's item held before: the plan and no claim attributes.
	if _, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table),
		Key:              map[string]types.AttributeValue{ledger.AttrPK: &types.AttributeValueMemberS{Value: "TENANT#acme#CAMPAIGN#cp-old"}, ledger.AttrSK: &types.AttributeValueMemberS{Value: "CAMPAIGN"}},
		UpdateExpression: aws.String("REMOVE plan_unsent"), ConditionExpression: aws.String("attribute_exists(plan_unsent)")}); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetCampaign(ctx, "acme", "cp-old")
	if err != nil {
		t.Fatal(err)
	}
	old, err := got.PlanIntentRecord()
	if err != nil || old.Unsent || old.Claims != 0 {
		t.Fatalf("old plan: %+v, %v; want maybe sent, unclaimed", old, err)
	}
	claimed, err := s.ClaimIntent(ctx, old)
	if err != nil || claimed.Claims != 1 || claimed.Unsent {
		t.Fatalf("claim of the old plan: %+v, %v; want a resend's claim", claimed, err)
	}
	none := newCampaign("acme", "cp-none")
	if _, err := none.PlanIntentRecord(); !errors.Is(err, record.ErrNotFound) {
		t.Fatalf("plan intent of a campaign without a plan: %v, want ErrNotFound", err)
	}
}
