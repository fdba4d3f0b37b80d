package metrics_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/metrics"
)

var fixed = time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)

// emfLine is the EMF root object as the specification defines it.
type emfLine struct {
	AWS struct {
		Timestamp         *int64 `json:"Timestamp"`
		CloudWatchMetrics []struct {
			Namespace  string     `json:"Namespace"`
			Dimensions [][]string `json:"Dimensions"`
			Metrics    []struct {
				Name string `json:"Name"`
				Unit string `json:"Unit"`
			} `json:"Metrics"`
		} `json:"CloudWatchMetrics"`
	} `json:"_aws"`
	root map[string]any
}

// parse reads every line as JSON and checks it against the EMF shape: _aws.Timestamp (ms),
// one or more directives each with a namespace, dimension sets whose keys are root strings,
// and metric declarations whose values are root numbers (or arrays of at most 100 numbers).
func parse(t *testing.T, out []byte) []emfLine {
	t.Helper()
	var lines []emfLine
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var l emfLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		if err := json.Unmarshal(sc.Bytes(), &l.root); err != nil {
			t.Fatal(err)
		}
		if l.AWS.Timestamp == nil || *l.AWS.Timestamp != fixed.UnixMilli() {
			t.Errorf("Timestamp = %v, want %d", l.AWS.Timestamp, fixed.UnixMilli())
		}
		if len(l.AWS.CloudWatchMetrics) == 0 {
			t.Errorf("no CloudWatchMetrics in %s", sc.Text())
		}
		for _, d := range l.AWS.CloudWatchMetrics {
			if d.Namespace != metrics.Namespace {
				t.Errorf("Namespace = %q", d.Namespace)
			}
			if len(d.Dimensions) == 0 {
				t.Errorf("Dimensions missing in %s", sc.Text())
			}
			for _, set := range d.Dimensions {
				for _, k := range set {
					if _, ok := l.root[k].(string); !ok {
						t.Errorf("dimension %q is not a root string in %s", k, sc.Text())
					}
				}
			}
			if len(d.Metrics) == 0 || len(d.Metrics) > 100 {
				t.Errorf("%d metric declarations", len(d.Metrics))
			}
			for _, m := range d.Metrics {
				if m.Unit != metrics.UnitCount && m.Unit != metrics.UnitMilliseconds {
					t.Errorf("unit %q", m.Unit)
				}
				switch v := l.root[m.Name].(type) {
				case float64:
				case []any:
					if len(v) == 0 || len(v) > metrics.MaxValues {
						t.Errorf("%s has %d values", m.Name, len(v))
					}
					for _, x := range v {
						if _, ok := x.(float64); !ok {
							t.Errorf("%s value %v is not a number", m.Name, x)
						}
					}
				default:
					t.Errorf("%s = %v (%T), want a number at the root", m.Name, l.root[m.Name], l.root[m.Name])
				}
			}
		}
		lines = append(lines, l)
	}
	return lines
}

func find(lines []emfLine, dimKey, dimValue, metric string) (any, bool) {
	for _, l := range lines {
		if dimKey != "" && l.root[dimKey] != dimValue {
			continue
		}
		if dimKey == "" && len(l.AWS.CloudWatchMetrics[0].Dimensions[0]) != 0 {
			continue
		}
		if v, ok := l.root[metric]; ok {
			return v, true
		}
	}
	return nil, false
}

