package agents_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/agents"
)

// listerFunc counts the loads and can fail them.
type listerFunc struct {
	loads atomic.Int32
	mu    sync.Mutex
	recs  []agents.Record
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

func (l *listerFunc) set(err error, recs ...agents.Record) {
	l.mu.Lock()
	l.recs, l.err = recs, err
	l.mu.Unlock()
}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func newCache(src agents.Source) (*agents.Cache, *clock) {
	clk := &clock{now: time.Date(2027, 3, 1, 12, 0, 0, 0, time.UTC)}
	c := agents.NewCache(src)
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
	step := func(name, id string, wantErr error, wantLoads int32) {
		t.Helper()
		_, err := c.Lookup(ctx, id)
		if wantErr == nil && err != nil || wantErr != nil && !errors.Is(err, wantErr) {
			t.Fatalf("%s: %v, want %v", name, err, wantErr)
		}
		if got := src.loads.Load(); got != wantLoads {
			t.Fatalf("%s: %d loads, want %d", name, got, wantLoads)
		}
	}
	step("cached", "acme", nil, 1)
	step("a miss right after a load does not reload", "beta", agents.ErrUnknown, 1)
	// An operator adds beta: the next lookup after the miss gap finds it without waiting out the TTL.
	src.set(nil, seller("acme"), seller("beta"))
	clk.advance(agents.DefaultMissGap)
	step("a miss reloads", "beta", nil, 2)
	step("unknown ids within the gap cost nothing", "nobody", adcp.ErrUnknownAgent, 2)
	step("still cached", "acme", nil, 2)
	// The table goes down: past the TTL, the cache keeps answering from what it has.
	src.set(errors.New("table unavailable"))
	clk.advance(agents.DefaultTTL)
	step("stale, table down: served from the cache", "acme", nil, 3)
	step("no hammering within the gap", "beta", nil, 3)
	src.set(nil, seller("acme"))
	clk.advance(agents.DefaultMissGap)
	step("table back: beta was removed", "beta", agents.ErrUnknown, 4)
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
	c.Valid = func(r agents.Record) error { return agents.Validate(r, "buyflow/agents/") }
	if _, err := c.Lookup(context.Background(), "rogue"); !errors.Is(err, agents.ErrUnknown) {
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
