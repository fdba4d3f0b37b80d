package adcptest

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func TestSellerCapabilities(t *testing.T) {
	tests := []struct {
		name     string
		mode     IdempotencyMode
		validate bool
		check    func(t *testing.T, r result)
	}{
		{"declared", IdempotencyDeclared, true, func(t *testing.T, r result) {
			if got := r.get("adcp.idempotency.replay_ttl_seconds"); got != float64(86400) {
				t.Errorf("replay_ttl_seconds = %v, want 86400", got)
			}
		}},
		{"unsupported", IdempotencyUnsupported, true, func(t *testing.T, r result) {
			if got := r.get("adcp.idempotency.supported"); got != false {
				t.Errorf("supported = %v, want false", got)
			}
		}},
		{"absent", IdempotencyAbsent, false, func(t *testing.T, r result) {
			if r.get("adcp.idempotency") != nil {
				t.Errorf("idempotency declared: %v", r.get("adcp.idempotency"))
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, cs := startSeller(t, SellerOptions{Idempotency: tt.mode})
			r := callT(t, cs, "get_adcp_capabilities", map[string]any{})
			if r.IsError {
				t.Fatalf("error: %s", r.Raw)
			}
			vs, _ := r.get("adcp.supported_versions").([]any)
			if len(vs) != 2 || vs[0] != "3.0" || vs[1] != "3.1" {
				t.Errorf("supported_versions = %v", vs)
			}
			if r.str("adcp_version") != "3.1" || r.str("status") != "completed" {
				t.Errorf("envelope: %s", r.Raw)
			}
			tt.check(t, r)
			if tt.validate {
				mustValidate(t, "protocol/get-adcp-capabilities-response.json", r.Raw)
			}
		})
	}
}

func TestSellerCreateBehaviours(t *testing.T) {
	tests := []struct {
		name      string
		sim       string         // per-request tokens
		def       SellerBehavior // agent default
		first     string         // status of the create response
		steps     []string       // statuses after each Advance
		wantMB    bool           // completion carries media_buy_id
		validate  bool           // first response validates as create-media-buy-response
		errorCode string         // task error code when failed
	}{
		{name: "sync default", first: "completed", wantMB: true, validate: true},
		{name: "async complete by token", sim: "async_complete", first: "submitted", steps: []string{"working", "completed"}, wantMB: true, validate: true},
		{name: "async complete by default", def: SellerAsyncComplete, first: "submitted", steps: []string{"working", "completed"}, wantMB: true, validate: true},
		{name: "async fail", sim: "async_fail", first: "submitted", steps: []string{"working", "failed"}, validate: true, errorCode: "PRODUCT_UNAVAILABLE"},
		{name: "input required", sim: "input_required", first: "input-required", steps: []string{"working", "completed"}, wantMB: true},
		{name: "rejected", sim: "rejected", first: "rejected", validate: true},
		{name: "token beats default", sim: "sync", def: SellerAsyncFail, first: "completed", wantMB: true, validate: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, cs := startSeller(t, SellerOptions{Behavior: tt.def})
			r := callT(t, cs, "create_media_buy", createArgs(tt.sim))
			if r.IsError {
				t.Fatalf("isError: %s", r.Raw)
			}
			if got := r.str("status"); got != tt.first {
				t.Fatalf("status = %q, want %q: %s", got, tt.first, r.Raw)
			}
			if r.str("adcp_version") != "3.1" || r.str("context.buyer_ref") != "order-42" {
				t.Errorf("envelope/context echo missing: %s", r.Raw)
			}
			if tt.validate {
				mustValidate(t, "media-buy/create-media-buy-response.json", r.Raw)
			}
			if tt.first == "completed" {
				if r.str("media_buy_id") == "" || r.str("media_buy_status") == "" {
					t.Errorf("no media buy inline: %s", r.Raw)
				}
				return
			}
			taskID := r.str("task_id")
			if tt.first == "rejected" {
				if taskID != "" || len(r.get("errors").([]any)) == 0 {
					t.Errorf("rejected must carry errors and no task: %s", r.Raw)
				}
				return
			}
			if taskID == "" {
				t.Fatalf("no task_id: %s", r.Raw)
			}
			for _, want := range tt.steps {
				got, err := s.Advance(taskID)
				if err != nil || got != want {
					t.Fatalf("Advance = %q, %v; want %q", got, err, want)
				}
				p := poll(t, cs, "get_task_status", taskID)
				if p.str("status") != want {
					t.Fatalf("poll status = %q, want %q: %s", p.str("status"), want, p.Raw)
				}
				mustValidate(t, "protocol/get-task-status-response.json", p.Raw)
				if want == "completed" {
					if tt.wantMB && p.str("result.media_buy_id") == "" {
						t.Errorf("completed result has no media_buy_id: %s", p.Raw)
					}
					if len(s.MediaBuys()) != 1 {
						t.Errorf("media buys = %d, want 1", len(s.MediaBuys()))
					}
				}
				if want == "failed" && p.str("error.code") != tt.errorCode {
					t.Errorf("error.code = %q, want %q", p.str("error.code"), tt.errorCode)
				}
			}
			if _, err := s.Advance(taskID); err == nil {
				t.Error("Advance past the terminal state succeeded")
			}
		})
	}
}

