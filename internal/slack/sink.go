package slack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Record is one message a Sink received.
type Record struct {
	// Seq numbers records from 1 in arrival order.
	Seq int `json:"seq"`
	// Kind is "chat.postMessage", "chat.update" or "webhook".
	Kind string `json:"kind"`
	// Path is the request path (for webhooks, which hook was used).
	Path string `json:"path"`
	// Channel and TS locate the message (API kinds only).
	Channel string `json:"channel,omitempty"`
	TS      string `json:"ts,omitempty"`
	// Authorized says a bearer token was sent; the token is not kept.
	Authorized bool `json:"authorized"`
	// Text is the message's fallback text.
	Text string `json:"text"`
	// Body is the JSON body as posted.
	Body json.RawMessage `json:"body"`
	// Received is when the sink got it.
	Received time.Time `json:"received"`
}

// Sink is a fake Slack: an http.Handler that records what is posted to it
// and serves the records. Routes:
//
//	POST   /api/chat.postMessage  bot API: needs a bearer token and a channel; answers ok, channel, ts
//	POST   /api/chat.update       bot API: needs channel and ts of a posted message
//	POST   /api/<other>           ok:false, unknown_method
//	POST   any other path         incoming webhook: needs a JSON body with text or blocks; answers "ok"
//	GET    /messages              every record, as a JSON array
//	DELETE /messages              forget every record
//
// Point a BotClient at it with WithBaseURL(sinkURL+"/api/") and a
// WebhookClient at sinkURL+"/hooks/anything". It is safe for concurrent use.
type Sink struct {
	now func() time.Time

	mu      sync.Mutex
	records []Record
	posted  map[Ref]bool
	seq     int
	// refuse holds the scripted refusals of chat.postMessage by channel (Refuse).
	refuse map[string]*refusal
}

// refusal is Refuse's script for one channel.
type refusal struct {
	code          string
	left, refused int
}

// NewSink returns an empty Sink reading the time from now (time.Now if nil).
func NewSink(now func() time.Time) *Sink {
	if now == nil {
		now = time.Now
	}
	return &Sink{now: now, posted: map[Ref]bool{}, refuse: map[string]*refusal{}}
}

// Refuse makes the sink answer the next n chat.postMessage calls to channel with
// {"ok":false,"error":code}, as Slack answers a post it did not take (e.g. "internal_error"),
// and record none of them. refused reports how many it has refused so far.
func (s *Sink) Refuse(channel, code string, n int) (refused func() int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &refusal{code: code, left: n}
	s.refuse[channel] = r
	return func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		return r.refused
	}
}

// Messages returns a copy of the records so far.
func (s *Sink) Messages() []Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Record(nil), s.records...)
}

// Reset forgets every record.
func (s *Sink) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records, s.posted = nil, map[Ref]bool{}
}

// ServeHTTP implements http.Handler.
func (s *Sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/messages" && r.Method == http.MethodGet:
		msgs := s.Messages()
		if msgs == nil {
			msgs = []Record{}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(msgs) // a failed write has no one to report to
	case r.URL.Path == "/messages" && r.Method == http.MethodDelete:
		s.Reset()
		w.WriteHeader(http.StatusNoContent)
	case r.URL.Path == "/messages":
		w.Header().Set("Allow", "GET, DELETE")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	case r.Method != http.MethodPost:
		w.Header().Set("Allow", "POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	case strings.HasPrefix(r.URL.Path, "/api/"):
		s.api(w, r, strings.TrimPrefix(r.URL.Path, "/api/"))
	default:
		s.webhook(w, r)
	}
}

type sinkBody struct {
	Channel string          `json:"channel"`
	TS      string          `json:"ts"`
	Text    string          `json:"text"`
	Blocks  json.RawMessage `json:"blocks"`
}

// readBody reads a JSON object body. tooLarge means an answer was written.
func readBody(w http.ResponseWriter, r *http.Request) (raw []byte, b sinkBody, valid, tooLarge bool) {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxResponseBytes))
	if err != nil {
		http.Error(w, "too large", http.StatusRequestEntityTooLarge)
		return nil, sinkBody{}, false, true
	}
	if !bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{")) || json.Unmarshal(raw, &b) != nil {
		return raw, sinkBody{}, false, false
	}
	return raw, b, true, false
}

func hasContent(b sinkBody) bool {
	return b.Text != "" || (len(b.Blocks) > 0 && string(b.Blocks) != "null" && string(b.Blocks) != "[]")
}

func (s *Sink) api(w http.ResponseWriter, r *http.Request, method string) {
	reply := func(v map[string]any) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_ = json.NewEncoder(w).Encode(v) // a failed write has no one to report to
	}
	fail := func(code string) { reply(map[string]any{"ok": false, "error": code}) }
	if method != "chat.postMessage" && method != "chat.update" {
		fail("unknown_method")
		return
	}
	auth := r.Header.Get("Authorization")
	if token, ok := strings.CutPrefix(auth, "Bearer "); !ok || strings.TrimSpace(token) == "" {
		fail("not_authed")
		return
	}
	raw, b, valid, tooLarge := readBody(w, r)
	if tooLarge {
		return
	}
	if !valid {
		fail("invalid_json")
		return
	}
	if b.Channel == "" {
		fail("channel_not_found")
		return
	}
	if !hasContent(b) {
		fail("no_text")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.refuse[b.Channel]; r != nil && r.left > 0 && method == "chat.postMessage" {
		r.left--
		r.refused++
		fail(r.code)
		return
	}
	now := s.now().UTC()
	rec := Record{Kind: method, Path: r.URL.Path, Channel: b.Channel, Authorized: true, Text: b.Text, Body: raw, Received: now}
	switch method {
	case "chat.postMessage":
		rec.TS = fmt.Sprintf("%d.%06d", now.Unix(), s.seq+1)
		s.posted[Ref{Channel: b.Channel, TS: rec.TS}] = true
	case "chat.update":
		if !s.posted[Ref{Channel: b.Channel, TS: b.TS}] {
			fail("message_not_found")
			return
		}
		rec.TS = b.TS
	}
	s.seq++
	rec.Seq = s.seq
	s.records = append(s.records, rec)
	reply(map[string]any{"ok": true, "channel": rec.Channel, "ts": rec.TS})
}

func (s *Sink) webhook(w http.ResponseWriter, r *http.Request) {
	raw, b, valid, tooLarge := readBody(w, r)
	if tooLarge {
		return
	}
	if !valid || !hasContent(b) {
		http.Error(w, "invalid_payload", http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.seq++
	s.records = append(s.records, Record{Seq: s.seq, Kind: "webhook", Path: r.URL.Path, Text: b.Text, Body: raw, Received: s.now().UTC()})
	s.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, "ok") // a failed write has no one to report to
}