func TestFlushWritesEMFLines(t *testing.T) {
	var buf bytes.Buffer
	r := metrics.New(&buf, metrics.Namespace, func() time.Time { return fixed })
	r.Count(metrics.ReconcileFindings, metrics.Dims{"Kind": "orphan"}, 1)
	r.Count(metrics.ReconcileFindings, metrics.Dims{"Kind": "orphan"}, 2)
	r.Count(metrics.ReconcileFindings, metrics.Dims{"Kind": "lost_update"}, 1)
	r.Count(metrics.PendingOperations, metrics.Dims{"Stage": "submitted"}, 7)
	r.Count(metrics.AdcpErrors, metrics.Dims{"Code": "RATE_LIMITED"}, 1)
	r.Duration(metrics.SellerTaskDuration, metrics.Dims{"Status": "completed"}, 1500*time.Millisecond)
	r.Duration(metrics.SellerTaskDuration, metrics.Dims{"Status": "completed"}, 250*time.Millisecond)
	r.Count(metrics.WebhookDuplicates, nil, 3)
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	lines := parse(t, buf.Bytes())
	if len(lines) != 6 {
		t.Fatalf("%d lines, want 6 (one per dimension set):\n%s", len(lines), buf.String())
	}
	checks := []struct {
		key, value, metric string
		want               any
	}{
		{"Kind", "orphan", metrics.ReconcileFindings, 3.0},
		{"Kind", "lost_update", metrics.ReconcileFindings, 1.0},
		{"Stage", "submitted", metrics.PendingOperations, 7.0},
		{"Code", "RATE_LIMITED", metrics.AdcpErrors, 1.0},
		{"Status", "completed", metrics.SellerTaskDuration, []any{1500.0, 250.0}},
		{"", "", metrics.WebhookDuplicates, 3.0},
	}
	for _, c := range checks {
		got, ok := find(lines, c.key, c.value, c.metric)
		if !ok {
			t.Errorf("%s{%s=%s} missing", c.metric, c.key, c.value)
			continue
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s{%s=%s} = %v, want %v", c.metric, c.key, c.value, got, c.want)
		}
	}
	// A dimension-less metric declares one empty dimension set.
	for _, l := range lines {
		if _, ok := l.root[metrics.WebhookDuplicates]; ok {
			if d := l.AWS.CloudWatchMetrics[0].Dimensions; len(d) != 1 || len(d[0]) != 0 {
				t.Errorf("Dimensions = %v, want [[]]", d)
			}
		}
	}

	// Flush starts over.
	buf.Reset()
	if err := r.Flush(); err != nil || buf.Len() != 0 {
		t.Errorf("second Flush wrote %q, err %v", buf.String(), err)
	}
}

func TestDurationsSpillPastMaxValues(t *testing.T) {
	var buf bytes.Buffer
	r := metrics.New(&buf, metrics.Namespace, func() time.Time { return fixed })
	for i := range 250 {
		r.Duration(metrics.ApprovalLatency, metrics.Dims{"Outcome": "approved"}, time.Duration(i)*time.Millisecond)
	}
	r.Count(metrics.ApprovalRejected, metrics.Dims{"Outcome": "approved"}, 1)
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	lines := parse(t, buf.Bytes())
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3", len(lines))
	}
	var n, counts int
	for _, l := range lines {
		if v, ok := l.root[metrics.ApprovalLatency].([]any); ok {
			n += len(v)
		}
		if _, ok := l.root[metrics.ApprovalRejected]; ok {
			counts++
		}
	}
	if n != 250 || counts != 1 {
		t.Errorf("%d samples and %d count lines, want 250 and 1", n, counts)
	}
}

func TestDimensionsAreSortedAndGroupedByValue(t *testing.T) {
	var buf bytes.Buffer
	r := metrics.New(&buf, metrics.Namespace, func() time.Time { return fixed })
	r.Count(metrics.Timeouts, metrics.Dims{"Kind": "deadline", "Function": "reconcile"}, 1)
	r.Count(metrics.Timeouts, metrics.Dims{"Function": "reconcile", "Kind": "deadline"}, 1)
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	lines := parse(t, buf.Bytes())
	if len(lines) != 1 {
		t.Fatalf("%d lines, want 1", len(lines))
	}
	if d := lines[0].AWS.CloudWatchMetrics[0].Dimensions[0]; !slices.Equal(d, []string{"Function", "Kind"}) {
		t.Errorf("dimension set %v", d)
	}
	if lines[0].root[metrics.Timeouts] != 2.0 {
		t.Errorf("Timeouts = %v", lines[0].root[metrics.Timeouts])
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("closed") }

func TestFlushReportsWriteErrorsAndNilRecorderIsANoOp(t *testing.T) {
	r := metrics.New(failWriter{}, metrics.Namespace, nil)
	r.Count(metrics.GovernanceDenied, nil, 1)
	if err := r.Flush(); err == nil {
		t.Error("Flush on a failing writer returned nil")
	}
	var none *metrics.Recorder
	none.Count(metrics.GovernanceDenied, nil, 1)
	none.Duration(metrics.ApprovalLatency, nil, time.Second)
	if err := none.Flush(); err != nil {
		t.Error(err)
	}
}