func TestSellerPollsPerStepAndLegacyName(t *testing.T) {
	_, cs := startSeller(t, SellerOptions{PollsPerStep: 2})
	r := callT(t, cs, "create_media_buy", createArgs("async_complete"))
	id := r.str("task_id")
	var got []string
	for range 4 {
		got = append(got, poll(t, cs, "tasks/get", id).str("status"))
	}
	want := "submitted working working completed"
	if strings.Join(got, " ") != want {
		t.Errorf("statuses = %v, want %s", got, want)
	}
}

func TestSellerStepInterval(t *testing.T) {
	clk := newClock()
	s, cs := startSeller(t, SellerOptions{StepInterval: time.Minute, Now: clk.Now})
	id := callT(t, cs, "create_media_buy", createArgs("async_complete")).str("task_id")
	if st := poll(t, cs, "get_task_status", id).str("status"); st != "submitted" {
		t.Fatalf("status = %s before the interval", st)
	}
	clk.Advance(time.Minute)
	if n := s.AdvanceDue(); n != 1 {
		t.Errorf("AdvanceDue = %d, want 1", n)
	}
	clk.Advance(time.Minute)
	if st := poll(t, cs, "get_task_status", id).str("status"); st != "completed" {
		t.Errorf("status = %s after two intervals, want completed", st)
	}
}

// A held task moves only when the test says so: neither the step interval nor polls advance it.
func TestSellerHoldToken(t *testing.T) {
	clk := newClock()
	s, cs := startSeller(t, SellerOptions{StepInterval: time.Minute, PollsPerStep: 1, Now: clk.Now})
	id := callT(t, cs, "create_media_buy", createArgs("async_complete,hold")).str("task_id")
	for range 3 {
		clk.Advance(time.Minute)
		if n := s.AdvanceDue(); n != 0 {
			t.Fatalf("AdvanceDue moved %d held tasks", n)
		}
		if st := poll(t, cs, "get_task_status", id).str("status"); st != "submitted" {
			t.Fatalf("held task is %s, want submitted", st)
		}
	}
	if st, err := s.Advance(id); err != nil || st != "working" {
		t.Fatalf("Advance = %s, %v", st, err)
	}
	if err := s.Finish(id, "completed"); err != nil {
		t.Fatal(err)
	}
	if st := poll(t, cs, "get_task_status", id).str("status"); st != "completed" {
		t.Errorf("status = %s after Finish, want completed", st)
	}
}

func TestSellerPollToolsOption(t *testing.T) {
	tests := []struct {
		opt        PollTools
		has, hasnt string
	}{
		{PollAliasOnly, "get_task_status", "tasks/get"},
		{PollLegacyOnly, "tasks/get", "get_task_status"},
	}
	for _, tt := range tests {
		t.Run(string(tt.opt), func(t *testing.T) {
			_, cs := startSeller(t, SellerOptions{PollTools: tt.opt})
			id := callT(t, cs, "create_media_buy", createArgs("async_complete")).str("task_id")
			if r := poll(t, cs, tt.has, id); r.IsError {
				t.Errorf("%s failed: %s", tt.has, r.Raw)
			}
			r, err := callErr(cs, tt.hasnt, map[string]any{"task_id": id})
			if err == nil && !r.IsError {
				t.Errorf("%s answered: %s", tt.hasnt, r.Raw)
			}
		})
	}
}

