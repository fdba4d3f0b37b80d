package ledger_test

import (
	"sync"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/ledger"
)

// clock is a settable clock shared by a test's goroutines.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// newStore returns a Store over a fresh table (kumo, or moto in the second run) with a clock
// starting at a fixed instant.
func newStore(t *testing.T) (*ledger.Store, *clock) {
	t.Helper()
	client, table := dynamotest.Start(t)
	// Far in the future: kumo's TTL reaper (real clock, every 30 s) must never delete test items.
	clk := &clock{t: time.Date(2099, 1, 1, 12, 0, 0, 0, time.UTC)}
	s := ledger.New(client, table)
	s.Now = clk.Now
	return s, clk
}
