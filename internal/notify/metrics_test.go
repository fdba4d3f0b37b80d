package notify_test

import (
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/metrics/metricstest"
)

func TestExpiryRecordsOneApprovalTimeout(t *testing.T) {
	e := newEnv(t, "")
	e.request(token(1))
	e.clk.Advance(timeout * time.Second)
	e.expire()
	got := e.metrics.Flush()
	if p, ok := metricstest.Find(got, metrics.Timeouts, map[string]string{"Kind": metrics.TimeoutApproval}); !ok || p.Value != 1.0 || p.Unit != metrics.UnitCount {
		t.Errorf("Timeouts{Kind=approval} = %+v (found %v), want 1", p, ok)
	}
	if len(got) != 1 {
		t.Errorf("an expiry recorded %v, want only Timeouts", got)
	}
	// A retried expire finds the approval already expired: not a second timeout.
	e.expire()
	if got := e.metrics.Flush(); len(got) != 0 {
		t.Errorf("a retried expire recorded %v", got)
	}
}

func TestExpiryAfterADecisionIsNoTimeout(t *testing.T) {
	e := newEnv(t, "")
	id := e.request(token(1))
	e.post(e.link(id, alice), "approve", "")
	e.metrics.Flush()
	e.expire()
	if got := e.metrics.Flush(); len(got) != 0 {
		t.Errorf("expire after a decision recorded %v", got)
	}
}
