package adcptest

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/webhookauth"
)

const hmacSecret = "0123456789abcdef0123456789abcdef-hmac"

// receiver is a buyer webhook endpoint on loopback.
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	got    []received
	status func(n int) int // HTTP status for the n-th request (0-based)
}

type received struct {
	header http.Header
	body   []byte
	code   int
}

func newReceiver(t *testing.T, status func(int) int) *receiver {
	r := &receiver{status: status}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		code := http.StatusOK
		if r.status != nil {
			code = r.status(len(r.got))
		}
		r.got = append(r.got, received{header: req.Header.Clone(), body: b, code: code})
		r.mu.Unlock()
		w.WriteHeader(code)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) all() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

func verifyHMAC(h http.Header, body []byte, secret string) bool {
	ts := h.Get("X-ADCP-Timestamp")
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	want := "sha256=" + hex.EncodeToString(mac.Sum(nil))
	return ts != "" && hmac.Equal([]byte(h.Get("X-ADCP-Signature")), []byte(want))
}

func statuses(rs []received) []string {
	var out []string
	for _, r := range rs {
		var p map[string]any
		_ = json.Unmarshal(r.body, &p)
		out = append(out, p["status"].(string))
	}
	return out
}

var hmacAuth = map[string]any{"schemes": []any{"HMAC-SHA256"}, "credentials": hmacSecret}

func TestWebhookHMAC(t *testing.T) {
	rcv := newReceiver(t, nil)
	s, cs := startSeller(t, SellerOptions{})
	args := withPush(createArgs("async_complete"), rcv.srv.URL+"/v1/webhooks/adcp/op", hmacAuth)
	r := callT(t, cs, "create_media_buy", args)
	id := r.str("task_id")
	if st, _ := s.Task(id); st.Push == nil {
		t.Fatal("push config not stored")
	}
	for range 2 {
		if _, err := s.Advance(id); err != nil {
			t.Fatal(err)
		}
	}
	d := s.WaitDeliveries(2, 2*time.Second)
	got := rcv.all()
	if len(d) != 2 || len(got) != 2 {
		t.Fatalf("deliveries = %d, received = %d", len(d), len(got))
	}
	if strings.Join(statuses(got), ",") != "working,completed" {
		t.Errorf("statuses = %v", statuses(got))
	}
	pc := args["push_notification_config"].(map[string]any)
	for i, g := range got {
		if !verifyHMAC(g.header, g.body, hmacSecret) {
			t.Errorf("delivery %d: bad HMAC: %v", i, g.header)
		}
		mustValidate(t, "core/mcp-webhook-payload.json", g.body)
		var p map[string]any
		_ = json.Unmarshal(g.body, &p)
		if p["operation_id"] != pc["operation_id"] || p["token"] != pc["token"] || p["task_id"] != id || p["task_type"] != "create_media_buy" {
			t.Errorf("payload %d: %s", i, g.body)
		}
		if ctx, _ := p["context"].(map[string]any); ctx["buyer_ref"] != "order-42" {
			t.Errorf("context not echoed: %s", g.body)
		}
		if d[i].StatusCode != 200 || d[i].Attempt != 1 {
			t.Errorf("delivery record %d: %+v", i, d[i])
		}
	}
	var last map[string]any
	_ = json.Unmarshal(got[1].body, &last)
	if res, _ := last["result"].(map[string]any); res["media_buy_id"] == nil {
		t.Errorf("completed webhook without result.media_buy_id: %s", got[1].body)
	}
	if callT(t, cs, "get_task_status", map[string]any{"task_id": id}).get("has_webhook") != true {
		t.Error("has_webhook false")
	}
}

func TestWebhookNotSentForSync(t *testing.T) {
	rcv := newReceiver(t, nil)
	s, cs := startSeller(t, SellerOptions{})
	callT(t, cs, "create_media_buy", withPush(createArgs(""), rcv.srv.URL, hmacAuth))
	time.Sleep(20 * time.Millisecond)
	if len(rcv.all()) != 0 || len(s.Deliveries()) != 0 {
		t.Error("a synchronous completion produced a webhook")
	}
}

