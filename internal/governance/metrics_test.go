package governance_test

import (
	"context"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/adcptest"
	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/metrics/metricstest"
	"github.com/buyflow/buyflow/internal/stage"
	"github.com/buyflow/buyflow/internal/stagetest"
	"github.com/buyflow/buyflow/internal/workflow"
)

// withMetrics rebuilds the env's stages with a metrics recorder.
func withMetrics(e *stagetest.Env) *metricstest.Sink {
	e.T.Helper()
	sink := metricstest.NewSink(e.T, e.Clock.Now)
	e.Build(stage.Options{Now: e.Clock.Now, Rand: func() float64 { return 0.99 }, Metrics: sink.Recorder})
	return sink
}

// wantCount asserts the count metric name with exactly dims (nil: none) is n.
func wantCount(t *testing.T, got map[string][]metricstest.Point, name string, dims map[string]string, n float64) {
	t.Helper()
	p, ok := metricstest.Find(got, name, dims)
	if !ok {
		t.Errorf("%s%v missing; recorded %v", name, dims, got)
		return
	}
	if p.Value != n || p.Unit != metrics.UnitCount {
		t.Errorf("%s%v = %v %s, want %v Count", name, dims, p.Value, p.Unit, n)
	}
}

func TestGovernanceDenialRecordsGovernanceDenied(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{})
	m := withMetrics(e)
	op := e.NewOp("denied", false)
	if out := e.Check(op); out.Decision != workflow.GovernanceDenied {
		t.Fatalf("output = %+v", out)
	}
	got := m.Flush()
	wantCount(t, got, metrics.GovernanceDenied, nil, 1)
	if len(got) != 1 {
		t.Errorf("a denial recorded %v, want only GovernanceDenied", got)
	}
	// A retried check of the rejected operation is no second denial.
	_, err := stagetest.Handle(t, e.GovStage.Handle, stagetest.StageIn(op, workflow.ActionCheck))
	stagetest.WantBare(t, err, "TerminalError")
	if got := m.Flush(); len(got) != 0 {
		t.Errorf("a retried check recorded %v", got)
	}
}

func TestApprovedCheckRecordsNothing(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{})
	m := withMetrics(e)
	if out := e.Check(e.NewOp("approved", false)); out.Decision != workflow.GovernanceProceed {
		t.Fatalf("output = %+v", out)
	}
	if got := m.Flush(); len(got) != 0 {
		t.Errorf("an approved check recorded %v", got)
	}
}

func TestCheckFailureRecordsAdcpErrorByCode(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{})
	m := withMetrics(e)
	op := e.NewOp("approved", false)
	e.Gov.FailNextHTTP(10, 503)
	_, err := stagetest.Handle(t, e.GovStage.Handle, stagetest.StageIn(op, workflow.ActionCheck))
	stagetest.WantBare(t, err, "TransientError")
	// An HTTP 503 carries no AdCP code: the error kind names it.
	wantCount(t, m.Flush(), metrics.AdcpErrors, map[string]string{"Code": "transport"}, 1)
}

func TestAsyncReviewDeadlineRecordsTimeout(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{Gov: adcptest.GovernanceOptions{PollsPerStep: -1}})
	m := withMetrics(e)
	op := e.NewOp("async_review", false)
	if out := e.Check(op); out.Decision != workflow.GovernancePending {
		t.Fatalf("output = %+v", out)
	}
	if got := m.Flush(); len(got) != 0 {
		t.Errorf("a pending review recorded %v", got)
	}
	e.Clock.Advance(time.Duration(stagetest.RunConfig().DeadlineSeconds+1) * time.Second)
	_, err := stagetest.Handle(t, e.GovStage.Handle, stagetest.StageIn(op, workflow.ActionCheck))
	stagetest.WantBare(t, err, "DeadlineExceededError")
	wantCount(t, m.Flush(), metrics.Timeouts, map[string]string{"Kind": metrics.TimeoutGovernanceReview}, 1)
}

func TestCreateFailureRecordsAdcpErrorByCode(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{})
	m := withMetrics(e)
	op := e.NewOp("approved,sync", false)
	e.Check(op)
	m.Flush()
	e.Seller.RateLimitNext(1)
	// RATE_LIMITED carries retry_after: the stage answers the wait, and still counts the error.
	out, err := stagetest.Handle(t, e.CreateStage.Handle, stagetest.StageIn(op, workflow.ActionCreate))
	if err != nil || out.(workflow.SellerOutput).Unavailable == nil {
		t.Fatalf("create = %+v, %v; want the seller's retry_after as a wait", out, err)
	}
	got := m.Flush()
	wantCount(t, got, metrics.AdcpErrors, map[string]string{"Code": "RATE_LIMITED"}, 1)
	if len(got[metrics.AdcpErrors]) != 1 {
		t.Errorf("AdcpErrors = %+v, want one code", got[metrics.AdcpErrors])
	}
	// The retry succeeds and records nothing.
	if out := e.Create(op); out.Status != workflow.StatusCompleted {
		t.Fatalf("output = %+v", out)
	}
	if got := m.Flush(); len(got) != 0 {
		t.Errorf("a successful create recorded %v", got)
	}
}

func TestCancelFailureRecordsAdcpErrorByCode(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{})
	m := withMetrics(e)
	op, _ := e.Placed("approved,sync")
	m.Flush()
	e.Seller.RateLimitNext(1)
	_, err := e.CreateStage.Cancel(context.Background(), stagetest.StageIn(op, workflow.ActionCancel))
	stagetest.WantBare(t, err, "TransientError")
	wantCount(t, m.Flush(), metrics.AdcpErrors, map[string]string{"Code": "RATE_LIMITED"}, 1)
}
