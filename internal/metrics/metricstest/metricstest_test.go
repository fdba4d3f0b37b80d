package metricstest_test

import (
	"sync"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/metrics/metricstest"
)

// A Sink's Flush returns what was recorded since the last one, and Find tells dimension sets
// apart exactly: no dimensions is not a subset of some.
func TestSinkFlushesEachStepAndFindMatchesExactDimensions(t *testing.T) {
	s := metricstest.NewSink(t, func() time.Time { return time.Unix(1700000000, 0) })
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { s.Recorder.Count(metrics.Timeouts, metrics.Dims{"Kind": "approval"}, 1) })
	}
	wg.Wait()
	s.Recorder.Count(metrics.Timeouts, nil, 2)
	s.Recorder.Duration(metrics.ApprovalLatency, metrics.Dims{"Outcome": "approved"}, 1500*time.Millisecond)
	got := s.Flush()

	if p, ok := metricstest.Find(got, metrics.Timeouts, map[string]string{"Kind": "approval"}); !ok || p.Value != 4.0 || p.Unit != metrics.UnitCount {
		t.Errorf("Timeouts{Kind=approval} = %+v (found %v), want 4 Count", p, ok)
	}
	if p, ok := metricstest.Find(got, metrics.Timeouts, nil); !ok || p.Value != 2.0 {
		t.Errorf("Timeouts{} = %+v (found %v), want 2", p, ok)
	}
	if p, ok := metricstest.Find(got, metrics.ApprovalLatency, map[string]string{"Outcome": "approved"}); !ok || p.Unit != metrics.UnitMilliseconds {
		t.Errorf("ApprovalLatency{Outcome=approved} = %+v (found %v), want milliseconds", p, ok)
	}
	for _, miss := range []struct {
		name string
		dims map[string]string
	}{
		{metrics.Timeouts, map[string]string{"Kind": "governance_review"}},
		{metrics.Timeouts, map[string]string{"Kind": "approval", "Extra": "x"}},
		{metrics.ApprovalLatency, nil},
		{metrics.ApprovalDecided, nil},
	} {
		if p, ok := metricstest.Find(got, miss.name, miss.dims); ok {
			t.Errorf("Find(%s, %v) = %+v, want none", miss.name, miss.dims, p)
		}
	}
	if again := s.Flush(); len(again) != 0 {
		t.Errorf("a second flush returned %v, want nothing", again)
	}
}