func TestSellerIdempotency(t *testing.T) {
	s, cs := startSeller(t, SellerOptions{})
	args := createArgs("async_complete")
	first := callT(t, cs, "create_media_buy", args)
	// Same key, same canonical body; a different context is excluded from the hash.
	args["context"] = map[string]any{"buyer_ref": "retry", "sim": "async_complete"}
	again := callT(t, cs, "create_media_buy", args)
	if again.IsError || again.get("replayed") != true || again.str("task_id") != first.str("task_id") {
		t.Errorf("replay: %s (first %s)", again.Raw, first.Raw)
	}
	if len(s.Tasks()) != 1 {
		t.Errorf("tasks = %d, want 1 (replay must not re-execute)", len(s.Tasks()))
	}
	args["end_time"] = "2099-10-30T23:59:59Z"
	conflict := callT(t, cs, "create_media_buy", args)
	if !conflict.IsError || conflict.code() != "IDEMPOTENCY_CONFLICT" || conflict.str("adcp_error.recovery") != "correctable" {
		t.Errorf("conflict: %s", conflict.Raw)
	}
	calls := s.CallsTo("create_media_buy")
	if len(calls) != 3 || !calls[1].Replayed || calls[2].ErrorCode != "IDEMPOTENCY_CONFLICT" {
		t.Errorf("recorded calls: %+v", calls)
	}
}

func TestSellerIdempotencyExpired(t *testing.T) {
	clk := newClock()
	_, cs := startSeller(t, SellerOptions{Now: clk.Now, ReplayTTL: time.Hour})
	args := createArgs("")
	callT(t, cs, "create_media_buy", args)
	clk.Advance(2 * time.Hour)
	if r := callT(t, cs, "create_media_buy", args); r.code() != "IDEMPOTENCY_EXPIRED" {
		t.Errorf("after the TTL: %s", r.Raw)
	}
}

func TestSellerNoReplayWhenUnsupported(t *testing.T) {
	s, cs := startSeller(t, SellerOptions{Idempotency: IdempotencyUnsupported})
	args := createArgs("")
	a := callT(t, cs, "create_media_buy", args)
	b := callT(t, cs, "create_media_buy", args)
	if b.get("replayed") != nil || a.str("media_buy_id") == b.str("media_buy_id") || len(s.MediaBuys()) != 2 {
		t.Errorf("unsupported seller replayed: %s / %s", a.Raw, b.Raw)
	}
}

func TestSchemaRejection(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(map[string]any)
		field  string
	}{
		{"missing idempotency_key", func(a map[string]any) { delete(a, "idempotency_key") }, "idempotency_key"},
		{"budget not a number", func(a map[string]any) {
			a["packages"].([]any)[0].(map[string]any)["budget"] = map[string]any{"amount": 1}
		}, "packages[0].budget"},
		{"bad end_time format", func(a map[string]any) { a["end_time"] = "next tuesday" }, "end_time"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, cs := startSeller(t, SellerOptions{})
			args := createArgs("")
			tt.mutate(args)
			r := callT(t, cs, "create_media_buy", args)
			if !r.IsError || r.code() != "INVALID_REQUEST" {
				t.Fatalf("not rejected: %s", r.Raw)
			}
			if got := r.str("adcp_error.field"); got != tt.field {
				t.Errorf("field = %q, want %q (%s)", got, tt.field, r.Raw)
			}
			c := s.CallsTo("create_media_buy")
			if len(c) != 1 || c[0].ValidationError == "" || !c[0].AuthOK {
				t.Errorf("recorded: %+v", c)
			}
			if len(s.MediaBuys()) != 0 {
				t.Error("an invalid request created a media buy")
			}
		})
	}
}

