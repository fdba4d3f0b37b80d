package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/approvalcore"
	"github.com/buyflow/buyflow/internal/approve"
	"github.com/buyflow/buyflow/internal/slack"
)

// scriptedAPI serves one buy that moves through views, one per GET, staying on the last; the
// views are api.MediaBuy values, the API's own projection type, so the CLI is tested against
// what the API encodes. Its timeline has one transition per distinct status, a second apart.
type scriptedAPI struct {
	mu    sync.Mutex
	views []api.MediaBuy
	gets  int
}

var t0 = time.Date(2026, 12, 1, 13, 0, 0, 0, time.UTC)

func (s *scriptedAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/v1/media-buys/mb-2":
		v := s.views[min(s.gets, len(s.views)-1)]
		s.gets++
		_ = json.NewEncoder(w).Encode(v)
	case "/v1/media-buys/mb-2/events":
		var page api.Page[api.Event]
		from := ""
		for i, v := range s.views {
			if v.Status == from {
				continue
			}
			page.Items = append(page.Items, api.Event{At: t0.Add(time.Duration(i) * time.Second).Format(time.RFC3339Nano),
				Type: "transition", From: from, To: v.Status})
			from = v.Status
		}
		_ = json.NewEncoder(w).Encode(page)
	default:
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":{"code":"not_found","message":"no media buy with that id"}}`))
	}
}

func view(status string, a *api.Approval) api.MediaBuy {
	return api.MediaBuy{OperationID: "mb-2", Status: status, SellerID: "sim-seller", PONumber: "PO-2", Budget: "20000.00", Currency: "USD", Approval: a}
}

func pending(id string, escalation bool, approvers, escalatesTo []string) *api.Approval {
	return &api.Approval{ApprovalID: id, Status: "pending", Approvers: approvers, RequestedAt: t0.Format(time.RFC3339),
		ExpiresAt: "2026-12-01T14:05:00Z", Reason: "policy_threshold", Escalation: escalation, EscalatesTo: escalatesTo}
}

