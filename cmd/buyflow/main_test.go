package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// fakeAPI answers like buyflow's HTTP API for one tenant and records the requests.
type fakeAPI struct {
	mu   sync.Mutex
	reqs []*http.Request
	keys []string
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.reqs = append(f.reqs, r)
	f.keys = append(f.keys, r.Header.Get("Idempotency-Key"))
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if r.Header.Get("X-Buyflow-Tenant") != "acme" {
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"error":{"code":"not_found","message":"no media buy with that id"}}`)
		return
	}
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/media-buys":
		w.WriteHeader(http.StatusAccepted)
		_, _ = io.WriteString(w, `{"operation_id":"mb-1","status":"requested","replayed":false,"links":{"self":"/v1/media-buys/mb-1"}}`)
	case r.URL.Path == "/v1/media-buys/mb-1":
		_, _ = io.WriteString(w, `{"operation_id":"mb-1","status":"completed","seller_id":"sim-seller","po_number":"PO-1","budget":"20000.50","currency":"USD","media_buy_id":"mb_9"}`)
	case r.URL.Path == "/v1/media-buys/mb-1/events":
		_, _ = io.WriteString(w, `{"items":[{"at":"2026-01-01T00:00:00Z","type":"created","to":"requested"},{"at":"2026-01-01T00:00:01Z","type":"poll","from":"submitted","to":"completed","actor":"seller:sim-seller"}]}`)
	case r.URL.Path == "/v1/media-buys":
		_, _ = io.WriteString(w, `{"items":[{"operation_id":"mb-1","status":"completed","seller_id":"sim-seller","po_number":"PO-1","budget":"20000.50","currency":"USD"}],"next_cursor":"c2"}`)
	default:
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, `{"error":{"code":"not_found","message":"no media buy with that id"}}`)
	}
}

func TestCommands(t *testing.T) {
	api := &fakeAPI{}
	srv := httptest.NewServer(api)
	defer srv.Close()
	req := filepath.Join(t.TempDir(), "buy.json")
	if err := os.WriteFile(req, []byte(`{"seller_id":"sim-seller"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(k string) string {
		return map[string]string{"BUYFLOW_ENDPOINT": srv.URL, "BUYFLOW_TENANT": "acme"}[k]
	}
	cases := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"submit", []string{"submit", req}, 0, []string{"submitted mb-1: requested (HTTP 202, Idempotency-Key cli-"}},
		{"submit json", []string{"--json", "submit", req}, 0, []string{`"operation_id": "mb-1"`}},
		{"status", []string{"status", "mb-1"}, 0, []string{"completed", "USD 20,000.50", "mb_9"}},
		{"status wait", []string{"status", "--wait", "mb-1"}, 0, []string{"completed"}},
		{"events", []string{"events", "mb-1"}, 0, []string{"created", "submitted → completed", "seller:sim-seller"}},
		{"events json", []string{"--json", "events", "mb-1"}, 0, []string{`"type": "poll"`}},
		{"list", []string{"list", "--limit", "5"}, 0, []string{"mb-1", "PO-1", "--cursor c2"}},
		{"not found", []string{"status", "mb-x"}, 1, nil},
		{"other tenant", []string{"--tenant", "other", "status", "mb-1"}, 1, nil},
		{"unknown command", []string{"frobnicate"}, 2, nil},
		{"missing id", []string{"status"}, 2, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(context.Background(), tc.args, env, strings.NewReader(""), &out, &errOut)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stdout %q stderr %q", code, tc.code, out.String(), errOut.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
	// The default Idempotency-Key is stable per body: resubmitting a file names the same buy.
	api.mu.Lock()
	defer api.mu.Unlock()
	if api.keys[0] == "" || api.keys[0] != api.keys[1] {
		t.Errorf("idempotency keys %q and %q, want one stable derived key", api.keys[0], api.keys[1])
	}
}

func TestNoEndpoint(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"list"}, func(string) string { return "" }, nil, &out, &errOut); code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
	if !strings.Contains(errOut.String(), "BUYFLOW_ENDPOINT") {
		t.Errorf("stderr %q does not say how to name the endpoint", errOut.String())
	}
}

func TestJSONIsValid(t *testing.T) {
	api := &fakeAPI{}
	srv := httptest.NewServer(api)
	defer srv.Close()
	var out bytes.Buffer
	env := func(k string) string {
		return map[string]string{"BUYFLOW_ENDPOINT": srv.URL, "BUYFLOW_TENANT": "acme"}[k]
	}
	if code := run(context.Background(), []string{"--json", "list"}, env, nil, &out, io.Discard); code != 0 {
		t.Fatalf("exit %d", code)
	}
	var v map[string]any
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		t.Fatalf("--json list is not JSON: %v\n%s", err, out.String())
	}
}
