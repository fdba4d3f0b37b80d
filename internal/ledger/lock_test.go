package ledger_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/record"
)

func TestLockExpiryAndFencing(t *testing.T) {
	t.Parallel()
	s, clk := newStore(t)
	ctx := context.Background()
	name := record.BusinessKeyLock("acme", "seller-1", "PO-42")

	a, err := s.AcquireLock(ctx, name, "op-a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.AcquireLock(ctx, name, "op-b", time.Minute)
	var held *record.LockHeldError
	if !errors.As(err, &held) || held.Holder.Owner != "op-a" || held.Holder.Fence != a.Fence || !errors.Is(err, record.ErrConflict) {
		t.Fatalf("contended acquire: err = %v", err)
	}
	// The holder may renew while nobody took over.
	clk.Advance(50 * time.Second)
	if a, err = s.RenewLock(ctx, a, time.Minute); err != nil {
		t.Fatalf("renew: %v", err)
	}
	clk.Advance(50 * time.Second)
	if _, err := s.AcquireLock(ctx, name, "op-b", time.Minute); !errors.As(err, &held) {
		t.Fatalf("renewed lease taken: err = %v", err)
	}
	// Once the lease expires, another owner takes it with a higher fence.
	clk.Advance(11 * time.Second)
	b, err := s.AcquireLock(ctx, name, "op-b", time.Minute)
	if err != nil {
		t.Fatalf("takeover: %v", err)
	}
	if b.Fence <= a.Fence {
		t.Fatalf("takeover fence %d not above %d", b.Fence, a.Fence)
	}
	if _, err := s.RenewLock(ctx, a, time.Minute); !errors.Is(err, record.ErrLeaseLost) {
		t.Fatalf("old owner renew: err = %v", err)
	}
	if err := s.ReleaseLock(ctx, a); !errors.Is(err, record.ErrLeaseLost) {
		t.Fatalf("old owner release: err = %v", err)
	}
	// The same owner may re-acquire (a retry), and gets a new fence.
	b2, err := s.AcquireLock(ctx, name, "op-b", time.Minute)
	if err != nil || b2.Fence <= b.Fence {
		t.Fatalf("re-acquire by owner: %+v, %v", b2, err)
	}
	if err := s.ReleaseLock(ctx, b2); err != nil {
		t.Fatalf("release: %v", err)
	}
	// Released: free at once, and the fence keeps growing.
	c, err := s.AcquireLock(ctx, name, "op-c", time.Minute)
	if err != nil || c.Fence <= b2.Fence {
		t.Fatalf("after release: %+v, %v", c, err)
	}
}

func TestLockConcurrentOneWinner(t *testing.T) {
	dynamotest.SkipOnMoto(t, motoNotIsolated)
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	name := record.ReconcileLock("seller-1")
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners []record.Lease
		errs    []error
	)
	start := make(chan struct{})
	for i := range 20 {
		wg.Go(func() {
			<-start
			l, err := s.AcquireLock(ctx, name, "sweeper-"+string(rune('a'+i)), time.Minute)
			mu.Lock()
			defer mu.Unlock()
			var held *record.LockHeldError
			switch {
			case err == nil:
				winners = append(winners, l)
			case !errors.As(err, &held):
				errs = append(errs, err)
			}
		})
	}
	close(start)
	wg.Wait()
	if len(errs) > 0 || len(winners) != 1 {
		t.Fatalf("winners %v, errors %v", winners, errs)
	}
}

// TestSweepHeartbeatOnlyMovesForward: none stored reads as never fresh; a later heartbeat
// replaces an earlier one, never the reverse (a slow run ending after a newer one).
func TestSweepHeartbeatOnlyMovesForward(t *testing.T) {
	t.Parallel()
	s, clk := newStore(t)
	ctx := context.Background()
	now := clk.Now().Truncate(time.Second)
	if h, err := s.GetSweepHeartbeat(ctx); err != nil || h.Fresh(now) {
		t.Fatalf("no heartbeat stored: %+v, %v", h, err)
	}
	newer := record.SweepHeartbeat{At: now, Until: now.Add(5 * time.Minute)}
	older := record.SweepHeartbeat{At: now.Add(-time.Minute), Until: now.Add(4 * time.Minute)}
	for _, h := range []record.SweepHeartbeat{newer, older} {
		if err := s.PutSweepHeartbeat(ctx, h); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.GetSweepHeartbeat(ctx)
	if err != nil || !got.At.Equal(newer.At) || !got.Until.Equal(newer.Until) || !got.Fresh(now) || got.Fresh(newer.Until) {
		t.Fatalf("heartbeat %+v, %v; want the newer %+v", got, err, newer)
	}
}
