package webhook_test

import (
	"fmt"
	"maps"
	"net/http"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/metrics/metricstest"
	"github.com/buyflow/buyflow/internal/webhook"
)

// emfPoint is one metric of one EMF line.
type emfPoint = metricstest.Point

// metricsEnv is newEnv with a metrics recorder; the sink's Flush returns what one invocation
// recorded.
func metricsEnv(t *testing.T) (*env, *metricstest.Sink) {
	t.Helper()
	var sink *metricstest.Sink
	e := newEnvWith(t, func(c *webhook.Config) {
		sink = metricstest.NewSink(t, c.Now)
		c.Metrics = sink.Recorder
	})
	return e, sink
}

// wantCount asserts the count metric name with exactly dims (nil: none) is n and is the only
// series of name.
func wantCount(t *testing.T, got map[string][]emfPoint, name string, dims map[string]string, n float64) {
	t.Helper()
	if dims == nil {
		dims = map[string]string{}
	}
	ps := got[name]
	if len(ps) != 1 || !maps.Equal(ps[0].Dims, dims) || ps[0].Value != n || ps[0].Unit != metrics.UnitCount {
		t.Errorf("%s = %+v, want one series %v = %v Count", name, ps, dims, n)
	}
}

func TestSignatureFailuresRecordTheirCode(t *testing.T) {
	cases := []struct {
		name, id, seller string
		opts             signOpts
		code             string
	}{
		{"9421 corrupted signature", "op-1", seller9421, signOpts{badSig: true}, "webhook_signature_invalid"},
		{"hmac expired", "op-1", sellerHMAC, signOpts{at: time.Date(2099, 1, 1, 11, 50, 0, 0, time.UTC)}, "webhook_signature_window_invalid"},
		{"mode mismatch", "op-1", seller9421, signOpts{mode: "hmac"}, "webhook_mode_mismatch"},
		{"unknown operation", "op-404", seller9421, signOpts{}, "webhook_signature_key_unknown"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, m := metricsEnv(t)
			e.op("op-1", c.seller, true)
			resp := e.deliver(c.id, c.seller, payload(c.id, "completed", key("a")), c.opts)
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("answer = %d %s", resp.StatusCode, resp.Body)
			}
			got := m.Flush()
			// Two series of the one metric: by Code (the dashboard) and with no dimension
			// (the alarm, which needs one exact dimension set).
			ps := got[metrics.WebhookSignatureFailures]
			byDims := map[string]emfPoint{}
			for _, p := range ps {
				byDims[fmt.Sprint(p.Dims)] = p
			}
			for _, dims := range []map[string]string{{"Code": c.code}, {}} {
				p, ok := byDims[fmt.Sprint(dims)]
				if len(ps) != 2 || !ok || p.Value != 1.0 || p.Unit != metrics.UnitCount {
					t.Errorf("%s = %+v, want %v = 1 Count among two series", metrics.WebhookSignatureFailures, ps, dims)
				}
			}
			// And every refusal in WebhookRejected, by Code, by Seller when the operation is known.
			want := map[string]bool{fmt.Sprint(map[string]string{"Code": c.code}): true, fmt.Sprint(map[string]string{}): true}
			if c.id == "op-1" {
				want[fmt.Sprint(map[string]string{"Seller": c.seller})] = true
			}
			rej := got[metrics.WebhookRejected]
			for _, p := range rej {
				if !want[fmt.Sprint(p.Dims)] || p.Value != 1.0 {
					t.Errorf("%s has %+v", metrics.WebhookRejected, p)
				}
			}
			if len(rej) != len(want) || len(got) != 2 {
				t.Errorf("a refused signature recorded %v", got)
			}
		})
	}
}

func TestOtherRefusalsAreNoSignatureFailures(t *testing.T) {
	e, m := metricsEnv(t)
	e.op("op-1", seller9421, true)
	p := payload("op-1", "completed", key("a"))
	p["token"] = "tok-op-2-0123456789"
	if resp := e.deliver("op-1", seller9421, p, signOpts{}); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("token mismatch = %d %s", resp.StatusCode, resp.Body)
	}
	req := e.request("op-1", seller9421, []byte(`{}`), signOpts{})
	req.Headers["content-type"] = "text/plain"
	if resp := e.post(req); resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Fatalf("text/plain = %d", resp.StatusCode)
	}
	got := m.Flush()
	if _, ok := got[metrics.WebhookSignatureFailures]; ok || len(got) != 1 {
		t.Errorf("403 and 415 refusals recorded %v", got)
	}
	want := map[string]float64{"map[Code:token_mismatch]": 1, "map[Code:unsupported_media_type]": 1, "map[Seller:" + seller9421 + "]": 1, "map[]": 2}
	for _, p := range got[metrics.WebhookRejected] {
		if want[fmt.Sprint(p.Dims)] != p.Value {
			t.Errorf("%s %v = %v", metrics.WebhookRejected, p.Dims, p.Value)
		}
		delete(want, fmt.Sprint(p.Dims))
	}
	if len(want) != 0 {
		t.Errorf("%s lacks %v", metrics.WebhookRejected, want)
	}
}

func TestDuplicatesAreCounted(t *testing.T) {
	e, m := metricsEnv(t)
	e.op("op-1", sellerHMAC, true)
	for i := range 3 {
		resp := e.deliver("op-1", sellerHMAC, payload("op-1", "working", key("a")), signOpts{})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("delivery %d = %d %s", i, resp.StatusCode, resp.Body)
		}
		got := m.Flush()
		if i == 0 {
			if _, ok := got[metrics.WebhookDuplicates]; ok {
				t.Errorf("the first delivery counted as a duplicate: %v", got)
			}
		} else {
			wantCount(t, got, metrics.WebhookDuplicates, nil, 1)
		}
		if _, ok := got[metrics.WebhookSignatureFailures]; ok {
			t.Errorf("delivery %d recorded a signature failure: %v", i, got)
		}
		e.clock.Advance(time.Second)
	}
}
