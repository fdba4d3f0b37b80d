package governance_test

import (
	"bytes"
	"context"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/adcptest"
	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/metrics/metricstest"
	"github.com/buyflow/buyflow/internal/stage"
	"github.com/buyflow/buyflow/internal/workflow"
)

// emfSink is where a test's recorder writes; flush parses what one invocation recorded.
type emfSink struct {
	t   *testing.T
	rec *metrics.Recorder
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *emfSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

// withMetrics rebuilds the env's stages with a metrics recorder.
func (e *env) withMetrics() *emfSink {
	e.t.Helper()
	sink := &emfSink{t: e.t}
	sink.rec = metrics.New(sink, metrics.Namespace, e.clock.Now)
	e.build(stage.Options{Now: e.clock.Now, Rand: func() float64 { return 0.99 }, Metrics: sink.rec})
	return sink
}

// emfPoint is one metric of one EMF line.
type emfPoint = metricstest.Point

// flush writes what the recorder holds and returns it by metric name, checking each line's
// EMF shape: _aws.Timestamp, one directive in the Buyflow namespace, dimension keys that are
// root strings and declared metrics present at the root.
func (s *emfSink) flush() map[string][]emfPoint {
	s.t.Helper()
	if err := s.rec.Flush(); err != nil {
		s.t.Fatal(err)
	}
	s.mu.Lock()
	out := s.buf.String()
	s.buf.Reset()
	s.mu.Unlock()
	return metricstest.Parse(s.t, out)
}

// wantCount asserts the count metric name with exactly dims (nil: none) is n.
func wantCount(t *testing.T, got map[string][]emfPoint, name string, dims map[string]string, n float64) {
	t.Helper()
	if dims == nil {
		dims = map[string]string{}
	}
	for _, p := range got[name] {
		if maps.Equal(p.Dims, dims) {
			if p.Value != n || p.Unit != metrics.UnitCount {
				t.Errorf("%s%v = %v %s, want %v Count", name, dims, p.Value, p.Unit, n)
			}
			return
		}
	}
	t.Errorf("%s%v missing; recorded %v", name, dims, got)
}

func TestGovernanceDenialRecordsGovernanceDenied(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	m := e.withMetrics()
	op := e.newOp("denied", false)
	if out := e.check(op); out.Decision != workflow.GovernanceDenied {
		t.Fatalf("output = %+v", out)
	}
	got := m.flush()
	wantCount(t, got, metrics.GovernanceDenied, nil, 1)
	if len(got) != 1 {
		t.Errorf("a denial recorded %v, want only GovernanceDenied", got)
	}
	// A retried check of the rejected operation is no second denial.
	_, err := handle(t, e.govStage.Handle, stageIn(op, workflow.ActionCheck))
	wantBare(t, err, "TerminalError")
	if got := m.flush(); len(got) != 0 {
		t.Errorf("a retried check recorded %v", got)
	}
}

func TestApprovedCheckRecordsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	m := e.withMetrics()
	if out := e.check(e.newOp("approved", false)); out.Decision != workflow.GovernanceProceed {
		t.Fatalf("output = %+v", out)
	}
	if got := m.flush(); len(got) != 0 {
		t.Errorf("an approved check recorded %v", got)
	}
}

func TestCheckFailureRecordsAdcpErrorByCode(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	m := e.withMetrics()
	op := e.newOp("approved", false)
	e.gov.FailNextHTTP(10, 503)
	_, err := handle(t, e.govStage.Handle, stageIn(op, workflow.ActionCheck))
	wantBare(t, err, "TransientError")
	// An HTTP 503 carries no AdCP code: the error kind names it.
	wantCount(t, m.flush(), metrics.AdcpErrors, map[string]string{"Code": "transport"}, 1)
}

func TestAsyncReviewDeadlineRecordsTimeout(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{gov: adcptest.GovernanceOptions{PollsPerStep: -1}})
	m := e.withMetrics()
	op := e.newOp("async_review", false)
	if out := e.check(op); out.Decision != workflow.GovernancePending {
		t.Fatalf("output = %+v", out)
	}
	if got := m.flush(); len(got) != 0 {
		t.Errorf("a pending review recorded %v", got)
	}
	e.clock.Advance(time.Duration(cfg().DeadlineSeconds+1) * time.Second)
	_, err := handle(t, e.govStage.Handle, stageIn(op, workflow.ActionCheck))
	wantBare(t, err, "DeadlineExceededError")
	wantCount(t, m.flush(), metrics.Timeouts, map[string]string{"Kind": metrics.TimeoutGovernanceReview}, 1)
}

func TestCreateFailureRecordsAdcpErrorByCode(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	m := e.withMetrics()
	op := e.newOp("approved,sync", false)
	e.check(op)
	m.flush()
	e.seller.RateLimitNext(1)
	_, err := handle(t, e.createStage.Handle, stageIn(op, workflow.ActionCreate))
	wantBare(t, err, "TransientError")
	got := m.flush()
	wantCount(t, got, metrics.AdcpErrors, map[string]string{"Code": "RATE_LIMITED"}, 1)
	if len(got[metrics.AdcpErrors]) != 1 {
		t.Errorf("AdcpErrors = %+v, want one code", got[metrics.AdcpErrors])
	}
	// The retry succeeds and records nothing.
	if out := e.create(op); out.Status != workflow.StatusCompleted {
		t.Fatalf("output = %+v", out)
	}
	if got := m.flush(); len(got) != 0 {
		t.Errorf("a successful create recorded %v", got)
	}
}

func TestCancelFailureRecordsAdcpErrorByCode(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{})
	m := e.withMetrics()
	op, _ := e.placed("approved,sync")
	m.flush()
	e.seller.RateLimitNext(1)
	_, err := e.createStage.Cancel(context.Background(), stageIn(op, workflow.ActionCancel))
	wantBare(t, err, "TransientError")
	wantCount(t, m.flush(), metrics.AdcpErrors, map[string]string{"Code": "RATE_LIMITED"}, 1)
}
