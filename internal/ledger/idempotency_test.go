package ledger_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/clocktest"
	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/record"
)

func TestClaimConcurrentOneWinner(t *testing.T) {
	dynamotest.SkipOnMoto(t, motoNotIsolated)
	s, _ := newStore(t)
	ctx := context.Background()
	const n = 50
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners []*record.Claim
		losers  []*record.Claim
		other   []error
	)
	start := make(chan struct{})
	for range n {
		wg.Go(func() {
			<-start
			c, err := s.Claim(ctx, "acme", "key-1", "hash-a")
			mu.Lock()
			defer mu.Unlock()
			var exists *record.ClaimExistsError
			switch {
			case err == nil:
				winners = append(winners, c)
			case errors.As(err, &exists):
				losers = append(losers, exists.Existing)
			default:
				other = append(other, err)
			}
		})
	}
	close(start)
	wg.Wait()
	if len(other) > 0 {
		t.Fatalf("unexpected errors: %v", other)
	}
	if len(winners) != 1 || len(losers) != n-1 {
		t.Fatalf("winners = %d, losers = %d; want 1 and %d", len(winners), len(losers), n-1)
	}
	for _, l := range losers {
		if l.Owner != winners[0].Owner || l.Status != record.ClaimInProgress || l.PayloadHash != "hash-a" {
			t.Fatalf("loser saw %+v, want the winner's in-progress record (owner %s)", l, winners[0].Owner)
		}
	}
}

func TestClaimLifecycle(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		run  func(t *testing.T, s *ledger.Store, clk *clocktest.Clock)
	}{
		{"other payload is refused", func(t *testing.T, s *ledger.Store, _ *clocktest.Clock) {
			mustClaim(t, s, "k", "hash-a")
			_, err := s.Claim(ctx, "acme", "k", "hash-b")
			var pm *record.PayloadMismatchError
			if !errors.As(err, &pm) || !errors.Is(err, record.ErrPayloadMismatch) || pm.Existing.PayloadHash != "hash-a" {
				t.Fatalf("err = %v, want PayloadMismatchError with the first hash", err)
			}
		}},
		{"completed claim is replayed", func(t *testing.T, s *ledger.Store, _ *clocktest.Clock) {
			c := mustClaim(t, s, "k", "hash-a")
			if err := s.CompleteClaim(ctx, c, "op-1", json.RawMessage(`{"id":"op-1"}`)); err != nil {
				t.Fatal(err)
			}
			_, err := s.Claim(ctx, "acme", "k", "hash-a")
			var ce *record.ClaimExistsError
			if !errors.As(err, &ce) || ce.Existing.Status != record.ClaimCompleted || ce.Existing.OperationID != "op-1" ||
				string(ce.Existing.Response) != `{"id":"op-1"}` {
				t.Fatalf("err = %v (%+v), want the completed record", err, ce)
			}
		}},
		{"expired claim is reclaimable", func(t *testing.T, s *ledger.Store, clk *clocktest.Clock) {
			c := mustClaim(t, s, "k", "hash-a")
			if err := s.CompleteClaim(ctx, c, "op-1", json.RawMessage(`{}`)); err != nil {
				t.Fatal(err)
			}
			clk.Advance(ledger.DefaultClaimTTL + time.Second)
			c2 := mustClaim(t, s, "k", "hash-b")
			if c2.Status != record.ClaimInProgress {
				t.Fatalf("reclaimed claim status %s", c2.Status)
			}
		}},
		{"stale in-progress claim is reclaimable and the old owner loses it", func(t *testing.T, s *ledger.Store, clk *clocktest.Clock) {
			old := mustClaim(t, s, "k", "hash-a")
			clk.Advance(ledger.DefaultInProgressTTL - time.Second)
			if _, err := s.Claim(ctx, "acme", "k", "hash-a"); !errors.Is(err, record.ErrConflict) {
				t.Fatalf("live in-progress claim: err = %v, want conflict", err)
			}
			clk.Advance(2 * time.Second)
			fresh := mustClaim(t, s, "k", "hash-a")
			if err := s.CompleteClaim(ctx, old, "op-old", nil); !errors.Is(err, record.ErrConflict) {
				t.Fatalf("old owner complete: err = %v, want conflict", err)
			}
			if err := s.ReleaseClaim(ctx, old); !errors.Is(err, record.ErrConflict) {
				t.Fatalf("old owner release: err = %v, want conflict", err)
			}
			if err := s.ReleaseClaim(ctx, fresh); err != nil {
				t.Fatalf("release: %v", err)
			}
			mustClaim(t, s, "k", "hash-c") // released: free again, any payload
		}},
		{"claims are per tenant", func(t *testing.T, s *ledger.Store, _ *clocktest.Clock) {
			mustClaim(t, s, "k", "hash-a")
			if _, err := s.Claim(ctx, "globex", "k", "hash-b"); err != nil {
				t.Fatalf("other tenant, same key: %v", err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, clk := newStore(t)
			tt.run(t, s, clk)
		})
	}
}

func mustClaim(t *testing.T, s *ledger.Store, key, hash string) *record.Claim {
	t.Helper()
	c, err := s.Claim(context.Background(), "acme", key, hash)
	if err != nil {
		t.Fatalf("claim %s: %v", key, err)
	}
	return c
}
