package ledger

import (
	"sync"

	"github.com/buyflow/buyflow/internal/record"
)

// maxOpOwners bounds opOwners: ten thousand operations (a megabyte or two) are more than one
// webhook instance sees in its lifetime between deliveries of the same buy.
const maxOpOwners = 10_000

// opOwners remembers who owns an operation id, as the operation index said. The index item is
// written once with the operation and never updated, so an entry can never be stale: a
// seller's second webhook for a buy (working, then completed) skips the index read. When full,
// it starts over.
type opOwners struct {
	mu sync.Mutex
	m  map[string]record.OperationOwner
}

func (c *opOwners) get(id string) (owner record.OperationOwner, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	owner, ok = c.m[id]
	return owner, ok
}

func (c *opOwners) put(id string, owner record.OperationOwner) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxOpOwners {
		c.m = make(map[string]record.OperationOwner)
	}
	c.m[id] = owner
}