func TestWaitShowsTheApprovalAndExitsPerFinalStatus(t *testing.T) {
	first := pending("apr_1", false, []string{"U123", "U456"}, nil)
	escalating := pending("apr_1", false, []string{"U123", "U456"}, []string{"S0FINANCE"})
	approved := *first
	approved.Status, approved.DecidedBy, approved.DecidedAt = "approved", "U456", "2026-12-01T13:41:00Z"
	rejected := approved
	rejected.Status = "rejected"
	expired := *first
	expired.Status = "expired"
	escalated := pending("apr_2", true, []string{"S0FINANCE"}, nil)
	sellerAsked := pending("apr_3", false, []string{"U123"}, nil)
	sellerAsked.Reason, sellerAsked.ReasonText = "seller_input_required", "confirm the makegood terms"

	cases := []struct {
		name  string
		views []api.MediaBuy
		code  int
		want  []string // in stderr, in this order
	}{
		{"approved", []api.MediaBuy{view("checking_governance", nil), view("awaiting_approval", first), view("awaiting_approval", &approved),
			view("creating", &approved), view("completed", &approved)}, 0,
			[]string{"checking_governance", "awaiting_approval", "(checking_governance took",
				"waiting for approval by U123 or U456 until 2026-12-01 14:05 UTC; if nobody decides, the buy expires. Why: The amount is over the approval threshold set by policy.",
				"approved by U456 at 2026-12-01 13:41 UTC", "creating", "(awaiting_approval took", "completed",
				"time per stage: checking_governance 1.0s, awaiting_approval 2.0s, creating 1.0s"}},
		{"rejected", []api.MediaBuy{view("awaiting_approval", first), view("rejected", &rejected)}, exitRejected,
			[]string{"waiting for approval by U123 or U456", "rejected by U456 at 2026-12-01 13:41 UTC"}},
		{"expired after escalation", []api.MediaBuy{view("awaiting_approval", escalating), view("awaiting_approval", escalated),
			view("expired", &api.Approval{ApprovalID: "apr_2", Status: "expired", Approvers: []string{"S0FINANCE"}, ExpiresAt: "2026-12-01T15:05:00Z", Escalation: true})},
			exitExpired,
			[]string{"waiting for approval by U123 or U456 until 2026-12-01 14:05 UTC; then asks S0FINANCE",
				"waiting for approval by S0FINANCE until 2026-12-01 14:05 UTC (escalated); if nobody decides, the buy expires",
				"approval expired at 2026-12-01 15:05 UTC with no decision"}},
		{"seller asked", []api.MediaBuy{view("awaiting_approval", sellerAsked), view("canceled", nil)}, exitCanceled,
			[]string{"waiting for approval by U123 until 2026-12-01 14:05 UTC; if nobody decides, the buy expires. Why: The seller asked for confirmation before going ahead. (confirm the makegood terms)"}},
		{"failed", []api.MediaBuy{view("creating", nil), view("failed", nil)}, exitFailed, []string{"creating", "failed"}},
		{"canceled", []api.MediaBuy{view("canceled", nil)}, exitCanceled, []string{"canceled"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(&scriptedAPI{views: tc.views})
			defer srv.Close()
			env := func(k string) string {
				return map[string]string{"BUYFLOW_ENDPOINT": srv.URL, "BUYFLOW_TENANT": "acme"}[k]
			}
			var out, errOut bytes.Buffer
			code := run(context.Background(), []string{"status", "--wait", "mb-2"}, env, nil, &out, &errOut)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, out.String(), errOut.String())
			}
			rest := errOut.String()
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("stderr lacks %q (in order):\n%s", w, errOut.String())
				}
				rest = rest[i+len(w):]
			}
			final := tc.views[len(tc.views)-1]
			if !strings.Contains(out.String(), final.Status) || !strings.Contains(out.String(), "USD 20,000.00") {
				t.Errorf("stdout does not show the final buy:\n%s", out.String())
			}
			if final.Approval != nil && !strings.Contains(out.String(), approvalLine(toClient(t, final.Approval))) {
				t.Errorf("stdout does not show the approval:\n%s", out.String())
			}
		})
	}
}

func TestStatusShowsWhoIsAskedUntilWhen(t *testing.T) {
	srv := httptest.NewServer(&scriptedAPI{views: []api.MediaBuy{view("awaiting_approval", pending("apr_1", false, []string{"U123", "U456"}, []string{"S0FINANCE"}))}})
	defer srv.Close()
	env := func(k string) string {
		return map[string]string{"BUYFLOW_ENDPOINT": srv.URL, "BUYFLOW_TENANT": "acme"}[k]
	}
	var out bytes.Buffer
	if code := run(context.Background(), []string{"status", "mb-2"}, env, nil, &out, &bytes.Buffer{}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, w := range []string{"awaiting_approval", "approval", "waiting for approval by U123 or U456 until 2026-12-01 14:05 UTC; then asks S0FINANCE"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("status lacks %q:\n%s", w, out.String())
		}
	}
}

