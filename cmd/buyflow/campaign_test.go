package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// fakeCampaigns answers like the campaign routes: the campaign runs for two reads, then ends
// partially completed.
func fakeCampaigns(reads *atomic.Int32) http.Handler {
	leg := func(op, seller, status, reason string) string {
		return `{"operation_id":"` + op + `","seller_id":"` + seller + `","po_number":"PO-` + op + `","amount":"1000.00","status":"` + status + `","reason":"` + reason + `"}`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/v1/campaigns":
			w.WriteHeader(http.StatusAccepted)
			_, _ = io.WriteString(w, `{"campaign_id":"cp-1","status":"running","legs":[{"operation_id":"mb-a","seller_id":"s-a"},{"operation_id":"mb-b","seller_id":"s-b"}]}`)
		case r.URL.Path == "/v1/campaigns/cp-1":
			status, a, b := "running", leg("mb-a", "s-a", "working", ""), leg("mb-b", "s-b", "working", "")
			approval := `{"approval_id":"apr_1","campaign_id":"cp-1","status":"pending","approvers":["U1"],"expires_at":"2026-01-01T01:00:00Z"}`
			if reads.Add(1) > 2 {
				status, a, b = "partially_completed", leg("mb-a", "s-a", "completed", ""), leg("mb-b", "s-b", "failed", "the seller ended the task failed")
				approval = `{"approval_id":"apr_1","campaign_id":"cp-1","status":"approved","approvers":["U1"],"decided_by":"U1","decided_at":"2026-01-01T00:10:00Z"}`
			}
			_, _ = io.WriteString(w, `{"campaign_id":"cp-1","status":"`+status+`","policy":"best_effort","currency":"USD","total_budget":"2500.00",`+
				`"planned":"2000.00","committed":"1000.00","committed_by_seller":[{"seller_id":"s-a","committed":"1000.00"},{"seller_id":"s-b","committed":"0.00"}],`+
				`"legs":[`+a+`,`+b+`],"approval":`+approval+`}`)
		case r.URL.Path == "/v1/campaigns/cp-1/events":
			_, _ = io.WriteString(w, `{"items":[{"at":"2026-01-01T00:00:00Z","type":"campaign_submitted","amount":"2500.00 USD"},`+
				`{"at":"2026-01-01T00:00:01Z","type":"webhook","operation_id":"mb-a","seller_id":"s-a","from":"working","to":"completed"}]}`)
		case r.URL.Path == "/v1/campaigns":
			_, _ = io.WriteString(w, `{"items":[{"campaign_id":"cp-1","status":"completed","policy":"all_or_nothing","currency":"USD","committed":"2000.00","total_budget":"2500.00","legs":[{},{}]}]}`)
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"error":{"code":"not_found","message":"no campaign with that id"}}`)
		}
	})
}

func TestCampaignCommands(t *testing.T) {
	var reads atomic.Int32
	srv := httptest.NewServer(fakeCampaigns(&reads))
	defer srv.Close()
	file := filepath.Join(t.TempDir(), "campaign.json")
	if err := os.WriteFile(file, []byte(`{"legs":[]}`), 0o600); err != nil {
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
		// wantErr is what the progress lines (stderr) must say.
		wantErr []string
	}{
		{"submit", []string{"campaign", "submit", file}, 0, []string{"submitted campaign cp-1: running, 2 legs", "leg mb-b at s-b"}, nil},
		// --wait follows it to the end; a partially completed campaign exits 7.
		// The campaign's one approval: who is asked and that it covers every leg, then who decided.
		{"submit wait", []string{"campaign", "submit", "--wait", file}, 7, []string{"partially_completed", "USD 1,000.00", "the seller ended the task failed",
			"approved by U1 at 2026-01-01 00:10 UTC"}, []string{"campaign       waiting for approval by U1", "one decision for every leg", "approved by U1"}},
		{"status", []string{"campaign", "status", "cp-1"}, 0, []string{"running", "best_effort", "USD 2,500.00", "s-b", "working"}, nil},
		{"events", []string{"campaign", "events", "cp-1"}, 0, []string{"(campaign)", "campaign_submitted", "working → completed", "s-a"}, nil},
		{"list", []string{"campaign", "list"}, 0, []string{"cp-1", "all_or_nothing", "USD 2,000.00"}, nil},
		{"not found", []string{"campaign", "status", "cp-x"}, 1, nil, nil},
		{"no subcommand", []string{"campaign"}, 2, nil, nil},
		{"unknown subcommand", []string{"campaign", "cancel", "cp-1"}, 2, nil, nil},
		{"status without id", []string{"campaign", "status"}, 2, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reads.Store(0)
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
			for _, w := range tc.wantErr {
				if !strings.Contains(errOut.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut.String())
				}
			}
		})
	}
}

// A campaign that failed in its own steps shows its reason.
func TestCampaignStatusShowsWhyItFailed(t *testing.T) {
	why := "The campaign stopped before any leg was placed: a step failed after its retries (the ledger did not answer)."
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"campaign_id":"cp-f","status":"failed","reason":"`+why+`","policy":"best_effort","currency":"USD","total_budget":"1000.00","committed":"0.00",`+
			`"legs":[{"operation_id":"mb-a","seller_id":"s-a","po_number":"PO-a","amount":"1000.00","status":"failed","reason":"CampaignFailed: campaign cp-f stopped"}]}`)
	}))
	defer srv.Close()
	env := func(k string) string {
		return map[string]string{"BUYFLOW_ENDPOINT": srv.URL, "BUYFLOW_TENANT": "acme"}[k]
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"campaign", "status", "cp-f"}, env, strings.NewReader(""), &out, &errOut); code != 0 {
		t.Fatalf("exit %d, want 0; stdout %q stderr %q", code, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "reason") || !strings.Contains(out.String(), why) {
		t.Errorf("stdout lacks the campaign's reason:\n%s", out.String())
	}
}
