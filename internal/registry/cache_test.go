package registry_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/clocktest"
	"github.com/buyflow/buyflow/internal/registry"
)

// listerFunc counts the loads and single reads, and can fail them.
type listerFunc struct {
	loads atomic.Int32
	reads atomic.Int32
	mu    sync.Mutex
	recs  []registry.Record
	err   error
}

func (l *listerFunc) Documents(context.Context) (map[string]string, error) {
	l.loads.Add(1)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return nil, l.err
	}
	out := map[string]string{}
	for _, r := range l.recs {
		b, _ := json.Marshal(r)
		out[r.ID] = string(b)
	}
	return out, nil
}

func (l *listerFunc) Document(_ context.Context, id string) (string, error) {
	l.reads.Add(1)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return "", l.err
	}
	for _, r := range l.recs {
		if r.ID == id {
			b, _ := json.Marshal(r)
			return string(b), nil
		}
	}
	return "", fmt.Errorf("%w %q", registry.ErrUnknown, id)
}

func (l *listerFunc) set(err error, recs ...registry.Record) {
	l.mu.Lock()
	l.recs, l.err = recs, err
	l.mu.Unlock()
}

func newCache(src registry.Source) (*registry.Cache, *clocktest.Clock) {
	clk := clocktest.At(time.Date(2027, 3, 1, 12, 0, 0, 0, time.UTC))
	c := registry.NewCache(src)
	c.Now = clk.Now
	return c, clk
}

func TestCacheTTLAndMiss(t *testing.T) {
	src := &listerFunc{}
	src.set(nil, seller("acme"))
	c, clk := newCache(src)
	ctx := context.Background()
	if err := c.Load(ctx); err != nil {
		t.Fatal(err)
	}
	step := func(name, id string, wantErr error, wantLoads, wantReads int32) {
		t.Helper()
		_, err := c.Lookup(ctx, id)
		if wantErr == nil && err != nil || wantErr != nil && !errors.Is(err, wantErr) {
			t.Fatalf("%s: %v, want %v", name, err, wantErr)
		}
		if l, r := src.loads.Load(), src.reads.Load(); l != wantLoads || r != wantReads {
			t.Fatalf("%s: %d loads and %d reads, want %d and %d", name, l, r, wantLoads, wantReads)
		}
	}
	step("cached", "acme", nil, 1, 0)
	// An operator adds beta right after the cold start: the next lookup reads it at once.
	src.set(nil, seller("acme"), seller("beta"))
	step("a miss reads that agent", "beta", nil, 1, 1)
	step("then it is cached", "beta", nil, 1, 1)
	step("an unknown id is read once", "nobody", adcp.ErrUnknownAgent, 1, 2)
	step("and not again within the gap", "nobody", registry.ErrUnknown, 1, 2)
	clk.Advance(registry.DefaultMissGap)
	step("after the gap it is read again", "nobody", registry.ErrUnknown, 1, 3)
	// The table goes down: past the TTL, the cache keeps answering from what it has.
	src.set(errors.New("table unavailable"))
	clk.Advance(registry.DefaultTTL)
	step("stale, table down: served from the cache", "acme", nil, 2, 3)
	step("no hammering within the gap", "beta", nil, 2, 3)
	src.set(nil, seller("acme"))
	clk.Advance(registry.DefaultMissGap)
	step("table back: beta was removed", "beta", registry.ErrUnknown, 3, 4)
}

func TestCacheFirstLoadFailureIsAnError(t *testing.T) {
	src := &listerFunc{}
	src.set(errors.New("AccessDenied"))
	c, _ := newCache(src)
	if err := c.Load(context.Background()); err == nil {
		t.Fatal("a failed cold-start load reported success")
	}
	_, err := c.Lookup(context.Background(), "acme")
	if err == nil || errors.Is(err, adcp.ErrUnknownAgent) {
		t.Fatalf("an unreadable registry answered %v: it must not read as an unknown agent", err)
	}
}

func TestCacheDisabledAgentsStillServeOpenWork(t *testing.T) {
	src := &listerFunc{}
	off := seller("acme")
	off.Disabled = true
	src.set(nil, off)
	c, _ := newCache(src)
	a, err := c.Agent(context.Background(), "acme")
	if err != nil || a.ID != "acme" {
		t.Fatalf("Agent of a disabled seller = %+v, %v", a, err)
	}
	r, err := c.Lookup(context.Background(), "acme")
	if err != nil || !r.Disabled {
		t.Fatalf("Lookup = %+v, %v", r, err)
	}
}

func TestCacheValidDropsRefusedRecords(t *testing.T) {
	src := &listerFunc{}
	bad := seller("rogue")
	bad.CredentialRef = "prod/db-password"
	src.set(nil, seller("acme"), bad)
	c, _ := newCache(src)
	c.Valid = func(r registry.Record) error { return registry.Validate(r, "buyflow/agents/") }
	if _, err := c.Lookup(context.Background(), "rogue"); !errors.Is(err, registry.ErrUnknown) {
		t.Fatalf("a record outside the secret prefix was served: %v", err)
	}
	all, err := c.All(context.Background())
	if err != nil || len(all) != 1 {
		t.Fatalf("All = %+v, %v", all, err)
	}
}

func TestCacheConcurrentMissesCostOneLoad(t *testing.T) {
	src := &listerFunc{}
	src.set(nil, seller("acme"))
	c, _ := newCache(src)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() { _, _ = c.Lookup(context.Background(), "acme") })
	}
	wg.Wait()
	if n := src.loads.Load(); n != 1 {
		t.Fatalf("%d loads for 32 concurrent first lookups", n)
	}
}

// TestCurrentSeesADisableAtOnce: Current reads the agent as stored now, not as a warm cache
// loaded it, and keeps what it read.
func TestCurrentSeesADisableAtOnce(t *testing.T) {
	src := &listerFunc{}
	src.set(nil, seller("acme"))
	c, _ := newCache(src)
	ctx := context.Background()
	if r, err := c.Current(ctx, "acme"); err != nil || r.Disabled || r.Role != "seller" {
		t.Fatalf("Current = %+v, %v", r, err)
	}
	off := seller("acme")
	off.Disabled = true
	src.set(nil, off)
	if r, err := c.Current(ctx, "acme"); err != nil || !r.Disabled {
		t.Fatalf("after the disable: %+v, %v", r, err)
	}
	if r, err := c.Lookup(ctx, "acme"); err != nil || !r.Disabled {
		t.Fatalf("the cache did not keep what it read: %+v, %v", r, err)
	}
	if _, err := c.Current(ctx, "nobody"); !errors.Is(err, registry.ErrUnknown) {
		t.Fatalf("unknown: %v", err)
	}
	src.set(errors.New("table unavailable"))
	if _, err := c.Current(ctx, "acme"); err == nil || errors.Is(err, registry.ErrUnknown) {
		t.Fatalf("an unreadable registry answered %v", err)
	}
}
