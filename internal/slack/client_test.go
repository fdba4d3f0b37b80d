package slack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	botToken    = "xoxb-1111-2222-SECRETTOKEN"
	webhookPath = "/services/T000/B000/SECRETHOOKPATH"
)

type captured struct {
	Method, Path, Auth, ContentType string
	Body                            map[string]any
}

// recorder is an httptest server that records requests and answers with
// reply(path).
func recorder(t *testing.T, reply func(w http.ResponseWriter, path string)) (*httptest.Server, func() []captured) {
	t.Helper()
	var mu sync.Mutex
	var got []captured
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Errorf("body is not JSON: %q", raw)
		}
		mu.Lock()
		got = append(got, captured{r.Method, r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("Content-Type"), body})
		mu.Unlock()
		reply(w, r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	return srv, func() []captured {
		mu.Lock()
		defer mu.Unlock()
		return append([]captured(nil), got...)
	}
}

func requestMsg(t *testing.T) Message {
	t.Helper()
	m, err := RequestMessage(sampleApproval(), []Review{{Approver: "U0ALICE01", URL: reviewURL}})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func noSecrets(t *testing.T, err error) {
	t.Helper()
	if err != nil && (strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), botToken)) {
		t.Errorf("error leaks a secret: %v", err)
	}
}

func TestBotClientPostAndUpdate(t *testing.T) {
	t.Parallel()
	srv, got := recorder(t, func(w http.ResponseWriter, path string) {
		w.Header().Set("Content-Type", "application/json")
		// A failed write shows up as the client's error, which the test checks.
		switch path {
		case "/api/chat.postMessage":
			_, _ = fmt.Fprint(w, `{"ok":true,"channel":"D0DM00001","ts":"1796000000.000100","message":{}}`)
		case "/api/chat.update":
			_, _ = fmt.Fprint(w, `{"ok":true,"channel":"D0DM00001","ts":"1796000000.000100","text":"x"}`)
		default:
			_, _ = fmt.Fprint(w, `{"ok":false,"error":"unknown_method"}`)
		}
	})
	c, err := NewBotClient(botToken, WithBaseURL(srv.URL+"/api"))
	if err != nil {
		t.Fatal(err)
	}
	m := requestMsg(t)
	m.Channel = "U0ALICE01"
	ref, err := c.Post(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	if ref != (Ref{Channel: "D0DM00001", TS: "1796000000.000100"}) {
		t.Fatalf("ref = %+v", ref)
	}
	a := sampleApproval()
	a.Status, a.DecidedBy, a.DecidedAt = "approved", "U0BOB0002", t0
	sm, err := StatusMessage(a)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Update(context.Background(), ref, sm); err != nil {
		t.Fatal(err)
	}

	reqs := got()
	if len(reqs) != 2 {
		t.Fatalf("got %d requests", len(reqs))
	}
	for _, r := range reqs {
		if r.Method != http.MethodPost || r.Auth != "Bearer "+botToken || r.ContentType != "application/json; charset=utf-8" {
			t.Errorf("request %+v", r)
		}
	}
	post, upd := reqs[0], reqs[1]
	if post.Path != "/api/chat.postMessage" || post.Body["channel"] != "U0ALICE01" || post.Body["unfurl_links"] != false {
		t.Errorf("post = %v %v", post.Path, post.Body)
	}
	if _, ok := post.Body["ts"]; ok {
		t.Error("postMessage carries ts")
	}
	if upd.Path != "/api/chat.update" || upd.Body["channel"] != "D0DM00001" || upd.Body["ts"] != "1796000000.000100" {
		t.Errorf("update = %v %v", upd.Path, upd.Body)
	}
	if _, ok := upd.Body["unfurl_links"]; ok {
		t.Error("chat.update carries postMessage-only fields")
	}
	if blocks, _ := upd.Body["blocks"].([]any); len(blocks) == 0 {
		t.Error("update has no blocks")
	}
}

func TestBotClientErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		status    int
		header    map[string]string
		body      string
		code      string
		retryable bool
		after     time.Duration
	}{
		{name: "ok false", status: 200, body: `{"ok":false,"error":"channel_not_found"}`, code: "channel_not_found"},
		{name: "invalid auth", status: 200, body: `{"ok":false,"error":"invalid_auth"}`, code: "invalid_auth"},
		{name: "ok false without code", status: 200, body: `{"ok":false}`, code: "unknown_error"},
		{name: "ok false with odd code", status: 200, body: `{"ok":false,"error":"<b>xoxb-leak</b>"}`, code: "http_200"},
		{name: "internal error", status: 200, body: `{"ok":false,"error":"internal_error"}`, code: "internal_error", retryable: true},
		{name: "rate limited", status: 429, header: map[string]string{"Retry-After": "30"}, body: ``, code: "ratelimited", retryable: true, after: 30 * time.Second},
		{name: "server error", status: 503, body: `upstream down`, code: "http_503", retryable: true},
		{name: "not json", status: 200, body: `<html>`, code: "invalid_response"},
		{name: "redirect not followed", status: 302, header: map[string]string{"Location": "https://evil.example/"}, code: "http_302"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tt.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tt.status)
				_, _ = fmt.Fprint(w, tt.body) // a failed write shows up as the client's error
			}))
			defer srv.Close()
			c, err := NewBotClient(botToken, WithBaseURL(srv.URL+"/api/"), WithHTTPClient(srv.Client()))
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Post(context.Background(), Message{Channel: "C1", Text: "hi"})
			var ae *APIError
			if !errors.As(err, &ae) {
				t.Fatalf("err = %v, want *APIError", err)
			}
			if ae.Code != tt.code || ae.Op != "chat.postMessage" || ae.Retryable() != tt.retryable || ae.RetryAfter != tt.after {
				t.Errorf("APIError = %+v (retryable %v)", ae, ae.Retryable())
			}
			noSecrets(t, err)
		})
	}
}

