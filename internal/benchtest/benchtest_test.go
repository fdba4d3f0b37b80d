package benchtest_test

import (
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/benchtest"
)

func TestPercentile(t *testing.T) {
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	for _, c := range []struct {
		sample []int
		p      int
		want   int
	}{
		{hundred, 0, 1}, {hundred, 50, 51}, {hundred, 95, 96}, {hundred, 99, 100}, {hundred, 100, 100},
		{[]int{7}, 50, 7}, {[]int{1, 2}, 50, 2}, {[]int{1, 2, 3}, 50, 2},
	} {
		if got := benchtest.Percentile(c.sample, c.p); got != c.want {
			t.Errorf("Percentile(%d values, %d) = %d, want %d", len(c.sample), c.p, got, c.want)
		}
	}
	if got := benchtest.Percentile([]time.Duration{time.Second, 2 * time.Second}, 50); got != 2*time.Second {
		t.Errorf("durations: %s", got)
	}
}

// TestPercentileIsTheSimulationsRank: the statemachine tables' p50 and p95 were read at rank
// int(p·n) computed in floating point; the integer rank is the same for every sample size.
func TestPercentileIsTheSimulationsRank(t *testing.T) {
	for n := 1; n <= 10_000; n++ {
		sample := make([]int, n)
		for i := range sample {
			sample[i] = i
		}
		for _, p := range []struct {
			percent  int
			fraction float64
		}{{50, 0.5}, {95, 0.95}} {
			if got, want := benchtest.Percentile(sample, p.percent), min(n-1, int(p.fraction*float64(n))); got != want {
				t.Fatalf("n=%d p=%d: rank %d, the simulations read %d", n, p.percent, got, want)
			}
		}
	}
}

func TestMillis(t *testing.T) {
	if got := benchtest.Millis(1500 * time.Microsecond); got != 1.5 {
		t.Errorf("Millis = %v", got)
	}
}
