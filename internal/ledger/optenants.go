package ledger

import "sync"

// maxOpTenants bounds opTenants: ten thousand operations (under a megabyte) are more than one
// webhook instance sees in its lifetime between deliveries of the same buy.
const maxOpTenants = 10_000

// opTenants remembers which tenant owns an operation id, as the operation index said. The
// index item is written once with the operation and never updated, so an entry can never be
// stale: a seller's second webhook for a buy (working, then completed) reads only the
// operation, one table round trip instead of two. When full, it starts over.
type opTenants struct {
	mu sync.Mutex
	m  map[string]string
}

func (c *opTenants) get(id string) (tenant string, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	tenant, ok = c.m[id]
	return tenant, ok
}

func (c *opTenants) put(id, tenant string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxOpTenants {
		c.m = make(map[string]string)
	}
	c.m[id] = tenant
}
