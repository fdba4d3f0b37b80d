package waiting

import (
	"testing"
	"time"
)

// Calls made at once count once in a function's "calls" hop, and only their part inside the
// function's span counts: "own" is the time no call was in flight.
func TestCoveredCountsCallsAtOnceOnce(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	at := func(ms float64) time.Time { return t0.Add(time.Duration(ms * float64(time.Millisecond))) }
	for _, c := range []struct {
		name  string
		spans []span
		want  time.Duration
	}{
		{"none", nil, 0},
		{"one", []span{{at(1), at(2)}}, time.Millisecond},
		{"three at once, then one", []span{{at(2), at(3.5)}, {at(1), at(3)}, {at(1.2), at(2.5)}, {at(4), at(6)}}, 4500 * time.Microsecond},
		{"one inside another", []span{{at(1), at(5)}, {at(2), at(3)}}, 4 * time.Millisecond},
		{"clipped to the function's span", []span{{at(-1), at(1)}, {at(9), at(12)}}, 2 * time.Millisecond},
	} {
		if got := covered(c.spans, at(0), at(10)); got != c.want {
			t.Errorf("%s: covered = %v, want %v", c.name, got, c.want)
		}
	}
}