func TestWebhookFaults(t *testing.T) {
	tests := []struct {
		name       string
		sim        string
		opt        []WebhookFault
		status     func(int) int
		wantRecv   []string // statuses the receiver sees, in order
		wantDeliv  int      // delivery records
		badSig     bool
		minElapsed time.Duration
	}{
		{name: "drop terminal", sim: "wh_drop", wantRecv: []string{"working"}, wantDeliv: 2},
		{name: "drop all by option", opt: []WebhookFault{FaultDropAll}, wantRecv: nil, wantDeliv: 2},
		{name: "duplicate", sim: "wh_duplicate", wantRecv: []string{"working", "working", "completed", "completed"}, wantDeliv: 4},
		{name: "out of order", sim: "wh_out_of_order", wantRecv: []string{"completed", "working"}, wantDeliv: 2},
		{name: "delay", sim: "wh_delay", wantRecv: []string{"working", "completed"}, wantDeliv: 2, minElapsed: 100 * time.Millisecond},
		{name: "bad signature is not retried on 401", sim: "wh_bad_signature", status: func(int) int { return 401 }, wantRecv: []string{"working", "completed"}, wantDeliv: 2, badSig: true},
		{name: "retries 5xx then gives up", status: func(int) int { return 503 }, wantRecv: []string{"working", "working", "working", "completed", "completed", "completed"}, wantDeliv: 6},
		{name: "retries once then succeeds", status: func(n int) int {
			if n == 0 {
				return 500
			}
			return 200
		}, wantRecv: []string{"working", "working", "completed"}, wantDeliv: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rcv := newReceiver(t, tt.status)
			s, cs := startSeller(t, SellerOptions{WebhookFaults: tt.opt, WebhookDelay: 50 * time.Millisecond})
			sim := "async_complete"
			if tt.sim != "" {
				sim += "," + tt.sim
			}
			id := callT(t, cs, "create_media_buy", withPush(createArgs(sim), rcv.srv.URL, hmacAuth)).str("task_id")
			start := time.Now()
			for range 2 {
				if _, err := s.Advance(id); err != nil {
					t.Fatal(err)
				}
			}
			d := s.WaitDeliveries(tt.wantDeliv, 3*time.Second)
			elapsed := time.Since(start)
			time.Sleep(20 * time.Millisecond) // catch extra deliveries
			got := rcv.all()
			if strings.Join(statuses(got), ",") != strings.Join(tt.wantRecv, ",") {
				t.Errorf("received %v, want %v", statuses(got), tt.wantRecv)
			}
			if len(s.Deliveries()) != tt.wantDeliv {
				t.Errorf("deliveries = %d, want %d: %+v", len(s.Deliveries()), tt.wantDeliv, s.Deliveries())
			}
			for _, g := range got {
				if verifyHMAC(g.header, g.body, hmacSecret) == tt.badSig {
					t.Errorf("signature valid = %v, want %v", !tt.badSig, !tt.badSig)
				}
			}
			if tt.name == "duplicate" && (d[0].IdempotencyKey != d[1].IdempotencyKey || d[0].IdempotencyKey == d[2].IdempotencyKey) {
				t.Errorf("duplicate keys: %+v", d)
			}
			if elapsed < tt.minElapsed {
				t.Errorf("elapsed %v < %v", elapsed, tt.minElapsed)
			}
		})
	}
}

func TestWebhookBearerMode(t *testing.T) {
	rcv := newReceiver(t, nil)
	s, cs := startSeller(t, SellerOptions{})
	cred := strings.Repeat("b", 40)
	id := callT(t, cs, "create_media_buy", withPush(createArgs("async_complete"), rcv.srv.URL, map[string]any{"schemes": []any{"Bearer"}, "credentials": cred})).str("task_id")
	if err := s.Finish(id, "completed"); err != nil {
		t.Fatal(err)
	}
	s.WaitDeliveries(1, 2*time.Second)
	got := rcv.all()
	if len(got) != 1 || got[0].header.Get("Authorization") != "Bearer "+cred {
		t.Errorf("bearer delivery: %+v", got)
	}
}

