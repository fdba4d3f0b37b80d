package notify_test

import (
	"maps"
	"testing"

	"github.com/buyflow/buyflow/internal/metrics/metricstest"
)

// emfPoint is one metric of one EMF line.
type emfPoint = metricstest.Point

// parseEMF reads the EMF lines in out and returns their metrics by name. Each line must be a
// JSON object with _aws.Timestamp and one directive in the Buyflow namespace whose dimension
// keys are root strings and whose declared metrics are root numbers (or number arrays).
func parseEMF(t *testing.T, out string) map[string][]emfPoint {
	t.Helper()
	return metricstest.Parse(t, out)
}

// flushEMF flushes rec and parses what it wrote to buf (then empties buf).
func (e *env) flushEMF() map[string][]emfPoint {
	e.t.Helper()
	if err := e.rec.Flush(); err != nil {
		e.t.Fatal(err)
	}
	out := e.emf.String()
	e.emf.mu.Lock()
	e.emf.b.Reset()
	e.emf.mu.Unlock()
	return parseEMF(e.t, out)
}

// point returns the value of metric name with exactly dims (nil: no dimensions).
func point(got map[string][]emfPoint, name string, dims map[string]string) (emfPoint, bool) {
	if dims == nil {
		dims = map[string]string{}
	}
	for _, p := range got[name] {
		if maps.Equal(p.Dims, dims) {
			return p, true
		}
	}
	return emfPoint{}, false
}
