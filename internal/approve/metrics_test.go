package approve_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/approvaltest"
	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/metrics/metricstest"
)

func TestDecisionRecordsLatencyAndOutcome(t *testing.T) {
	cases := []struct {
		decision, outcome string
		rejected          bool
	}{
		{"approve", "approved", false},
		{"reject", "rejected", true},
	}
	for _, c := range cases {
		t.Run(c.outcome, func(t *testing.T) {
			e := approvaltest.NewEnv(t, "")
			id := e.Request(approvaltest.Token(1))
			if got := e.Metrics.Flush(); len(got) != 0 {
				t.Errorf("a request recorded metrics: %v", got)
			}
			e.Clock.Advance(90 * time.Second)
			if resp := e.Post(e.Link(id, approvaltest.Alice), c.decision, ""); resp.StatusCode != http.StatusOK {
				t.Fatalf("POST = %d", resp.StatusCode)
			}
			got := e.Metrics.Flush()
			outcome := map[string]string{"Outcome": c.outcome}
			if p, ok := metricstest.Find(got, metrics.ApprovalLatency, outcome); !ok || p.Value != 90000.0 || p.Unit != metrics.UnitMilliseconds {
				t.Errorf("ApprovalLatency{Outcome=%s} = %+v (found %v), want 90000 ms", c.outcome, p, ok)
			}
			if p, ok := metricstest.Find(got, metrics.ApprovalDecided, outcome); !ok || p.Value != 1.0 || p.Unit != metrics.UnitCount {
				t.Errorf("ApprovalDecided{Outcome=%s} = %+v (found %v), want 1", c.outcome, p, ok)
			}
			p, ok := metricstest.Find(got, metrics.ApprovalRejected, nil)
			switch {
			case c.rejected && (!ok || p.Value != 1.0):
				t.Errorf("ApprovalRejected = %+v (found %v), want 1", p, ok)
			case !c.rejected && ok:
				t.Errorf("ApprovalRejected recorded for an approval: %+v", p)
			}
		})
	}
}

func TestRepeatedClicksAndRetriedHandOversCountOneDecision(t *testing.T) {
	e := approvaltest.NewEnv(t, "")
	id := e.Request(approvaltest.Token(1))
	u := e.Link(id, approvaltest.Alice)
	down := true
	e.Tasks.OnCall = func(approvaltest.TaskCall) error {
		if down {
			return errors.New("states: throttled")
		}
		return nil
	}
	e.Clock.Advance(time.Minute)
	if resp := e.Post(u, "approve", ""); resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("POST while Step Functions fails = %d", resp.StatusCode)
	}
	got := e.Metrics.Flush()
	if p, ok := metricstest.Find(got, metrics.ApprovalDecided, map[string]string{"Outcome": "approved"}); !ok || p.Value != 1.0 {
		t.Errorf("ApprovalDecided = %+v (found %v), want 1 for the recorded decision", p, ok)
	}

	// The decider's retry of the hand-over, another approver too late, a double click: no
	// decision metric (each is an invocation of its own, flushed on its own).
	down = false
	e.Clock.Advance(time.Minute)
	if resp := e.Post(u, "approve", ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("retry = %d", resp.StatusCode)
	}
	if got := e.Metrics.Flush(); len(got) != 0 {
		t.Errorf("the hand-over retry recorded %v", got)
	}
	for _, who := range []string{approvaltest.Bob, approvaltest.Alice} {
		if resp := e.Post(e.Link(id, who), "reject", ""); resp.StatusCode != http.StatusConflict {
			t.Errorf("%s's click after the decision = %d", who, resp.StatusCode)
		}
		if got := e.Metrics.Flush(); len(got) != 0 {
			t.Errorf("%s's click after the decision recorded %v", who, got)
		}
	}
}
