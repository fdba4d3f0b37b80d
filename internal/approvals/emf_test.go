package approvals_test

import (
	"bufio"
	"encoding/json"
	"maps"
	"strings"
	"testing"

	"github.com/buyflow/buyflow/internal/metrics"
)

// emfPoint is one metric of one EMF line: its dimensions, declared unit and value (a float64,
// or []any of float64 for several duration samples).
type emfPoint struct {
	Dims  map[string]string
	Unit  string
	Value any
}

// parseEMF reads the EMF lines in out and returns their metrics by name. Each line must be a
// JSON object with _aws.Timestamp and one directive in the Buyflow namespace whose dimension
// keys are root strings and whose declared metrics are root numbers (or number arrays).
func parseEMF(t *testing.T, out string) map[string][]emfPoint {
	t.Helper()
	got := map[string][]emfPoint{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var root map[string]any
		if err := json.Unmarshal(sc.Bytes(), &root); err != nil {
			t.Fatalf("EMF line %q: %v", sc.Text(), err)
		}
		var head struct {
			AWS struct {
				Timestamp         *int64 `json:"Timestamp"`
				CloudWatchMetrics []struct {
					Namespace  string     `json:"Namespace"`
					Dimensions [][]string `json:"Dimensions"`
					Metrics    []struct{ Name, Unit string }
				} `json:"CloudWatchMetrics"`
			} `json:"_aws"`
		}
		if err := json.Unmarshal(sc.Bytes(), &head); err != nil || head.AWS.Timestamp == nil || len(head.AWS.CloudWatchMetrics) != 1 {
			t.Fatalf("EMF line without _aws.Timestamp and one directive: %s", sc.Text())
		}
		d := head.AWS.CloudWatchMetrics[0]
		if d.Namespace != metrics.Namespace || len(d.Dimensions) != 1 {
			t.Fatalf("EMF directive %+v", d)
		}
		dims := map[string]string{}
		for _, k := range d.Dimensions[0] {
			v, ok := root[k].(string)
			if !ok {
				t.Fatalf("dimension %q is not a root string in %s", k, sc.Text())
			}
			dims[k] = v
		}
		for _, m := range d.Metrics {
			v, ok := root[m.Name]
			if !ok {
				t.Fatalf("metric %s declared but absent in %s", m.Name, sc.Text())
			}
			got[m.Name] = append(got[m.Name], emfPoint{Dims: dims, Unit: m.Unit, Value: v})
		}
	}
	return got
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
