package adcptest

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A push config without operation_id is accepted, as the SDK's sellers accept it, and the
// notifications then carry none (the SDK never sends one): the buyer correlates by URL and
// task_id.
func TestWebhookWithoutOperationID(t *testing.T) {
	rcv := newReceiver(t, nil)
	s, cs := startSeller(t, SellerOptions{})
	args := withPush(createArgs("async_complete"), rcv.srv.URL, hmacAuth)
	delete(args["push_notification_config"].(map[string]any), "operation_id")
	r := callT(t, cs, "create_media_buy", args)
	if r.IsError || r.str("status") != "submitted" {
		t.Fatalf("%s", r.Raw)
	}
	id := r.str("task_id")
	for range 2 {
		if _, err := s.Advance(id); err != nil {
			t.Fatal(err)
		}
	}
	got := s.WaitDeliveries(2, 2*time.Second)
	if len(got) != 2 {
		t.Fatalf("deliveries = %+v", got)
	}
	for _, d := range got {
		var p map[string]any
		_ = json.Unmarshal(d.Body, &p)
		if _, ok := p["operation_id"]; ok || p["task_id"] != id {
			t.Errorf("payload %s", d.Body)
		}
	}
}

// With TerminalWebhooks the seller posts as the SDK's do: nothing for working or
// input-required, the terminal status once, and one completed notification (task id
// sync-…, the success body as result) after a synchronous success.
func TestTerminalWebhooks(t *testing.T) {
	t.Run("async", func(t *testing.T) {
		rcv := newReceiver(t, nil)
		s, cs := startSeller(t, SellerOptions{TerminalWebhooks: true})
		r := callT(t, cs, "create_media_buy", withPush(createArgs("async_complete"), rcv.srv.URL, hmacAuth))
		for range 2 {
			if _, err := s.Advance(r.str("task_id")); err != nil {
				t.Fatal(err)
			}
		}
		s.WaitDeliveries(1, 2*time.Second)
		time.Sleep(20 * time.Millisecond)
		if got := statuses(rcv.all()); strings.Join(got, ",") != "completed" {
			t.Errorf("statuses = %v, want completed only", got)
		}
	})
	t.Run("sync", func(t *testing.T) {
		rcv := newReceiver(t, nil)
		s, cs := startSeller(t, SellerOptions{TerminalWebhooks: true, Behavior: SellerSync})
		r := callT(t, cs, "create_media_buy", withPush(createArgs(""), rcv.srv.URL, hmacAuth))
		if r.str("status") != "completed" || r.str("media_buy_id") == "" {
			t.Fatalf("%s", r.Raw)
		}
		d := s.WaitDeliveries(1, 2*time.Second)
		if len(d) != 1 {
			t.Fatalf("deliveries = %+v", d)
		}
		var p map[string]any
		_ = json.Unmarshal(d[0].Body, &p)
		res, _ := p["result"].(map[string]any)
		if p["status"] != "completed" || !strings.HasPrefix(p["task_id"].(string), "sync-") || res["media_buy_id"] != r.str("media_buy_id") {
			t.Errorf("payload %s", d[0].Body)
		}
		if !verifyHMAC(rcv.all()[0].header, rcv.all()[0].body, hmacSecret) {
			t.Error("sync notification not signed as registered")
		}
		// The SDK does not answer for a sync-… task either.
		if p := callT(t, cs, "get_task_status", map[string]any{"task_id": p["task_id"]}); p.code() != "REFERENCE_NOT_FOUND" {
			t.Errorf("poll of the sync task: %s", p.Raw)
		}
	})
	t.Run("input-required stays quiet", func(t *testing.T) {
		rcv := newReceiver(t, nil)
		s, cs := startSeller(t, SellerOptions{TerminalWebhooks: true})
		r := callT(t, cs, "create_media_buy", withPush(createArgs("input_required"), rcv.srv.URL, hmacAuth))
		if _, err := s.Advance(r.str("task_id")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Millisecond)
		if len(rcv.all()) != 0 {
			t.Errorf("statuses = %v, want none before the terminal one", statuses(rcv.all()))
		}
	})
}

// Without the bearer, or with a wrong one, both agents answer the MCP POST itself with HTTP
// 401 and a WWW-Authenticate challenge (the handshake included), as the SDK's sellers do,
// instead of a tool result.
func TestAuthIsHTTP401(t *testing.T) {
	for name, start := range map[string]func(t *testing.T) string{
		"seller": func(t *testing.T) string {
			s := NewSeller(SellerOptions{})
			t.Cleanup(s.Close)
			return s.Start()
		},
		"governance": func(t *testing.T) string {
			g := NewGovernance(GovernanceOptions{})
			t.Cleanup(g.Close)
			return g.Start()
		},
	} {
		url := start(t)
		for _, tok := range []string{"", "wrong-token"} {
			c := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, nil)
			hc := &http.Client{Transport: headerRT{token: tok, base: http.DefaultTransport}}
			_, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, DisableStandaloneSSE: true, MaxRetries: -1}, nil)
			if err == nil {
				t.Errorf("%s, token %q: connected, want HTTP 401", name, tok)
			}
			req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_adcp_capabilities","arguments":{}}}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if tok != "" {
				req.Header.Set("Authorization", "Bearer "+tok)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer ") {
				t.Errorf("%s, token %q: HTTP %d, WWW-Authenticate %q", name, tok, resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
			}
		}
	}
}

// A POST whose Accept admits neither JSON nor an event stream gets the MCP SDK's answer: HTTP
// 406 with a JSON-RPC error as application/json, not a text/plain 400.
func TestWrongAcceptIsJSON406(t *testing.T) {
	s := NewSeller(SellerOptions{})
	url := s.Start()
	t.Cleanup(s.Close)
	for _, accept := range []string{"text/plain", "application/json"} {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_adcp_capabilities","arguments":{}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", accept)
		req.Header.Set("Authorization", "Bearer "+DefaultSellerToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Error struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusNotAcceptable || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") || err != nil || body.Error.Code != -32000 {
			t.Errorf("Accept %q: HTTP %d %q, body %+v (%v)", accept, resp.StatusCode, resp.Header.Get("Content-Type"), body, err)
		}
	}
}

// A canceled buy cannot be paused, resumed or changed: the seller answers INVALID_STATE, as
// media_buy_state_machine grades it (pause_canceled_buy), instead of applying the change.
func TestChangeOfACanceledBuyIsInvalidState(t *testing.T) {
	_, cs := startSeller(t, SellerOptions{})
	id := callT(t, cs, "create_media_buy", createArgs("")).str("media_buy_id")
	account := createArgs("")["account"]
	upd := func(extra map[string]any) result {
		a := map[string]any{"idempotency_key": key(), "account": account, "media_buy_id": id, "adcp_version": "3.1"}
		for k, v := range extra {
			a[k] = v
		}
		return callT(t, cs, "update_media_buy", a)
	}
	if r := upd(map[string]any{"canceled": true}); r.IsError {
		t.Fatalf("cancel: %s", r.Raw)
	}
	for _, change := range []map[string]any{{"paused": true}, {"paused": false}, {"end_time": "2099-12-31T23:59:59Z"}} {
		if r := upd(change); r.code() != "INVALID_STATE" {
			t.Errorf("%v on a canceled buy: %s", change, r.Raw)
		}
	}
}
