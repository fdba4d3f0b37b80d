package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
)

// Cache defaults. A change made through the API reaches every warm function within
// DefaultTTL; an agent just added is found at once (a miss reads that one agent, and an id
// still unknown is not read again for DefaultMissGap, so unknown ids cannot hammer the table).
const (
	DefaultTTL     = 30 * time.Second
	DefaultMissGap = 2 * time.Second
)

// Source reads the registry's stored documents, undecoded: all of them by id, or one (an
// error wrapping ErrUnknown when it is not there); *Store satisfies it.
type Source interface {
	Documents(ctx context.Context) (map[string]string, error)
	Document(ctx context.Context, id string) (string, error)
}

// Cache is a function's view of the registry: loaded whole at cold start (Load), reloaded
// when older than TTL; a lookup of an id it does not have reads that one agent. When a reload
// fails it keeps answering from what it has (a table outage must not stop open buys) and
// tries again at the next lookup after MissGap. Safe for concurrent use.
type Cache struct {
	src Source
	// TTL is how long a load is fresh; MissGap the shortest gap between two reloads.
	TTL, MissGap time.Duration
	// Valid, when set, drops records it refuses (for example a credential outside the
	// function's secret prefix), as if they were not in the registry.
	Valid func(Record) error
	// Now is the clock.
	Now func() time.Time

	loadMu   sync.Mutex // one reload at a time: concurrent misses cost one Query
	mu       sync.RWMutex
	byID     map[string]*entry
	loadedAt time.Time // last successful load; zero before the first
	lastTry  time.Time // last attempt, successful or not
	misses   map[string]time.Time
}

// entry is one agent as loaded: its document, decoded and checked on first use (a function
// uses a few of the agents it loads).
type entry struct {
	doc  string
	once sync.Once
	rec  Record
	err  error
}

func (c *Cache) decoded(e *entry) (Record, error) {
	e.once.Do(func() {
		if err := json.Unmarshal([]byte(e.doc), &e.rec); err != nil {
			e.err = fmt.Errorf("registry: decode stored agent: %w", err)
			return
		}
		if c.Valid != nil {
			e.err = c.Valid(e.rec)
		}
	})
	return e.rec, e.err
}

// NewCache returns a cache over src with the default TTL and miss gap.
func NewCache(src Source) *Cache {
	return &Cache{src: src, TTL: DefaultTTL, MissGap: DefaultMissGap, Now: time.Now}
}

// Load reads the registry now. A function calls it at cold start, so that a missing table or
// permission fails the start instead of the first buy.
func (c *Cache) Load(ctx context.Context) error {
	c.loadMu.Lock()
	defer c.loadMu.Unlock()
	return c.loadLocked(ctx)
}

func (c *Cache) loadLocked(ctx context.Context) error {
	now := c.Now()
	c.mu.Lock()
	c.lastTry = now
	c.mu.Unlock()
	docs, err := c.src.Documents(ctx)
	if err != nil {
		return err
	}
	byID := make(map[string]*entry, len(docs))
	for id, doc := range docs {
		byID[id] = &entry{doc: doc}
	}
	c.mu.Lock()
	c.byID, c.loadedAt = byID, now
	c.mu.Unlock()
	return nil
}

// reload loads again unless another caller did within MissGap (or, when onlyIfStale, within
// TTL). It reports the load's error only when the cache has never loaded.
func (c *Cache) reload(ctx context.Context, onlyIfStale bool) error {
	c.loadMu.Lock()
	defer c.loadMu.Unlock()
	c.mu.RLock()
	loadedAt, lastTry, loaded := c.loadedAt, c.lastTry, c.byID != nil
	c.mu.RUnlock()
	now := c.Now()
	if onlyIfStale && loaded && now.Sub(loadedAt) < c.TTL {
		return nil // another caller reloaded while this one waited
	}
	if !lastTry.IsZero() && now.Sub(lastTry) < c.MissGap {
		if loaded {
			return nil
		}
		return fmt.Errorf("registry: registry unavailable (last load failed less than %s ago)", c.MissGap)
	}
	if err := c.loadLocked(ctx); err != nil && !loaded {
		return err
	}
	return nil
}