// TestWebhookRFC9421VerifiesAgainstServedJWKS signs with the default (RFC
// 9421) mode and verifies with internal/webhookauth against the JWKS the seller
// serves at /.well-known/jwks.json.
func TestWebhookRFC9421VerifiesAgainstServedJWKS(t *testing.T) {
	signer, jwks, err := NewWebhookKey("adcptest-2026", nil)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var results []error
	var v *webhookauth.Verifier
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		_, err := v.VerifyHTTP(context.Background(), r, b)
		mu.Lock()
		results = append(results, err)
		mu.Unlock()
		if err != nil {
			w.Header().Set("WWW-Authenticate", webhookauth.WWWAuthenticate(err))
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rcv.Close)

	s, cs := startSeller(t, SellerOptions{WebhookSigner: signer, JWKS: jwks})
	v, err = webhookauth.New(webhookauth.Config{Mode: webhookauth.ModeRFC9421, JWKSURL: s.BaseURL() + "/.well-known/jwks.json"})
	if err != nil {
		t.Fatal(err)
	}
	if got := callT(t, cs, "get_adcp_capabilities", map[string]any{}).get("webhook_signing.supported"); got != true {
		t.Errorf("webhook_signing.supported = %v", got)
	}
	for _, sim := range []string{"async_complete", "async_complete,wh_bad_signature"} {
		id := callT(t, cs, "create_media_buy", withPush(createArgs(sim), rcv.URL+"/v1/webhooks/adcp/op", nil)).str("task_id")
		if err := s.Finish(id, "completed"); err != nil {
			t.Fatal(err)
		}
	}
	d := s.WaitDeliveries(2, 3*time.Second)
	if len(d) != 2 {
		t.Fatalf("deliveries: %+v", d)
	}
	mu.Lock()
	defer mu.Unlock()
	bad := 0
	for _, err := range results {
		if err != nil {
			bad++
		}
	}
	if len(results) != 2 || bad != 1 {
		t.Errorf("verification results = %v, want one valid and one refused", results)
	}
	for _, x := range d {
		corrupt := len(x.Faults) == 1 && x.Faults[0] == FaultBadSignature
		if want := map[bool]int{false: http.StatusNoContent, true: http.StatusUnauthorized}[corrupt]; x.StatusCode != want || x.Attempt != 1 {
			t.Errorf("delivery (bad signature %v): status %d attempt %d", corrupt, x.StatusCode, x.Attempt)
		}
	}
	if d[0].Header.Get("Signature-Input") == "" || !strings.Contains(d[0].Header.Get("Signature-Input"), `tag="adcp/webhook-signing/v1"`) {
		t.Errorf("Signature-Input = %q", d[0].Header.Get("Signature-Input"))
	}
}

func TestWebhookAsyncCancel(t *testing.T) {
	rcv := newReceiver(t, nil)
	clk := newClock()
	s, cs := startSeller(t, SellerOptions{Now: clk.Now})
	mb := callT(t, cs, "create_media_buy", createArgs("")).str("media_buy_id")
	upd := withPush(map[string]any{
		"idempotency_key": key(), "account": createArgs("")["account"], "media_buy_id": mb,
		"canceled": true, "cancellation_reason": "governance findings", "context": map[string]any{"sim": "async_complete"},
	}, rcv.srv.URL, hmacAuth)
	r := callT(t, cs, "update_media_buy", upd)
	if r.str("status") != "submitted" {
		t.Fatalf("%s", r.Raw)
	}
	mustValidate(t, "media-buy/update-media-buy-response.json", r.Raw)
	if err := s.Finish(r.str("task_id"), "completed"); err != nil {
		t.Fatal(err)
	}
	s.WaitDeliveries(1, 2*time.Second)
	got := rcv.all()
	if len(got) != 1 {
		t.Fatalf("received %d", len(got))
	}
	mustValidate(t, "core/mcp-webhook-payload.json", got[0].body)
	var p map[string]any
	_ = json.Unmarshal(got[0].body, &p)
	res, _ := p["result"].(map[string]any)
	if p["task_type"] != "update_media_buy" || res["media_buy_status"] != "canceled" || p["timestamp"] != clk.Now().Format(time.RFC3339Nano) {
		t.Errorf("payload: %s", got[0].body)
	}
	if st := s.MediaBuys()[0]["status"]; st != "canceled" {
		t.Errorf("media buy status = %v", st)
	}
	if c := s.Calls(); !c[0].Time.Equal(clk.Now()) {
		t.Errorf("call time %v is not the agent clock", c[0].Time)
	}
}
