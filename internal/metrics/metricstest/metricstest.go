// Package metricstest parses the embedded-metric-format lines a metrics.Recorder writes, for the
// tests of the packages that emit metrics.
package metricstest

import (
	"bufio"
	"encoding/json"
	"strings"
	"testing"

	"github.com/buyflow/buyflow/internal/metrics"
)

// Point is one metric of one EMF line: its dimensions, declared unit and value (a float64, or
// []any of float64 for several duration samples).
type Point struct {
	Dims  map[string]string
	Unit  string
	Value any
}

// Parse reads the EMF lines in out and returns their metrics by name. Each line must be a JSON
// object with _aws.Timestamp and one directive in the Buyflow namespace whose dimension keys
// are root strings and whose declared metrics are root values; anything else fails t.
func Parse(t testing.TB, out string) map[string][]Point {
	t.Helper()
	got := map[string][]Point{}
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
			got[m.Name] = append(got[m.Name], Point{Dims: dims, Unit: m.Unit, Value: v})
		}
	}
	return got
}