// Lookup returns the agent id names, disabled or not, or an error wrapping ErrUnknown (and
// adcp.ErrUnknownAgent). A stored agent that Valid refuses (or that does not decode) is
// unknown too. Any other error means the registry could not be read: the caller answers it
// as a temporary failure, never as an unknown agent.
func (c *Cache) Lookup(ctx context.Context, id string) (Record, error) {
	c.mu.RLock()
	e, ok := c.byID[id]
	stale := c.byID == nil || c.Now().Sub(c.loadedAt) >= c.TTL
	c.mu.RUnlock()
	if stale {
		if err := c.reload(ctx, ok); err != nil {
			return Record{}, err
		}
		c.mu.RLock()
		e, ok = c.byID[id]
		c.mu.RUnlock()
	}
	if !ok {
		var err error
		if e, err = c.readOne(ctx, id); err != nil {
			return Record{}, err
		}
	}
	r, err := c.decoded(e)
	if err != nil {
		return Record{}, fmt.Errorf("%w %q (%w)", ErrUnknown, id, err)
	}
	return r, nil
}

// readOne reads agent id, which the cache does not have, and keeps it; an id found unknown
// is not read again for MissGap.
func (c *Cache) readOne(ctx context.Context, id string) (*entry, error) {
	now := c.Now()
	c.mu.RLock()
	missed, seen := c.misses[id]
	c.mu.RUnlock()
	if seen && now.Sub(missed) < c.MissGap {
		return nil, fmt.Errorf("%w %q", ErrUnknown, id)
	}
	doc, err := c.src.Document(ctx, id)
	c.mu.Lock()
	defer c.mu.Unlock()
	if errors.Is(err, ErrUnknown) {
		if c.misses == nil || len(c.misses) > 10_000 {
			c.misses = map[string]time.Time{} // bounded: forgetting a miss costs one read
		}
		c.misses[id] = now
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	delete(c.misses, id)
	e := &entry{doc: doc}
	if c.byID == nil {
		c.byID = map[string]*entry{}
	}
	c.byID[id] = e
	return e, nil
}

// Agent returns the AdCP configuration of agent id, disabled or not: open work always
// finishes. It satisfies adcp.Agents.
func (c *Cache) Agent(ctx context.Context, id string) (adcp.Agent, error) {
	r, err := c.Lookup(ctx, id)
	if err != nil {
		return adcp.Agent{}, err
	}
	return r.Agent, nil
}

// Refresh reloads now unless the last attempt was less than MissGap ago: for a caller that
// learnt the registry may have changed (a webhook signed with a key id it does not know).
func (c *Cache) Refresh(ctx context.Context) error { return c.reload(ctx, false) }

// All returns every agent the cache holds (those Valid accepts), sorted by id, reloading
// first if it is stale.
func (c *Cache) All(ctx context.Context) ([]Record, error) {
	c.mu.RLock()
	stale := c.byID == nil || c.Now().Sub(c.loadedAt) >= c.TTL
	c.mu.RUnlock()
	if stale {
		if err := c.reload(ctx, true); err != nil {
			return nil, err
		}
	}
	c.mu.RLock()
	entries := make([]*entry, 0, len(c.byID))
	for _, e := range c.byID {
		entries = append(entries, e)
	}
	c.mu.RUnlock()
	out := make([]Record, 0, len(entries))
	for _, e := range entries {
		if r, err := c.decoded(e); err == nil {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

var _ adcp.Agents = (*Cache)(nil)

// ForFunction is a function's registry: the store in table, cached, with every record whose
// secrets lie outside secretPrefix (the only secrets the function may read) left out. It has
// not read anything yet: a function that only asks Current (submit) needs no load.
func ForFunction(api API, table, secretPrefix string) *Cache {
	c := NewCache(NewStore(api, table))
	c.Valid = func(r Record) error { return Validate(r, secretPrefix) }
	return c
}

// Open is ForFunction loaded once now, at cold start, so that a missing table or permission
// fails the cold start instead of the first invocation.
func Open(ctx context.Context, api API, table, secretPrefix string) (*Cache, error) {
	c := ForFunction(api, table, secretPrefix)
	if err := c.Load(ctx); err != nil {
		return nil, fmt.Errorf("registry: load the registry from %s: %w", table, err)
	}
	return c, nil
}

// Current reads agent id from the store now (one consistent read) and refreshes the cache with
// it: for the decisions that must see the latest change at once, such as placing a new buy at
// an agent an operator disabled a second ago. An unknown id is an error wrapping ErrUnknown.
func (c *Cache) Current(ctx context.Context, id string) (Record, error) {
	doc, err := c.src.Document(ctx, id)
	if err != nil {
		return Record{}, err
	}
	e := &entry{doc: doc}
	r, err := c.decoded(e)
	if err != nil {
		return Record{}, fmt.Errorf("%w %q (%w)", ErrUnknown, id, err)
	}
	c.mu.Lock()
	if c.byID == nil {
		c.byID = map[string]*entry{}
	}
	c.byID[id] = e
	c.mu.Unlock()
	return r, nil
}
