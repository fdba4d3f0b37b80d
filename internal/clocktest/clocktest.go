// Package clocktest is the clock of buyflow's tests: one value every part of a test's world
// reads the time from (the ledger, the agents, the signers, the use cases), moved on by the
// test instead of by sleeping. Only tests import it.
package clocktest

import (
	"sync"
	"time"
)

// Clock is a test clock, safe for concurrent use. A clock from At stands still until Advance
// moves it; one from Real runs with the real time, shifted by every Advance (for worlds with
// parts that keep real time, such as an emulator's or an agent's own deadlines).
type Clock struct {
	mu     sync.Mutex
	real   bool
	base   time.Time
	offset time.Duration
}

// At returns a clock standing at t.
func At(t time.Time) *Clock { return &Clock{base: t} }

// Real returns a clock running with the real time, in UTC.
func Real() *Clock { return &Clock{real: true} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.real {
		return time.Now().Add(c.offset).UTC()
	}
	return c.base.Add(c.offset)
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}
