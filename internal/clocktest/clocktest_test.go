package clocktest_test

import (
	"sync"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/clocktest"
)

func TestAtStandsStillUntilAdvanced(t *testing.T) {
	t0 := time.Date(2099, 1, 1, 12, 0, 0, 0, time.UTC)
	c := clocktest.At(t0)
	if got := c.Now(); !got.Equal(t0) {
		t.Fatalf("Now = %v, want %v", got, t0)
	}
	time.Sleep(2 * time.Millisecond)
	if got := c.Now(); !got.Equal(t0) {
		t.Fatalf("a standing clock moved on its own: %v", got)
	}
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() { c.Advance(time.Minute) })
	}
	wg.Wait()
	if got, want := c.Now(), t0.Add(10*time.Minute); !got.Equal(want) {
		t.Fatalf("after ten concurrent minutes Now = %v, want %v", got, want)
	}
}

func TestRealRunsWithTheRealTimeShifted(t *testing.T) {
	c := clocktest.Real()
	before := time.Now()
	got := c.Now()
	if got.Before(before) || got.After(time.Now()) || got.Location() != time.UTC {
		t.Fatalf("Now = %v, want the real time in UTC (after %v)", got, before)
	}
	c.Advance(time.Hour)
	before = time.Now().Add(time.Hour)
	got = c.Now()
	if got.Before(before) || got.After(time.Now().Add(time.Hour)) {
		t.Fatalf("after Advance(1h) Now = %v, want the real time plus an hour (after %v)", got, before)
	}
}