// On the local stack --wait prints the review links the fake Slack received for the pending
// approval (and no other approval's), read from a real request message.
func TestWaitPrintsTheLocalSlackReviewLinks(t *testing.T) {
	api := &scriptedAPI{views: []api.MediaBuy{view("awaiting_approval", pending("apr_1", false, []string{"U123"}, nil)), view("rejected", nil)}}
	srv := httptest.NewServer(api)
	defer srv.Close()
	sink := slack.NewSink(nil)
	slackSrv := httptest.NewServer(sink)
	defer slackSrv.Close()
	bot, err := slack.NewBotClient("xoxb-test", slack.WithBaseURL(slackSrv.URL+"/api/"))
	if err != nil {
		t.Fatal(err)
	}
	link := srv.URL + "/v1/approvals/apr_1?approver=U123&exp=1764597900&kid=k1&sig=abc"
	other := srv.URL + "/v1/approvals/apr_0?approver=U999&exp=1764597900&kid=k1&sig=def"
	a := approvalcore.Approval{ID: "apr_1", OperationID: "mb-2", Seller: "sim-seller", Summary: "Media buy, PO PO-2", Requester: "URITA",
		Amount: approvalcore.Money{Minor: 2000000, Currency: "USD"}, ExpiresAt: t0.Add(time.Hour), Status: approvalcore.StatusPending}
	for _, r := range []slack.Review{{Approver: "U999", URL: other}, {Approver: "U123", URL: link}} {
		if _, err := slack.PostRequest(context.Background(), bot, a, []slack.Review{r}, slack.Direct); err != nil {
			t.Fatal(err)
		}
	}
	env := func(k string) string {
		return map[string]string{"BUYFLOW_ENDPOINT": srv.URL, "BUYFLOW_TENANT": "acme", "BUYFLOW_SLACK_URL": slackSrv.URL}[k]
	}
	var errOut bytes.Buffer
	if code := run(context.Background(), []string{"status", "--wait", "mb-2"}, env, nil, &bytes.Buffer{}, &errOut); code != exitRejected {
		t.Fatalf("exit %d\n%s", code, errOut.String())
	}
	if !strings.Contains(errOut.String(), "review link for U123 (local fake Slack): "+link) {
		t.Errorf("stderr lacks the review link:\n%s", errOut.String())
	}
	if strings.Contains(errOut.String(), "apr_0") {
		t.Errorf("stderr shows another approval's link:\n%s", errOut.String())
	}
}

func toClient(t *testing.T, a *api.Approval) *api.Approval {
	t.Helper()
	b, _ := json.Marshal(a)
	var out api.Approval
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

// inboxAPI answers the approver routes with the approve package's own response types, for
// the approver named by the dev principal header.
type inboxAPI struct{ list api.Inbox }

func (a inboxAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if r.Header.Get("X-Buyflow-Tenant") != "acme" || r.Header.Get("X-Buyflow-Principal") != "dev:approver" {
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"error":{"code":"not_an_approver","message":"your IAM identity is not mapped to an approver"}}`))
		return
	}
	switch r.URL.Path {
	case approve.InboxPrefix:
		_ = json.NewEncoder(w).Encode(a.list)
	case approve.InboxPrefix + "/apr_1":
		_ = json.NewEncoder(w).Encode(api.InboxApproval{InboxItem: a.list.Items[0], Flight: "2026-01-05 → 2026-03-29",
			Packages: []api.InboxPackage{{Product: "ctv_premium_sports", Flight: "2026-01-05 → 2026-03-29", Budget: "USD 6,000.00"},
				{Product: "display_run_of_site", Flight: "2026-01-05 → 2026-02-28", Budget: "USD 6,500.00"}},
			Governance: &api.InboxGovernance{Verdict: "conditions", Label: "Approved with 1 condition",
				Conditions: []api.InboxCondition{{Field: "packages[1].end_time", Reason: "ends with February", NeedsPerson: true}}},
			ReviewURL: "http://127.0.0.1/v1/approvals/apr_1?approver=U0LOCALAPPROVER&exp=1&kid=k1&sig=x"})
	case approve.InboxPrefix + "/apr_campaign":
		_ = json.NewEncoder(w).Encode(api.InboxApproval{InboxItem: a.list.Items[1],
			ReviewURL: "http://127.0.0.1/v1/approvals/apr_campaign?approver=U0LOCALAPPROVER&exp=1&kid=k1&sig=x"})
	case approve.InboxPrefix + "/apr_change":
		_ = json.NewEncoder(w).Encode(api.InboxApproval{InboxItem: api.InboxItem{ApprovalID: "apr_change", OperationID: "chg-1",
			Summary: "Change to media buy mb-2", Seller: "sim-seller", Amount: "USD 14,000.25"},
			Changes:   []api.InboxChangeLine{{What: "Total budget", Before: "USD 3,000.00", After: "USD 14,000.25"}},
			ReviewURL: "http://127.0.0.1/v1/approvals/apr_change?approver=U0LOCALAPPROVER&exp=1&kid=k1&sig=x"})
	default:
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":{"code":"not_found","message":"no approval with that id is waiting for you"}}`))
	}
}

