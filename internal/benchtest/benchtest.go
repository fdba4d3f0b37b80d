// Package benchtest holds what the benchmarks and the simulations that print figures share:
// the percentile of a sorted sample, and a duration in milliseconds for a reported metric.
// Only tests import it.
package benchtest

import (
	"cmp"
	"time"
)

// Percentile returns the p-th percentile (p from 0 to 100) of sorted, a non-empty sample in
// ascending order: the value at 0-based rank ⌊n·p/100⌋, the smallest value with more than
// p % of the sample at or below it (the upper median for p = 50; the maximum for p = 100).
func Percentile[T cmp.Ordered](sorted []T, p int) T {
	return sorted[min(len(sorted)*p/100, len(sorted)-1)]
}

// Millis is d in milliseconds, to the microsecond, for testing.B.ReportMetric.
func Millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
