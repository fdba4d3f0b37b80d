package apiclient

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

func TestApprovalLinks(t *testing.T) {
	api := "http://127.0.0.1:8080"
	body, _ := json.Marshal(map[string]any{"blocks": []any{map[string]any{"text": map[string]any{
		"text": "<" + api + "/v1/approvals/apr_1?approver=U1&exp=9&kid=k1&sig=abc|Review and decide>"}}}})
	msgs := []SlackMessage{
		{Seq: 1, Body: body},
		{Seq: 2, Body: body}, // chat.update repeats the link
		{Seq: 3, Text: "see " + api + "/v1/approvals/apr_2?sig=x&approver=U2 now"},
		{Seq: 4, Text: "https://elsewhere.example/v1/approvals/apr_3"},
	}
	got := ApprovalLinks(msgs, api+"/")
	want := []string{api + "/v1/approvals/apr_1?approver=U1&exp=9&kid=k1&sig=abc", api + "/v1/approvals/apr_2?sig=x&approver=U2"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("links = %q, want %q", got, want)
	}
}

// TestDecide serves a confirm page shaped like internal/approvalcore's and checks that Decide
// posts the hidden fields and the decision back to the page's own URL.
func TestDecide(t *testing.T) {
	var posted url.Values
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
			_, _ = io.WriteString(w, `<!DOCTYPE html><main><h1>Approve this media buy?</h1>
<form method="post">
<input type="hidden" name="approver" value="U1">
<input type="hidden" name="sig" value="a&amp;b">
<textarea name="comment"></textarea>
<button type="submit" name="decision" value="approve">Approve</button></form></main>`)
		case http.MethodPost:
			if r.URL.RawQuery != "approver=U1&sig=zz" || r.Header.Get("Content-Type") != "application/x-www-form-urlencoded" {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			b, _ := io.ReadAll(r.Body)
			posted, _ = url.ParseQuery(string(b))
			_, _ = io.WriteString(w, `<main><h1>Approved</h1></main>`)
		}
	}))
	defer srv.Close()
	code, heading, err := Decide(context.Background(), nil, srv.URL+"/v1/approvals/apr_1?approver=U1&sig=zz", "approve", "ok")
	if err != nil {
		t.Fatal(err)
	}
	if code != 200 || heading != "Approved" {
		t.Errorf("result %d %q, want 200 Approved", code, heading)
	}
	if posted.Get("decision") != "approve" || posted.Get("sig") != "a&b" || posted.Get("approver") != "U1" || posted.Get("comment") != "ok" {
		t.Errorf("posted %v", posted)
	}
}

func TestSubmitErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Idempotency-Key") != "k1" || r.Header.Get("X-Tenant") != "acme" {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusUnprocessableEntity)
		_, _ = io.WriteString(w, `{"error":{"code":"idempotency_key_reused","message":"use a new key"}}`)
	}))
	defer srv.Close()
	c := &Client{BaseURL: srv.URL, TenantHeader: "X-Tenant", Tenant: "acme"}
	_, status, err := c.Submit(context.Background(), "k1", []byte(`{}`))
	if status != 422 || StatusOf(err) != 422 || !strings.Contains(err.Error(), "idempotency_key_reused") {
		t.Errorf("status %d, err %v; want a 422 StatusError naming the code", status, err)
	}
}

func TestSubmitRetriesKeyInUse(t *testing.T) {
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		if calls == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusConflict)
			_, _ = io.WriteString(w, `{"error":{"code":"idempotency_key_in_use","message":"retry"}}`)
			return
		}
		_, _ = io.WriteString(w, `{"operation_id":"mb-1","status":"requested","replayed":true}`)
	}))
	defer srv.Close()
	c := &Client{BaseURL: srv.URL}
	sub, status, err := c.Submit(context.Background(), "k1", []byte(`{}`))
	if err != nil || status != 200 || sub.OperationID != "mb-1" || calls != 2 {
		t.Errorf("submit = %+v %d %v after %d calls; want the replay after one retry", sub, status, err, calls)
	}
}