func TestApprovalsListsAndOpens(t *testing.T) {
	api := inboxAPI{list: api.Inbox{Approver: "U0LOCALAPPROVER", Items: []api.InboxItem{{ApprovalID: "apr_1", OperationID: "mb-2",
		Summary: "Media buy, PO PO-2", Seller: "sim-seller", Amount: "USD 12,500.00", Reason: "The amount is over the approval threshold set by policy.",
		Requester: "dev:buyer", ExpiresAt: "2026-12-01T14:05:00Z"},
		{ApprovalID: "apr_campaign", CampaignID: "cp-1", Summary: "Campaign Spring, 2 of 3 legs, plan plan-q1", Seller: "sim-seller, sim-seller-3",
			Amount: "USD 10,000.25", Reason: "This campaign needs a person's approval; one decision covers every leg.",
			ReasonText: "the campaign's total 10000.25 USD is at or over the approval threshold 10000.00 USD", Requester: "dev:buyer", ExpiresAt: "2026-12-01T14:05:00Z",
			Legs: []api.InboxLeg{{OperationID: "mb-a", Seller: "sim-seller", PONumber: "PO-A", Amount: "USD 4,000.25", Why: "governance approved it; it needs no approval on its own", Governance: "Approved"},
				{OperationID: "mb-c", Seller: "sim-seller-3", PONumber: "PO-C", Amount: "USD 6,000.00", Why: "governance approved it; it needs no approval on its own", Governance: "Approved"}}}}}}
	srv := httptest.NewServer(api)
	defer srv.Close()
	cases := []struct {
		name      string
		principal string
		args      []string
		code      int
		want      []string
	}{
		{"list", "dev:approver", []string{"approvals"}, 0, []string{"apr_1", "Media buy, PO PO-2", "sim-seller", "USD 12,500.00", "2026-12-01 14:05 UTC", "dev:buyer", "buyflow approvals <approval>"}},
		{"open", "dev:approver", []string{"approvals", "apr_1"}, 0, []string{"ctv_premium_sports", "2026-01-05 → 2026-02-28", "USD 6,500.00", "total", "USD 12,500.00",
			"governance: Approved with 1 condition", "packages[1].end_time: ends with February (needs your judgement)",
			"decide on the review page (your own link): http://127.0.0.1/v1/approvals/apr_1?approver=U0LOCALAPPROVER"}},
		{"open a change", "dev:approver", []string{"approvals", "apr_change"}, 0, []string{"Change to media buy mb-2", "WHAT CHANGES", "NOW", "AFTER THE CHANGE",
			"Total budget  USD 3,000.00  USD 14,000.25"}},
		{"list a campaign", "dev:approver", []string{"approvals"}, 0, []string{"apr_campaign", "Campaign Spring, 2 of 3 legs", "USD 10,000.25", "leg mb-a", "leg mb-c", "USD 6,000.00"}},
		{"open a campaign", "dev:approver", []string{"approvals", "apr_campaign"}, 0, []string{"Campaign Spring, 2 of 3 legs, plan plan-q1 (cp-1)",
			"at or over the approval threshold 10000.00 USD", "LEG", "mb-a", "PO-A", "USD 4,000.25", "mb-c", "USD 6,000.00", "total", "USD 10,000.25",
			"decide on the review page (your own link): http://127.0.0.1/v1/approvals/apr_campaign"}},
		{"open unknown", "dev:approver", []string{"approvals", "apr_9"}, 1, nil},
		{"not an approver", "dev:buyer", []string{"approvals"}, 1, nil},
		{"two ids", "dev:approver", []string{"approvals", "a", "b"}, 2, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := func(k string) string {
				return map[string]string{"BUYFLOW_ENDPOINT": srv.URL, "BUYFLOW_TENANT": "acme", "BUYFLOW_PRINCIPAL": tc.principal}[k]
			}
			var out, errOut bytes.Buffer
			if code := run(context.Background(), tc.args, env, nil, &out, &errOut); code != tc.code {
				t.Fatalf("exit %d, want %d\n%s%s", code, tc.code, out.String(), errOut.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}
