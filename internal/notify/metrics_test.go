package notify_test

import (
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/approvaltest"
	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/metrics/metricstest"
)

func TestExpiryRecordsOneApprovalTimeout(t *testing.T) {
	e := approvaltest.NewEnv(t, "")
	e.Request(approvaltest.Token(1))
	e.Clock.Advance(approvaltest.TimeoutSeconds * time.Second)
	e.Expire()
	got := e.Metrics.Flush()
	if p, ok := metricstest.Find(got, metrics.Timeouts, map[string]string{"Kind": metrics.TimeoutApproval}); !ok || p.Value != 1.0 || p.Unit != metrics.UnitCount {
		t.Errorf("Timeouts{Kind=approval} = %+v (found %v), want 1", p, ok)
	}
	if len(got) != 1 {
		t.Errorf("an expiry recorded %v, want only Timeouts", got)
	}
	// A retried expire finds the approval already expired: not a second timeout.
	e.Expire()
	if got := e.Metrics.Flush(); len(got) != 0 {
		t.Errorf("a retried expire recorded %v", got)
	}
}

func TestExpiryAfterADecisionIsNoTimeout(t *testing.T) {
	e := approvaltest.NewEnv(t, "")
	id := e.Request(approvaltest.Token(1))
	e.Post(e.Link(id, approvaltest.Alice), "approve", "")
	e.Metrics.Flush()
	e.Expire()
	if got := e.Metrics.Flush(); len(got) != 0 {
		t.Errorf("expire after a decision recorded %v", got)
	}
}