func TestListTasksPagination(t *testing.T) {
	s, cs := startSeller(t, SellerOptions{})
	var ids []string
	for i := range 5 {
		sim := "async_complete"
		if i == 4 {
			sim = "input_required"
		}
		ids = append(ids, callT(t, cs, "create_media_buy", createArgs(sim)).str("task_id"))
	}
	if _, err := s.Advance(ids[0]); err != nil { // → working
		t.Fatal(err)
	}
	for _, tool := range []string{"list_tasks", "tasks/list"} {
		t.Run(tool, func(t *testing.T) {
			seen := map[string]bool{}
			cursor := ""
			pages := 0
			for {
				args := map[string]any{
					"filters":    map[string]any{"statuses": []any{"submitted", "input-required"}},
					"sort":       map[string]any{"field": "created_at", "direction": "asc"},
					"pagination": map[string]any{"max_results": 2},
				}
				if cursor != "" {
					args["pagination"].(map[string]any)["cursor"] = cursor
				}
				r := callT(t, cs, tool, args)
				if r.IsError {
					t.Fatalf("%s", r.Raw)
				}
				mustValidate(t, "protocol/list-tasks-response.json", r.Raw)
				pages++
				for _, it := range r.get("tasks").([]any) {
					seen[it.(map[string]any)["task_id"].(string)] = true
				}
				if r.get("query_summary.total_matching") != float64(4) {
					t.Errorf("total_matching = %v", r.get("query_summary.total_matching"))
				}
				if r.get("pagination.has_more") != true {
					break
				}
				cursor = r.str("pagination.cursor")
			}
			if pages != 2 || len(seen) != 4 || seen[ids[0]] {
				t.Errorf("pages=%d seen=%v", pages, seen)
			}
		})
	}
	bad := callT(t, cs, "list_tasks", map[string]any{"pagination": map[string]any{"cursor": "garbage"}})
	if bad.code() != "INVALID_REQUEST" {
		t.Errorf("bad cursor: %s", bad.Raw)
	}
}

func TestRateLimited(t *testing.T) {
	s, cs := startSeller(t, SellerOptions{RetryAfter: 3})
	args := createArgs("rate_limited*2")
	for i := range 2 {
		r := callT(t, cs, "create_media_buy", args)
		if r.code() != "RATE_LIMITED" || r.get("adcp_error.retry_after") != float64(3) || r.str("adcp_error.recovery") != "transient" {
			t.Fatalf("attempt %d: %s", i, r.Raw)
		}
	}
	if r := callT(t, cs, "create_media_buy", args); r.IsError || r.str("media_buy_id") == "" {
		t.Errorf("third attempt: %s", r.Raw)
	}
	s.RateLimitNext(1)
	if r := callT(t, cs, "get_media_buys", map[string]any{}); r.code() != "RATE_LIMITED" {
		t.Errorf("RateLimitNext: %s", r.Raw)
	}
	if r := callT(t, cs, "get_media_buys", map[string]any{}); r.IsError || len(r.get("media_buys").([]any)) != 1 {
		t.Errorf("after the limit: %s", r.Raw)
	}
}

func TestInFlight(t *testing.T) {
	s, cs := startSeller(t, SellerOptions{})
	args := createArgs("in_flight")
	r := callT(t, cs, "create_media_buy", args)
	if r.code() != "IDEMPOTENCY_IN_FLIGHT" || r.str("adcp_error.recovery") != "transient" || r.get("adcp_error.retry_after") == nil {
		t.Fatalf("%s", r.Raw)
	}
	if r := callT(t, cs, "create_media_buy", args); r.IsError || r.str("media_buy_id") == "" {
		t.Errorf("retry with the same key: %s", r.Raw)
	}
	if c := s.CallsTo("create_media_buy"); len(c) != 2 || c[0].Fault != "in_flight" {
		t.Errorf("recorded: %+v", c)
	}
}

