package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/buyflow/buyflow/internal/modify"
)

// TestChangeVerbsSendWhatTheAPIParses runs each change verb against a recording server and
// parses every body it sent with the API's own parsers: what the CLI sends is accepted.
func TestChangeVerbsSendWhatTheAPIParses(t *testing.T) {
	var mu sync.Mutex
	type sent struct{ method, path, key, body string }
	var got []sent
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, sent{r.Method, r.URL.Path, r.Header.Get("Idempotency-Key"), string(b)})
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/delivery") {
			_, _ = io.WriteString(w, `{"operation_id":"mb-1","currency":"USD","approved_budget":"3000.00","spend":"3100.00","over_budget":true,
				"snapshots":[{"as_of":"2027-03-02T00:00:00Z","impressions":1200,"spend":"3100.00","approved":"3000.00"}]}`)
			return
		}
		if strings.Contains(string(b), "conflict") {
			w.WriteHeader(http.StatusConflict)
			_, _ = io.WriteString(w, `{"error":{"code":"buy_canceled","message":"media buy mb-1 is canceled"}}`)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"change_id":"chg-1","media_buy_operation_id":"mb-1","kind":"budget","status":"requested"}`)
	}))
	defer srv.Close()
	env := func(k string) string {
		return map[string]string{"BUYFLOW_ENDPOINT": srv.URL, "BUYFLOW_TENANT": "acme"}[k]
	}
	cases := []struct {
		args   []string
		code   int
		cancel bool
		want   string
	}{
		{[]string{"budget", "mb-1", "3500"}, 0, false, "change chg-1"},
		{[]string{"budget", "--reason", "strong week", "mb-1", "pkg_1=2000.50", "pkg_2=1000"}, 0, false, "change chg-1"},
		{[]string{"end-date", "mb-1", "2027-04-30T23:59:59Z"}, 0, false, "change chg-1"},
		{[]string{"pause", "mb-1"}, 0, false, "change chg-1"},
		{[]string{"resume", "--key", "my-key-123456", "mb-1"}, 0, false, "change chg-1"},
		{[]string{"cancel", "mb-1", "campaign", "withdrawn"}, 0, true, "change chg-1"},
		{[]string{"cancel", "mb-1", "conflict"}, 1, true, ""},
		{[]string{"delivery", "mb-1"}, 0, false, "OVER THE APPROVED BUDGET"},
		{[]string{"cancel", "mb-1"}, 2, false, ""},
		{[]string{"budget", "mb-1", "pkg_1"}, 2, false, ""},
		{[]string{"budget", "mb-1", "=5"}, 2, false, ""},
		{[]string{"pause"}, 2, false, ""},
	}
	for _, tc := range cases {
		mu.Lock()
		before := len(got)
		mu.Unlock()
		var out, errOut bytes.Buffer
		if code := run(context.Background(), tc.args, env, nil, &out, &errOut); code != tc.code {
			t.Errorf("%v: exit %d, want %d; %s%s", tc.args, code, tc.code, out.String(), errOut.String())
			continue
		}
		if !strings.Contains(out.String(), tc.want) {
			t.Errorf("%v: stdout %q lacks %q", tc.args, out.String(), tc.want)
		}
		mu.Lock()
		reqs := got[before:]
		mu.Unlock()
		if tc.code == 2 && len(reqs) != 0 {
			t.Errorf("%v: a usage error sent %d requests", tc.args, len(reqs))
		}
		for _, r := range reqs {
			if r.method == http.MethodGet {
				continue
			}
			parse, wantMethod, wantPath := modify.ParsePatch, http.MethodPatch, "/v1/media-buys/mb-1"
			if tc.cancel {
				parse, wantMethod, wantPath = modify.ParseCancel, http.MethodPost, "/v1/media-buys/mb-1/cancel"
			}
			if r.method != wantMethod || r.path != wantPath || r.key == "" {
				t.Errorf("%v: sent %s %s key %q", tc.args, r.method, r.path, r.key)
			}
			if _, err := parse([]byte(r.body)); err != nil {
				t.Errorf("%v: the API refuses the body %s: %v", tc.args, r.body, err)
			}
		}
	}
}
