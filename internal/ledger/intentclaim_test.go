package ledger_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/ledger"
)

// A claim refused before anything was sent is released, and the next claim is a first send
// again, its replay window starting then; a claim another attempt took since keeps the
// intent maybe sent.
func TestIntentClaimsAndReleases(t *testing.T) {
	t.Parallel()
	s, clk := newStore(t)
	ctx := context.Background()
	fixed := clk.Now()
	first, created, err := s.PutIntent(ctx, ledger.Intent{Tenant: "acme", OperationID: "op-1", Task: "create_media_buy",
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
	if _, err := s.ClaimIntent(ctx, unsent); !errors.Is(err, ledger.ErrConflict) {
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
	if err := s.ReleaseIntent(ctx, second); !errors.Is(err, ledger.ErrConflict) {
		t.Fatalf("release after another claim: err = %v, want ErrConflict", err)
	}
	if got, _ := s.GetIntent(ctx, "acme", "op-1", "create_media_buy"); got.Unsent || got.Claims != 3 {
		t.Fatalf("after the refused release: %+v; want maybe sent, 3 claims", got)
	}

	if _, err := s.ClaimIntent(ctx, &ledger.Intent{Tenant: "acme", OperationID: "op-1", Task: "update_media_buy#cancel"}); !errors.Is(err, ledger.ErrNotFound) {
		t.Fatalf("claim of a missing intent: err = %v, want ErrNotFound", err)
	}
	if err := s.ReleaseIntent(ctx, unsent); !errors.Is(err, ledger.ErrInvalidArgument) {
		t.Fatalf("release of an unsent intent: err = %v, want ErrInvalidArgument", err)
	}
}

// An intent stored before claims were counted is maybe sent: its first claim is a resend.
func TestIntentWithoutClaimsIsMaybeSent(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	old, _, err := s.PutIntent(ctx, ledger.Intent{Tenant: "acme", OperationID: "op-1", Task: "create_media_buy", IdempotencyKey: "k-1", Request: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.ClaimIntent(ctx, old)
	if err != nil || got.Claims != 1 || got.Unsent || !got.CreatedAt.Equal(old.CreatedAt) {
		t.Fatalf("claim = %+v, %v; want 1 claim, maybe sent, the original creation time", got, err)
	}
	if _, err := s.ClaimIntent(ctx, old); !errors.Is(err, ledger.ErrConflict) {
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
	in, _, err := s.PutIntent(ctx, ledger.Intent{Tenant: "acme", OperationID: "op-1", Task: "create_media_buy",
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
			case errors.Is(err, ledger.ErrConflict):
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
