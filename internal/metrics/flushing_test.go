package metrics_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/buyflow/buyflow/internal/metrics"
)

// TestFlushingWritesEachInvocationsMetrics invokes a wrapped handler through the Lambda
// library's reflection (as lambda.Start does) and checks that each invocation's metrics are
// written once, as one EMF line, also when the handler fails.
func TestFlushingWritesEachInvocationsMetrics(t *testing.T) {
	var buf bytes.Buffer
	rec := metrics.New(&buf, metrics.Namespace, nil)
	boom := errors.New("boom")
	h := lambda.NewHandler(metrics.Flushing(rec, func(_ context.Context, in json.RawMessage) (any, error) {
		rec.Count(metrics.AdcpErrors, metrics.Dims{"Code": "RATE_LIMITED"}, 1)
		if string(in) == `"fail"` {
			return nil, boom
		}
		return map[string]bool{"ok": true}, nil
	}))
	for _, in := range []string{`"ok"`, `"fail"`} {
		buf.Reset()
		_, err := h.Invoke(context.Background(), []byte(in))
		if (in == `"fail"`) != (err != nil) {
			t.Fatalf("invoke %s: err = %v", in, err)
		}
		lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
		if len(lines) != 1 {
			t.Fatalf("invoke %s wrote %d lines, want 1 EMF line:\n%s", in, len(lines), buf.String())
		}
		var line struct {
			AWS struct {
				CloudWatchMetrics []struct {
					Namespace  string
					Dimensions [][]string
					Metrics    []struct{ Name, Unit string }
				}
			} `json:"_aws"`
			Code       string
			AdcpErrors float64
		}
		if err := json.Unmarshal([]byte(lines[0]), &line); err != nil {
			t.Fatal(err)
		}
		d := line.AWS.CloudWatchMetrics
		if len(d) != 1 || d[0].Namespace != metrics.Namespace || len(d[0].Metrics) != 1 || d[0].Metrics[0].Name != metrics.AdcpErrors ||
			line.Code != "RATE_LIMITED" || line.AdcpErrors != 1 {
			t.Errorf("invoke %s wrote %s", in, lines[0])
		}
	}
}

// TestFlushingRecoversAPanic invokes a panicking handler through the Lambda library (whose own
// handling of a panic ends the process): the invocation returns a PanicError, the process goes
// on, and the panic is counted in the flushed metrics.
func TestFlushingRecoversAPanic(t *testing.T) {
	var buf bytes.Buffer
	rec := metrics.New(&buf, metrics.Namespace, nil)
	h := lambda.NewHandler(metrics.Flushing(rec, func(_ context.Context, in json.RawMessage) (any, error) {
		panic("boom")
	}))
	_, err := h.Invoke(context.Background(), []byte(`{}`))
	if err == nil || !strings.Contains(err.Error(), "panicked") {
		t.Fatalf("err = %v, want the recovered panic", err)
	}
	if !strings.Contains(buf.String(), `"HandlerPanics":1`) {
		t.Fatalf("metrics = %s, want HandlerPanics 1", buf.String())
	}
}
