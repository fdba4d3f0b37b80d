package reconcile

import (
	"context"
	"sync"
	"time"

	"github.com/buyflow/buyflow/internal/ctxwait"
)

// pollBudget paces one seller's direct status reads within a run, so that reading every
// pending task each minute never floods a seller: at most Config.PollConcurrency reads at
// once, at most Config.PollRate starts per second, and none before the retry_after the seller
// last asked for.
type pollBudget struct {
	slots    chan struct{}
	interval time.Duration // between two starts
	now      func() time.Time
	deadline time.Time // the run's

	mu          sync.Mutex
	next        time.Time // earliest start of the next read
	pausedUntil time.Time
}

func newPollBudget(concurrency int, rate float64, now func() time.Time, deadline time.Time) *pollBudget {
	return &pollBudget{slots: make(chan struct{}, concurrency), interval: time.Duration(float64(time.Second) / rate),
		now: now, deadline: deadline}
}

// acquire waits for a slot and for the read's turn. It returns false, holding nothing, when
// that turn comes at or after the run's deadline, or ctx ends: the read must not start.
func (b *pollBudget) acquire(ctx context.Context) bool {
	select {
	case b.slots <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	b.mu.Lock()
	at := latest(b.now(), b.next, b.pausedUntil)
	if !at.Before(b.deadline) {
		b.mu.Unlock()
		<-b.slots
		return false
	}
	b.next = at.Add(b.interval)
	b.mu.Unlock()
	if wait := at.Sub(b.now()); wait > 0 && ctxwait.Sleep(ctx, wait) != nil {
		<-b.slots
		return false
	}
	return true
}

func (b *pollBudget) release() { <-b.slots }

// pause holds every later read until the seller's retry_after has passed.
func (b *pollBudget) pause(d time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pausedUntil = latest(b.pausedUntil, b.now().Add(d))
}

func latest(ts ...time.Time) time.Time {
	var out time.Time
	for _, t := range ts {
		if t.After(out) {
			out = t
		}
	}
	return out
}

// pausedPastRun returns until when the seller asked not to be called, if that is after the run.
func (b *pollBudget) pausedPastRun() (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.pausedUntil, !b.pausedUntil.Before(b.deadline)
}