func TestHTTPFaults(t *testing.T) {
	t.Run("http_500 once per key", func(t *testing.T) {
		s, cs := startSeller(t, SellerOptions{})
		args := createArgs("http_500")
		if _, err := callErr(cs, "create_media_buy", args); err == nil {
			t.Fatal("first attempt succeeded")
		}
		r := callT(t, cs, "create_media_buy", args)
		if r.IsError || r.str("media_buy_id") == "" {
			t.Errorf("retry: %s", r.Raw)
		}
		c := s.CallsTo("create_media_buy")
		if len(c) != 2 || c[0].Fault != "http_500" || c[1].Fault != "" {
			t.Errorf("recorded: %+v", c)
		}
	})
	t.Run("FailNextHTTP 503", func(t *testing.T) {
		s, cs := startSeller(t, SellerOptions{})
		s.FailNextHTTP(1, http.StatusServiceUnavailable)
		if _, err := callErr(cs, "get_media_buys", map[string]any{}); err == nil {
			t.Fatal("503 not surfaced")
		}
		callT(t, cs, "get_media_buys", map[string]any{})
	})
	t.Run("slow_commit loses the response, the retry replays", func(t *testing.T) {
		s := NewSeller(SellerOptions{SlowDelay: 2 * time.Second})
		url := s.Start()
		t.Cleanup(s.Close)
		cs := connect(t, url, DefaultSellerToken, 300*time.Millisecond)
		args := createArgs("slow_commit")
		if _, err := callErr(cs, "create_media_buy", args); err == nil {
			t.Fatal("slow_commit call did not time out")
		}
		if n := len(s.MediaBuys()); n != 1 {
			t.Fatalf("media buys after the lost response = %d, want 1", n)
		}
		r := callT(t, cs, "create_media_buy", args)
		if r.get("replayed") != true || r.str("media_buy_id") != s.MediaBuys()[0]["media_buy_id"] || len(s.MediaBuys()) != 1 {
			t.Errorf("retry: %s", r.Raw)
		}
	})
	t.Run("slow exceeds client timeout", func(t *testing.T) {
		s := NewSeller(SellerOptions{SlowDelay: 2 * time.Second})
		url := s.Start()
		t.Cleanup(s.Close)
		cs := connect(t, url, DefaultSellerToken, 300*time.Millisecond)
		start := time.Now()
		if _, err := callErr(cs, "create_media_buy", createArgs("slow")); err == nil {
			t.Fatal("slow call did not time out")
		}
		if time.Since(start) > 1500*time.Millisecond {
			t.Errorf("timeout took %v", time.Since(start))
		}
	})
}

func TestUpdateMediaBuy(t *testing.T) {
	s, cs := startSeller(t, SellerOptions{})
	c := callT(t, cs, "create_media_buy", createArgs(""))
	id := c.str("media_buy_id")
	account := createArgs("")["account"]
	upd := func(extra map[string]any) result {
		a := map[string]any{"idempotency_key": key(), "account": account, "media_buy_id": id, "adcp_version": "3.1"}
		for k, v := range extra {
			a[k] = v
		}
		return callT(t, cs, "update_media_buy", a)
	}
	if r := upd(map[string]any{"revision": 7, "paused": true}); r.code() != "CONFLICT" {
		t.Errorf("stale revision: %s", r.Raw)
	}
	r := upd(map[string]any{"revision": 1, "canceled": true, "cancellation_reason": "governance findings"})
	if r.IsError || r.str("media_buy_status") != "canceled" || r.get("revision") != float64(2) {
		t.Fatalf("cancel: %s", r.Raw)
	}
	mustValidate(t, "media-buy/update-media-buy-response.json", r.Raw)
	if r := upd(map[string]any{"canceled": true}); r.code() != "NOT_CANCELLABLE" {
		t.Errorf("second cancel: %s", r.Raw)
	}
	g := callT(t, cs, "get_media_buys", map[string]any{"media_buy_ids": []any{id}})
	mustValidate(t, "media-buy/get-media-buys-response.json", g.Raw)
	if st := g.get("media_buys").([]any)[0].(map[string]any)["status"]; st != "canceled" {
		t.Errorf("get_media_buys status = %v", st)
	}
	if r := callT(t, cs, "update_media_buy", map[string]any{"idempotency_key": key(), "account": account, "media_buy_id": "mb_nope"}); r.code() != "MEDIA_BUY_NOT_FOUND" {
		t.Errorf("unknown buy: %s", r.Raw)
	}
	if len(s.CallsTo("update_media_buy")) != 4 {
		t.Errorf("calls = %d", len(s.CallsTo("update_media_buy")))
	}
}

