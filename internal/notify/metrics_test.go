package notify_test

import (
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/metrics"
)

func TestExpiryRecordsOneApprovalTimeout(t *testing.T) {
	e := newEnv(t, "")
	e.request(token(1))
	e.clk.Advance(timeout * time.Second)
	e.expire()
	got := e.flushEMF()
	if p, ok := point(got, metrics.Timeouts, map[string]string{"Kind": metrics.TimeoutApproval}); !ok || p.Value != 1.0 || p.Unit != metrics.UnitCount {
		t.Errorf("Timeouts{Kind=approval} = %+v (found %v), want 1", p, ok)
	}
	if len(got) != 1 {
		t.Errorf("an expiry recorded %v, want only Timeouts", got)
	}
	// A retried expire finds the approval already expired: not a second timeout.
	e.expire()
	if got := e.flushEMF(); len(got) != 0 {
		t.Errorf("a retried expire recorded %v", got)
	}
}

func TestExpiryAfterADecisionIsNoTimeout(t *testing.T) {
	e := newEnv(t, "")
	id := e.request(token(1))
	e.post(e.link(id, alice), "approve", "")
	e.flushEMF()
	e.expire()
	if got := e.flushEMF(); len(got) != 0 {
		t.Errorf("expire after a decision recorded %v", got)
	}
}
