// Package metricstest parses the embedded-metric-format lines a metrics.Recorder writes, for the
// tests of the packages that emit metrics.
package metricstest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/metrics"
)

// Point is one metric of one EMF line: its dimensions, declared unit and value (a float64, or
// []any of float64 for several duration samples).
type Point struct {
	Dims  map[string]string
	Unit  string
	Value any
}

// parse reads the EMF lines in out and returns their metrics by name. Each line must be a JSON
// object with _aws.Timestamp and one directive in the Buyflow namespace whose dimension keys
// are root strings and whose declared metrics are root values; anything else fails t.
func parse(t testing.TB, out string) map[string][]Point {
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

// Find returns the point of metric name whose dimensions are exactly dims (nil: none).
func Find(got map[string][]Point, name string, dims map[string]string) (Point, bool) {
	if dims == nil {
		dims = map[string]string{}
	}
	for _, p := range got[name] {
		if maps.Equal(p.Dims, dims) {
			return p, true
		}
	}
	return Point{}, false
}

// Sink holds a Recorder that writes into memory, so a test reads back what each step recorded.
type Sink struct {
	// Recorder is what the code under test records into.
	Recorder *metrics.Recorder

	t   testing.TB
	mu  sync.Mutex
	buf bytes.Buffer
}

// NewSink returns a Sink whose Recorder, in the Buyflow namespace, reads the time from now.
func NewSink(t testing.TB, now func() time.Time) *Sink {
	s := &Sink{t: t}
	s.Recorder = metrics.New(s, metrics.Namespace, now)
	return s
}

// Write takes the Recorder's lines; handlers may flush concurrently.
func (s *Sink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

// Flush flushes the Recorder (as the end of one invocation does) and returns, parsed as Parse
// does, what it wrote since the last Flush.
func (s *Sink) Flush() map[string][]Point {
	s.t.Helper()
	if err := s.Recorder.Flush(); err != nil {
		s.t.Fatal(err)
	}
	s.mu.Lock()
	out := s.buf.String()
	s.buf.Reset()
	s.mu.Unlock()
	return parse(s.t, out)
}