func TestSellerVersion30(t *testing.T) {
	_, cs := startSeller(t, SellerOptions{Version: Version30})
	r := callT(t, cs, "create_media_buy", createArgs(""))
	if r.str("status") != "pending_creatives" || r.get("adcp_version") != nil || r.get("media_buy_status") != nil {
		t.Errorf("3.0 create: %s", r.Raw)
	}
	// A 3.1 seller downshifts when the buyer pins 3.0, and refuses 4.x.
	_, cs31 := startSeller(t, SellerOptions{})
	a := createArgs("")
	a["adcp_version"] = "3.0"
	if r := callT(t, cs31, "create_media_buy", a); r.str("status") != "pending_creatives" {
		t.Errorf("downshift: %s", r.Raw)
	}
	a = createArgs("")
	a["adcp_version"] = "4.0"
	if r := callT(t, cs31, "create_media_buy", a); r.code() != "VERSION_UNSUPPORTED" {
		t.Errorf("4.0: %s", r.Raw)
	}
}

func TestRequireGovernanceContext(t *testing.T) {
	_, cs := startSeller(t, SellerOptions{RequireGovernanceContext: true})
	a := createArgs("")
	if r := callT(t, cs, "create_media_buy", a); r.code() != "PERMISSION_DENIED" {
		t.Errorf("without token: %s", r.Raw)
	}
	a = createArgs("")
	a["governance_context"] = "eyJhbGciOiJub25lIn0.e30.c2ln"
	if r := callT(t, cs, "create_media_buy", a); r.IsError {
		t.Errorf("with token: %s", r.Raw)
	}
}

func TestPONumberScript(t *testing.T) {
	s, cs := startSeller(t, SellerOptions{})
	a := createArgs("")
	a["po_number"] = "sim:async_complete,wh_duplicate"
	if r := callT(t, cs, "create_media_buy", a); r.str("status") != "submitted" {
		t.Errorf("po_number script ignored: %s", r.Raw)
	}
	s.Script("PO-7", "input_required")
	a = createArgs("")
	a["po_number"] = "PO-7"
	if r := callT(t, cs, "create_media_buy", a); r.str("status") != "input-required" {
		t.Errorf("registered script ignored: %s", r.Raw)
	}
	s.Script("PO-7", "")
	a["idempotency_key"] = key()
	if r := callT(t, cs, "create_media_buy", a); r.str("status") != "completed" {
		t.Errorf("removed script still applies: %s", r.Raw)
	}
}