func TestBotClientRefusesBadInput(t *testing.T) {
	t.Parallel()
	for _, tok := range []string{"", "xoxb-1 2", "xoxb-1\n"} {
		if _, err := NewBotClient(tok); err == nil {
			t.Errorf("token %q accepted", tok)
		}
	}
	if _, err := NewBotClient(botToken, WithHTTPClient(nil)); err != nil {
		t.Errorf("nil http client: %v", err)
	}
	if _, err := NewBotClient(botToken, WithBaseURL("not a url")); err == nil {
		t.Error("bad base url accepted")
	}
	c, err := NewBotClient(botToken)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Post(context.Background(), Message{Text: "x"}); err == nil {
		t.Error("post without channel accepted")
	}
	if _, err := c.Update(context.Background(), Ref{Channel: "C1"}, Message{Text: "x"}); err == nil {
		t.Error("update without ts accepted")
	}
}

func TestBotClientTransportErrorHidesNothingSecret(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	base := srv.URL + "/api/"
	srv.Close() // connection refused from now on
	c, err := NewBotClient(botToken, WithBaseURL(base))
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Post(context.Background(), Message{Channel: "C1", Text: "x"})
	if err == nil {
		t.Fatal("no error")
	}
	noSecrets(t, err)
}

func TestWebhookClient(t *testing.T) {
	t.Parallel()
	status, body := http.StatusOK, "ok"
	var mu sync.Mutex
	srv, got := recorder(t, func(w http.ResponseWriter, _ string) {
		mu.Lock()
		defer mu.Unlock()
		w.WriteHeader(status)
		_, _ = fmt.Fprint(w, body) // a failed write shows up as the client's error
	})
	c, err := NewWebhookClient(srv.URL + webhookPath)
	if err != nil {
		t.Fatal(err)
	}
	m := requestMsg(t)
	m.Channel, m.TS = "C0IGNORED", "1.2"
	ref, err := c.Post(context.Background(), m)
	if err != nil || ref != (Ref{}) {
		t.Fatalf("Post = %+v, %v", ref, err)
	}
	// Update cannot edit: it posts a follow-up to the same hook.
	if _, err := c.Update(context.Background(), Ref{Channel: "C1", TS: "1.2"}, Message{Text: "Approved"}); err != nil {
		t.Fatal(err)
	}
	reqs := got()
	if len(reqs) != 2 || reqs[0].Path != webhookPath || reqs[1].Path != webhookPath {
		t.Fatalf("requests = %+v", reqs)
	}
	if reqs[0].Auth != "" || reqs[0].ContentType != "application/json; charset=utf-8" {
		t.Errorf("headers = %+v", reqs[0])
	}
	if _, ok := reqs[0].Body["channel"]; ok {
		t.Error("webhook body carries channel")
	}
	if reqs[1].Body["text"] != "Approved" {
		t.Errorf("follow-up = %v", reqs[1].Body)
	}

	for _, tt := range []struct {
		status int
		body   string
		code   string
	}{
		{400, "invalid_payload", "invalid_payload"},
		{403, "action_prohibited", "action_prohibited"},
		{404, "no_service", "no_service"},
		{410, "channel_is_archived", "channel_is_archived"},
		{500, "<html>oops " + webhookPath + "</html>", "http_500"},
	} {
		mu.Lock()
		status, body = tt.status, tt.body
		mu.Unlock()
		_, err := c.Post(context.Background(), Message{Text: "x"})
		var ae *APIError
		if !errors.As(err, &ae) || ae.Code != tt.code || ae.Op != "webhook" || ae.StatusCode != tt.status {
			t.Errorf("status %d: err = %v", tt.status, err)
		}
		noSecrets(t, err)
	}
}

func TestWebhookClientErrorsNeverQuoteTheURL(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	hook := srv.URL + webhookPath
	srv.Close()
	c, err := NewWebhookClient(hook)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Post(context.Background(), Message{Text: "x"})
	if err == nil {
		t.Fatal("no error")
	}
	noSecrets(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = c.Post(ctx, Message{Text: "x"})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	noSecrets(t, err)

	if _, err := NewWebhookClient("hooks.slack.com" + webhookPath); err == nil {
		t.Error("relative webhook url accepted")
	} else {
		noSecrets(t, err)
	}
}

func TestClientsNeverPrintSecrets(t *testing.T) {
	t.Parallel()
	bot, err := NewBotClient(botToken)
	if err != nil {
		t.Fatal(err)
	}
	hook, err := NewWebhookClient("https://hooks.slack.com" + webhookPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{BotToken: botToken}
	hookCfg := Config{WebhookURL: "https://hooks.slack.com" + webhookPath}
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("clients", "bot", bot, "hook", hook, "cfg", cfg, "hookCfg", hookCfg)
	cfgJSON, _ := json.Marshal(hookCfg)
	out := fmt.Sprintf("%v %+v %#v %s %v %+v %#v %v %+v %#v", bot, bot, bot, hook, hook, hook, hook, cfg, hookCfg, cfg) + logs.String() + string(cfgJSON)
	if strings.Contains(out, "SECRET") {
		t.Fatalf("secret printed: %s", out)
	}
}
