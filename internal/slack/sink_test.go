package slack

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func newSinkServer(t *testing.T) (*Sink, *httptest.Server) {
	t.Helper()
	sink := NewSink(func() time.Time { return t0 })
	srv := httptest.NewServer(sink)
	t.Cleanup(srv.Close)
	return sink, srv
}

func getMessages(t *testing.T, srv *httptest.Server) []Record {
	t.Helper()
	resp, err := http.Get(srv.URL + "/messages")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }() // decoded below; Close cannot change the result
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("GET /messages: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var recs []Record
	if err := json.NewDecoder(resp.Body).Decode(&recs); err != nil {
		t.Fatal(err)
	}
	return recs
}

// TestSinkWithBothClients drives the sink with the real clients, the way the
// local stack will.
func TestSinkWithBothClients(t *testing.T) {
	t.Parallel()
	sink, srv := newSinkServer(t)
	if recs := getMessages(t, srv); len(recs) != 0 {
		t.Fatalf("new sink has %d records", len(recs))
	}
	bot, err := NewBotClient(botToken, WithBaseURL(srv.URL+"/api/"))
	if err != nil {
		t.Fatal(err)
	}
	hook, err := NewWebhookClient(srv.URL + "/hooks/approvals")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	m := requestMsg(t)
	m.Channel = "U0ALICE01"
	ref, err := bot.Post(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	if ref.Channel != "U0ALICE01" || ref.TS == "" {
		t.Fatalf("ref = %+v", ref)
	}
	a := sampleApproval()
	a.Status, a.DecidedBy, a.DecidedAt = "rejected", "U0BOB0002", t0
	sm, err := StatusMessage(a)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bot.Update(ctx, ref, sm); err != nil {
		t.Fatal(err)
	}
	if _, err := hook.Post(ctx, requestMsg(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := hook.Update(ctx, Ref{}, sm); err != nil {
		t.Fatal(err)
	}

	recs := getMessages(t, srv)
	if len(recs) != 4 {
		t.Fatalf("got %d records: %+v", len(recs), recs)
	}
	wantKinds := []string{"chat.postMessage", "chat.update", "webhook", "webhook"}
	for i, r := range recs {
		if r.Seq != i+1 || r.Kind != wantKinds[i] || !r.Received.Equal(t0) {
			t.Errorf("record %d = %+v", i, r)
		}
		if strings.Contains(string(r.Body), botToken) {
			t.Errorf("record %d keeps the token", i)
		}
	}
	if recs[1].Channel != ref.Channel || recs[1].TS != ref.TS || !strings.HasPrefix(recs[1].Text, "Rejected by") {
		t.Errorf("update record = %+v", recs[1])
	}
	if !recs[0].Authorized || recs[2].Authorized || recs[2].Path != "/hooks/approvals" {
		t.Errorf("records = %+v / %+v", recs[0], recs[2])
	}
	var body Message
	if err := json.Unmarshal(recs[0].Body, &body); err != nil || len(body.Blocks) == 0 {
		t.Errorf("recorded body = %s (%v)", recs[0].Body, err)
	}
	if got := sink.Messages(); len(got) != 4 {
		t.Errorf("Messages() has %d records", len(got))
	}

	req, _ := http.NewRequest(http.MethodDelete, srv.URL+"/messages", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close() // 204: no body; only the status is checked
	if resp.StatusCode != http.StatusNoContent || len(getMessages(t, srv)) != 0 {
		t.Fatalf("DELETE /messages: %d", resp.StatusCode)
	}
	// After a reset the old message is gone, so an update is refused.
	_, err = bot.Update(ctx, ref, sm)
	var ae *APIError
	if !errors.As(err, &ae) || ae.Code != "message_not_found" {
		t.Fatalf("update after reset: %v", err)
	}
}

func TestSinkRefuses(t *testing.T) {
	t.Parallel()
	_, srv := newSinkServer(t)
	tests := []struct {
		name, method, path, auth, body string
		status                         int
		okFalse                        string
	}{
		{name: "no token", method: "POST", path: "/api/chat.postMessage", body: `{"channel":"C1","text":"x"}`, status: 200, okFalse: "not_authed"},
		{name: "no channel", method: "POST", path: "/api/chat.postMessage", auth: "Bearer t", body: `{"text":"x"}`, status: 200, okFalse: "channel_not_found"},
		{name: "no text", method: "POST", path: "/api/chat.postMessage", auth: "Bearer t", body: `{"channel":"C1"}`, status: 200, okFalse: "no_text"},
		{name: "bad json", method: "POST", path: "/api/chat.postMessage", auth: "Bearer t", body: `nope`, status: 200, okFalse: "invalid_json"},
		{name: "unknown method", method: "POST", path: "/api/chat.delete", auth: "Bearer t", body: `{}`, status: 200, okFalse: "unknown_method"},
		{name: "update unknown message", method: "POST", path: "/api/chat.update", auth: "Bearer t", body: `{"channel":"C1","ts":"1.1","text":"x"}`, status: 200, okFalse: "message_not_found"},
		{name: "webhook bad json", method: "POST", path: "/hooks/x", body: `text=hi`, status: 400},
		{name: "webhook empty", method: "POST", path: "/hooks/x", body: `{"blocks":[]}`, status: 400},
		{name: "webhook too large", method: "POST", path: "/hooks/x", body: `{"text":"` + strings.Repeat("a", 2<<20) + `"}`, status: 413},
		{name: "get webhook", method: "GET", path: "/hooks/x", status: 405},
		{name: "put messages", method: "PUT", path: "/messages", status: 405},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req, _ := http.NewRequest(tt.method, srv.URL+tt.path, strings.NewReader(tt.body))
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = resp.Body.Close() }() // read-only; Close cannot change what was checked
			if resp.StatusCode != tt.status {
				t.Fatalf("status = %d, want %d", resp.StatusCode, tt.status)
			}
			if tt.okFalse != "" {
				var r apiResponse
				if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || r.OK || r.Error != tt.okFalse {
					t.Fatalf("answer = %+v (%v), want ok:false %s", r, err, tt.okFalse)
				}
			}
		})
	}
	if recs := getMessages(t, srv); len(recs) != 0 {
		t.Fatalf("refused requests were recorded: %+v", recs)
	}
}

// A scripted refusal answers the bot client's posts to one channel with Slack's error, as many
// times as asked, records none of them, and leaves other channels alone.
func TestSinkRefusesPostsToAChannelAsScripted(t *testing.T) {
	t.Parallel()
	sink, srv := newSinkServer(t)
	bot, err := NewBotClient("xoxb-test", WithBaseURL(srv.URL+"/api/"))
	if err != nil {
		t.Fatal(err)
	}
	refused := sink.Refuse("U1", "internal_error", 2)
	ctx := context.Background()
	if _, err := bot.Post(ctx, Message{Channel: "U2", Text: "other"}); err != nil {
		t.Fatalf("a post to another channel: %v", err)
	}
	for i := range 2 {
		var ae *APIError
		if _, err := bot.Post(ctx, Message{Channel: "U1", Text: "hi"}); !errors.As(err, &ae) || ae.Code != "internal_error" || !ae.Retryable() {
			t.Fatalf("post %d: %v, want a retryable internal_error", i+1, err)
		}
	}
	if _, err := bot.Post(ctx, Message{Channel: "U1", Text: "hi"}); err != nil {
		t.Fatalf("the post after two refusals: %v", err)
	}
	if n := refused(); n != 2 {
		t.Errorf("refused %d, want 2", n)
	}
	recs := getMessages(t, srv)
	if len(recs) != 2 || recs[0].Channel != "U2" || recs[1].Channel != "U1" {
		t.Errorf("records %+v, want the post to U2 and the third to U1", recs)
	}
}