func TestAuthHTTP(t *testing.T) {
	s := NewSeller(SellerOptions{})
	url := s.Start()
	t.Cleanup(s.Close)
	for _, tok := range []string{"", "wrong-token"} {
		c := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, nil)
		hc := &http.Client{Transport: headerRT{token: tok, base: http.DefaultTransport}}
		_, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, DisableStandaloneSSE: true, MaxRetries: -1}, nil)
		if err == nil || !strings.Contains(err.Error(), "401") && !strings.Contains(strings.ToLower(err.Error()), "unauthorized") {
			t.Errorf("token %q: connect error = %v, want a 401", tok, err)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"get_media_buys","arguments":{}}}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var body struct {
		ID    int `json:"id"`
		Error struct {
			Code int `json:"code"`
			Data struct {
				AdcpError AdcpError `json:"adcp_error"`
			} `json:"data"`
		} `json:"error"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&body)
	if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") == "" || body.ID != 7 || body.Error.Code != -32028 || body.Error.Data.AdcpError.Code != "AUTH_MISSING" {
		t.Errorf("pre-dispatch 401: %d %+v", resp.StatusCode, body)
	}
	if c := s.CallsTo("get_media_buys"); len(c) != 1 || c[0].AuthOK || c[0].Fault != "http_401" {
		t.Errorf("recorded: %+v", c)
	}
	// The right token passes.
	cs := connect(t, url, DefaultSellerToken, 0)
	if r := callT(t, cs, "get_media_buys", map[string]any{}); r.IsError {
		t.Errorf("%s", r.Raw)
	}
}

func TestSSEResponsesAndStandaloneStream(t *testing.T) {
	s := NewSeller(SellerOptions{SSE: true})
	url := s.Start()
	t.Cleanup(s.Close)
	c := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, nil)
	hc := &http.Client{Transport: headerRT{token: DefaultSellerToken, base: http.DefaultTransport}}
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cs.Close() }()
	if r := callT(t, cs, "create_media_buy", createArgs("")); r.IsError || r.str("media_buy_id") == "" {
		t.Errorf("%s", r.Raw)
	}
}

func TestPrincipalsAndUnknownTask(t *testing.T) {
	s := NewSeller(SellerOptions{Tokens: []string{"other-buyer-token"}})
	url := s.Start()
	t.Cleanup(s.Close)
	a := connect(t, url, DefaultSellerToken, 0)
	b := connect(t, url, "other-buyer-token", 0)
	id := callT(t, a, "create_media_buy", createArgs("async_complete")).str("task_id")
	if r := poll(t, b, "get_task_status", id); r.code() != "REFERENCE_NOT_FOUND" {
		t.Errorf("other principal polled the task: %s", r.Raw)
	}
	if r := poll(t, a, "get_task_status", "task_nope"); r.code() != "REFERENCE_NOT_FOUND" {
		t.Errorf("unknown task: %s", r.Raw)
	}
	if r := callT(t, b, "list_tasks", map[string]any{}); r.get("query_summary.total_matching") != float64(0) {
		t.Errorf("list leaks tasks across principals: %s", r.Raw)
	}
	if r := poll(t, a, "get_task_status", id); r.IsError {
		t.Errorf("owner poll: %s", r.Raw)
	}
}

func TestGovernanceDeniedAtSeller(t *testing.T) {
	_, cs := startSeller(t, SellerOptions{})
	r := callT(t, cs, "create_media_buy", createArgs("governance_denied"))
	if !r.IsError || r.code() != "GOVERNANCE_DENIED" {
		t.Fatalf("%s", r.Raw)
	}
	mustValidate(t, "media-buy/create-media-buy-response.json", r.Raw)
}

func TestConcurrentSameKey(t *testing.T) {
	s, cs := startSeller(t, SellerOptions{})
	args := createArgs("")
	var wg sync.WaitGroup
	codes := make([]string, 8)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := callErr(cs, "create_media_buy", args)
			if err != nil {
				codes[i] = err.Error()
				return
			}
			switch {
			case r.get("replayed") == true:
				codes[i] = "replayed"
			case r.IsError:
				codes[i] = r.code()
			default:
				codes[i] = "created"
			}
		}()
	}
	wg.Wait()
	created := 0
	for _, c := range codes {
		switch c {
		case "created":
			created++
		case "replayed", "IDEMPOTENCY_IN_FLIGHT":
		default:
			t.Errorf("unexpected outcome %q", c)
		}
	}
	if created != 1 || len(s.MediaBuys()) != 1 {
		t.Errorf("created = %d, media buys = %d (%v)", created, len(s.MediaBuys()), codes)
	}
}

// The broadcast example's seller: it places the buy (packages: [] when asked), takes changes
// to it, and lists none of its buys.
func TestSellerListsNothing(t *testing.T) {
	s, cs := startSeller(t, SellerOptions{ListsNothing: true})
	c := callT(t, cs, "create_media_buy", createArgs("no_packages"))
	mustValidate(t, "media-buy/create-media-buy-response.json", c.Raw)
	id := c.str("media_buy_id")
	if pkgs, ok := c.get("packages").([]any); id == "" || !ok || len(pkgs) != 0 {
		t.Fatalf("create with no_packages: %s", c.Raw)
	}
	g := callT(t, cs, "get_media_buys", map[string]any{"media_buy_ids": []any{id}})
	mustValidate(t, "media-buy/get-media-buys-response.json", g.Raw)
	if mbs, _ := g.get("media_buys").([]any); g.IsError || len(mbs) != 0 {
		t.Fatalf("get_media_buys listed %s", g.Raw)
	}
	r := callT(t, cs, "update_media_buy", map[string]any{"idempotency_key": key(), "account": createArgs("")["account"], "media_buy_id": id, "canceled": true})
	if r.IsError || r.str("media_buy_status") != "canceled" {
		t.Fatalf("cancel of an unlisted buy: %s", r.Raw)
	}
	if mbs := s.MediaBuys(); len(mbs) != 1 || mbs[0]["status"] != "canceled" {
		t.Errorf("the seller holds %v", mbs)
	}
}
