package sdkseller

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/buyflow/buyflow/e2e/e2etest"
	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/apiclient"
	"github.com/buyflow/buyflow/internal/workflow"
)

// begin skips when the suite cannot run and returns a client for a fresh tenant.
func begin(t *testing.T) *apiclient.Client {
	t.Helper()
	if skip != "" {
		t.Skip(skip)
	}
	return suite.Client(t)
}

// body is a submit for the SDK seller: scenario selects what its create does (seller.mjs), sim
// scripts the simulated governance agent. 500 USD stays under the approval threshold.
func body(t testing.TB, scenario, sim string) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"seller_id":  sellerID,
		"governance": map[string]any{"agent_id": governanceID, "plan_id": "plan-sdk-interop"},
		"currency":   "USD",
		"media_buy": map[string]any{
			"account":    map[string]any{"account_id": "acc_interop"},
			"brand":      map[string]any{"domain": "acme.example"},
			"po_number":  "PO-SDK-" + strings.ToUpper(randomID(t)),
			"start_time": "2030-03-01T00:00:00Z",
			"end_time":   "2030-03-31T23:59:59Z",
			"packages":   []any{map[string]any{"product_id": "prod_display", "pricing_option_id": "cpm_5", "budget": 500}},
			"context":    map[string]any{"sdk": scenario, "sim": sim},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// createsFor returns the creates the seller ran for the operation.
func createsFor(r recorded, id string) int {
	n := 0
	for _, c := range r.Creates {
		if c.OperationID == id {
			n++
		}
	}
	return n
}

// isWebhookURLOf reports whether u is buyflow's webhook URL for the operation id (its route in
// the query aside).
func isWebhookURLOf(u, id string) bool {
	parsed, err := url.Parse(u)
	return err == nil && strings.HasSuffix(parsed.Path, "/v1/webhooks/adcp/"+id)
}

// webhooksFor returns the seller's webhook attempts for the operation.
func webhooksFor(r recorded, id string) []sentWebhook {
	var out []sentWebhook
	for _, w := range r.Webhooks {
		if isWebhookURLOf(w.URL, id) {
			out = append(out, w)
		}
	}
	return out
}

// sellerWebhooks waits until the seller recorded n webhook attempts for the operation.
func sellerWebhooks(t testing.TB, id string, n int) []sentWebhook {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ws := webhooksFor(suite.seller.recorded(t), id)
		if len(ws) >= n || time.Now().After(deadline) {
			if len(ws) < n {
				t.Fatalf("the seller sent %d webhooks for %s, want %d", len(ws), id, n)
			}
			return ws
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A synchronous create completes at once; the completion webhook the SDK sends afterwards
// (task sync-…) is acknowledged with 2xx and changes nothing.
func TestSyncCreate(t *testing.T) {
	c := begin(t)
	id := place(t, c, "key-"+randomID(t), body(t, "sync", "approved"))
	op := finished(t, c, id, "completed")
	if status, _ := executionEnd(t, id); status != "SUCCEEDED" {
		t.Errorf("execution %s", status)
	}
	ws := sellerWebhooks(t, id, 1)
	if w := ws[0]; !strings.HasPrefix(w.TaskID, "sync-") || w.Status != http.StatusOK || !strings.Contains(w.Answer, "acknowledged") {
		t.Fatalf("the seller's sync-completion webhook: task %s answered %d %s", w.TaskID, w.Status, w.Answer)
	}
	rec := suite.seller.recorded(t)
	if n := createsFor(rec, id); n != 1 {
		t.Errorf("the seller ran %d creates", n)
	}
	i := slices.IndexFunc(rec.Creates, func(cr sellerCreate) bool { return cr.OperationID == id })
	if i < 0 || rec.Creates[i].MediaBuyID != op.MediaBuyID || !isWebhookURLOf(rec.Creates[i].PushURL, id) {
		t.Fatalf("buyflow recorded media buy %q; the seller created %+v", op.MediaBuyID, rec.Creates)
	}
	// The URL carries the buy's route, and the SDK's signed webhook to it (its query covered
	// by the signature's @target-uri) was taken.
	if u, err := url.Parse(rec.Creates[i].PushURL); err != nil || u.Query().Get("route") == "" {
		t.Errorf("the push URL %q carries no route", rec.Creates[i].PushURL)
	}
	evs := timeline(t, c, id)
	ack := slices.IndexFunc(evs, func(e api.Event) bool {
		return e.Type == "webhook" && strings.HasPrefix(e.Reason, "acknowledged")
	})
	if ack < 0 {
		logTimeline(t, c, id)
		t.Fatal("no acknowledged webhook in the timeline")
	}
	if after, _ := c.Get(context.Background(), id); after.Status != "completed" || after.MediaBuyID != op.MediaBuyID {
		t.Errorf("after the webhook: %+v", after)
	}
}

// holdSweep holds the stack's scheduled sweep until the test ends: this seller has no
// list_tasks, so a sweep run reads each pending task, and one that comes in the moment between
// the seller finishing a task and its webhook arriving finishes the buy first (on a busy
// machine, about one run in five of TestLatencyWebhookVersusPolling). A test that asserts the
// webhook finished a buy holds it. The buy's own safety-net poll comes 3 s after its park, ten
// times the seller's task.
func holdSweep(t *testing.T) {
	t.Helper()
	t.Cleanup(suite.HoldSweep())
}

// An async create is finished by the seller's own signed webhook, not by a poll.
func TestAsyncCreateFinishedByWebhook(t *testing.T) {
	c := begin(t)
	holdSweep(t)
	id := place(t, c, "key-"+randomID(t), body(t, "async", "approved"))
	op := finished(t, c, id, "completed")
	evs := timeline(t, c, id)
	if e := reached(t, evs, "completed"); e.Type != "webhook" || e.Actor != "seller:"+sellerID {
		logTimeline(t, c, id)
		t.Fatalf("completed by %s (%s), want the seller's webhook", e.Type, e.Actor)
	}
	w := sellerWebhooks(t, id, 1)[0]
	var payload map[string]any
	if err := json.Unmarshal([]byte(w.Body), &payload); err != nil {
		t.Fatal(err)
	}
	// The 3.0 shape: no operation_id; the URL path and task_id correlate it.
	if w.Status != http.StatusOK || payload["status"] != "completed" || payload["task_id"] != op.SellerTaskID || payload["operation_id"] != nil {
		t.Fatalf("the seller's webhook %s answered %d %s", w.Body, w.Status, w.Answer)
	}
	if !strings.Contains(w.Headers["signature-input"], `tag="adcp/webhook-signing/v1"`) {
		t.Errorf("the webhook is not RFC 9421-signed: %v", w.Headers)
	}
	if status, _ := executionEnd(t, id); status != "SUCCEEDED" {
		t.Errorf("execution %s", status)
	}
	if n := createsFor(suite.seller.recorded(t), id); n != 1 {
		t.Errorf("the seller ran %d creates", n)
	}
}

// A task the seller fails: its code reaches the reason, the timeline and the failure report.
func TestAsyncFailureKeepsTheSellersCode(t *testing.T) {
	c := begin(t)
	holdSweep(t)
	id := place(t, c, "key-"+randomID(t), body(t, "async_fail", "approved"))
	op := finished(t, c, id, "failed")
	if !strings.Contains(op.Reason, "PRODUCT_UNAVAILABLE") {
		t.Errorf("reason %q lacks the seller's code", op.Reason)
	}
	evs := timeline(t, c, id)
	if e := reached(t, evs, "failed"); e.Type != "webhook" || detailOf(e)["error_code"] != "PRODUCT_UNAVAILABLE" {
		logTimeline(t, c, id)
		t.Errorf("failed by %s with detail %s", e.Type, e.Detail)
	}
	if w := sellerWebhooks(t, id, 1)[0]; w.Status != http.StatusOK {
		t.Errorf("the seller's failed webhook answered %d %s", w.Status, w.Answer)
	}
	if code := reportedCode(t, id); code != "PRODUCT_UNAVAILABLE" {
		t.Errorf("report_plan_outcome error.code %q", code)
	}
}

// reportedCode returns error.code of the failed outcome reported for the operation.
func reportedCode(t testing.TB, id string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, call := range suite.Governance.CallsTo("report_plan_outcome") {
			var args struct {
				Outcome string `json:"outcome"`
				Error   struct {
					Code string `json:"code"`
				} `json:"error"`
				Context struct {
					OperationID string `json:"operation_id"`
				} `json:"context"`
			}
			if json.Unmarshal(call.Arguments, &args) == nil && args.Context.OperationID == id && args.Outcome == "failed" {
				return args.Error.Code
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no failed outcome reported for %s", id)
	return ""
}

// A thrown AdcpError and the spec's Error arm (errors[]) both keep their codes.
func TestSellerErrorsKeepTheirCodes(t *testing.T) {
	for _, tc := range []struct{ scenario, code string }{{"throw", "BUDGET_TOO_LOW"}, {"error_arm", "POLICY_VIOLATION"}} {
		t.Run(tc.scenario, func(t *testing.T) {
			c := begin(t)
			id := place(t, c, "key-"+randomID(t), body(t, tc.scenario, "approved"))
			op := finished(t, c, id, "failed")
			if !strings.Contains(op.Reason, tc.code) {
				t.Errorf("reason %q lacks %s", op.Reason, tc.code)
			}
			if evs := timeline(t, c, id); !withCode(evs, "seller_call", tc.code) {
				logTimeline(t, c, id)
				t.Errorf("no seller_call event with error_code %s", tc.code)
			}
			if code := reportedCode(t, id); code != tc.code {
				t.Errorf("report_plan_outcome error.code %q, want %s", code, tc.code)
			}
			// A correctable or terminal refusal is not resent.
			if n := createsFor(suite.seller.recorded(t), id); n != 1 {
				t.Errorf("the seller ran %d creates", n)
			}
			if tc.scenario == "error_arm" {
				// The SDK follows an Error arm with a completed webhook holding errors[]: acknowledged.
				if w := sellerWebhooks(t, id, 1)[0]; w.Status != http.StatusOK {
					t.Errorf("its webhook answered %d %s", w.Status, w.Answer)
				}
			}
		})
	}
}

// The same Idempotency-Key resubmitted is the same operation, and one create at the seller.
func TestResubmitSameKeyCreatesOnce(t *testing.T) {
	c := begin(t)
	key, b := "key-"+randomID(t), body(t, "async", "approved")
	id := place(t, c, key, b)
	finished(t, c, id, "completed")
	// The buy's one run is over: a second create could only come from a run the resubmit
	// starts, and submit starts a run before it answers.
	if status, _ := executionEnd(t, id); status != "SUCCEEDED" {
		t.Fatalf("the buy's execution ended %s", status)
	}
	if again := place(t, c, key, b); again != id {
		t.Fatalf("resubmit named %s, want %s", again, id)
	}
	for gen := range 2 {
		ex, err := suite.Execution(context.Background(), workflow.ExecutionName(id, gen))
		switch {
		case gen == 0 && (err != nil || ex.Status != "SUCCEEDED"):
			t.Fatalf("after the resubmit the buy's run is %+v (%v): it was started again", ex, err)
		case gen > 0 && (err == nil || !strings.Contains(err.Error(), "ExecutionDoesNotExist")):
			t.Fatalf("run %d of the buy: %+v, %v; want none (a resubmit starts no run)", gen, ex, err)
		}
	}
	if n := createsFor(suite.seller.recorded(t), id); n != 1 {
		t.Errorf("the seller ran %d creates for one operation", n)
	}
}

// Governance findings after a completed buy cancel it at the seller: the SDK answers the
// media-buy status canceled, which is the buy's, not the task's.
func TestCompensationCancel(t *testing.T) {
	c := begin(t)
	id := place(t, c, "key-"+randomID(t), body(t, "sync", "approved,outcome_findings"))
	op := finished(t, c, id, "canceled")
	status, errName := executionEnd(t, id)
	if status != "FAILED" || errName != "CanceledAfterGovernanceFindings" {
		logTimeline(t, c, id)
		t.Fatalf("execution %s %s, want the compensation's end CanceledAfterGovernanceFindings", status, errName)
	}
	rec := suite.seller.recorded(t)
	if !slices.ContainsFunc(rec.Updates, func(u sellerUpdate) bool { return u.MediaBuyID == op.MediaBuyID && u.Canceled }) {
		t.Errorf("the seller saw no cancel of %s: %+v", op.MediaBuyID, rec.Updates)
	}
	evs := timeline(t, c, id)
	if e := reached(t, evs, "canceled"); e.Type != "cancel" || e.Reason == "" {
		t.Errorf("canceled by %+v", e)
	}
}

// A webhook whose body was changed after signing is refused 401 and nothing is stored.
func TestTamperedWebhookIsRefused(t *testing.T) {
	c := begin(t)
	id := place(t, c, "key-"+randomID(t), body(t, "async", "approved"))
	finished(t, c, id, "completed")
	// The outcome report and the lock release follow the final status; the snapshot waits for
	// the execution's end so that only the tampered webhook could change what follows.
	if status, _ := executionEnd(t, id); status != "SUCCEEDED" {
		t.Fatalf("execution %s", status)
	}
	w := sellerWebhooks(t, id, 1)[0]
	before, evsBefore := get(t, c, id), ownEvents(t, c, id)
	tampered := strings.Replace(w.Body, `"completed"`, `"failed"`, 1)
	if tampered == w.Body {
		t.Fatalf("nothing to tamper with in %s", w.Body)
	}
	req, err := http.NewRequest(http.MethodPost, w.URL, bytes.NewReader([]byte(tampered)))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range w.Headers {
		if k != "content-length" {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close() // only the status matters
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), "webhook_signature") {
		t.Fatalf("tampered webhook answered %d (%s)", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	after := get(t, c, id)
	if after.Version != before.Version || after.Status != before.Status || ownEvents(t, c, id) != evsBefore {
		t.Fatalf("the refused webhook changed the operation: %+v → %+v", before, after)
	}
}

// ownEvents counts the buy's timeline but the delivery reads, which the sweep appends on its
// own cadence whatever a webhook does.
func ownEvents(t testing.TB, c *apiclient.Client, id string) int {
	t.Helper()
	n := 0
	for _, e := range timeline(t, c, id) {
		if e.Type != "delivery" {
			n++
		}
	}
	return n
}

// TestLatencyWebhookVersusPolling measures, over 20 buys each, how long after the seller
// finished a task buyflow's ledger held the terminal status: with the seller's webhooks, and
// with them lost before they left (the buy's own safety-net poll or the reconciliation sweep,
// whichever reads the task first: this seller has no list_tasks, so the sweep reads each
// pending task). It asserts which path finished each buy; the figures are logged (timing
// budgets are not asserted).
func TestLatencyWebhookVersusPolling(t *testing.T) {
	const buys = 20
	c := begin(t)
	type sample struct{ afterFinish, afterWebhook time.Duration }
	measure := func(scenario string, wantBy ...string) []sample {
		ids := make([]string, buys)
		var wg sync.WaitGroup
		sem := make(chan struct{}, 4)
		for i := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				ids[i] = place(t, c, "key-"+randomID(t), body(t, scenario, "approved"))
				finished(t, c, ids[i], "completed")
			}()
		}
		wg.Wait()
		rec := suite.seller.recorded(t)
		var out []sample
		for _, id := range ids {
			evs := timeline(t, c, id)
			e := reached(t, evs, "completed")
			if !slices.Contains(wantBy, e.Type) {
				t.Errorf("%s: %s completed by %s, want one of %v", scenario, id, e.Type, wantBy)
				continue
			}
			at, err := time.Parse(time.RFC3339Nano, e.At)
			if err != nil {
				t.Fatal(err)
			}
			var s sample
			for _, cr := range rec.Creates {
				if cr.OperationID == id && cr.FinishedAt > 0 {
					s.afterFinish = at.Sub(time.UnixMilli(cr.FinishedAt))
				}
			}
			for _, w := range webhooksFor(rec, id) {
				if !w.Dropped {
					s.afterWebhook = at.Sub(time.UnixMilli(w.At))
				}
			}
			out = append(out, s)
		}
		return out
	}
	release := suite.HoldSweep() // see holdSweep; the lost webhooks' buys need it back
	t.Cleanup(release)           // should measure stop the test, the suites after it get the sweep
	webhooks := measure("async", "webhook")
	release()
	polled := measure("async_lost", "poll", "reconcile")
	pct := func(ss []sample, f func(sample) time.Duration, p float64) time.Duration {
		ds := make([]time.Duration, 0, len(ss))
		for _, s := range ss {
			ds = append(ds, f(s))
		}
		if len(ds) == 0 {
			return 0
		}
		sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
		return ds[int(p*float64(len(ds)-1))]
	}
	fin := func(s sample) time.Duration { return s.afterFinish }
	wh := func(s sample) time.Duration { return s.afterWebhook }
	t.Logf("seller task finished -> terminal status in the ledger, %d buys each (safety-net poll every %d s, sweep every %v):", buys, runConfig.PollMaxSeconds, sweepEvery)
	t.Logf("  webhook:      p50 %v  p90 %v  max %v", pct(webhooks, fin, .5), pct(webhooks, fin, .9), pct(webhooks, fin, 1))
	t.Logf("  no webhook:   p50 %v  p90 %v  max %v", pct(polled, fin, .5), pct(polled, fin, .9), pct(polled, fin, 1))
	t.Logf("webhook sent by the seller -> terminal status: p50 %v  p90 %v  max %v", pct(webhooks, wh, .5), pct(webhooks, wh, .9), pct(webhooks, wh, 1))
}

// The helpers the end-to-end suites share.
var (
	randomID    = e2etest.RandomID
	timeline    = e2etest.Timeline
	logTimeline = e2etest.LogTimeline
	place       = e2etest.Place
	finished    = e2etest.Finished
	get         = e2etest.Get
	reached     = e2etest.Reached
	detailOf    = e2etest.DetailOf
	withCode    = e2etest.WithCode
)

// executionEnd waits for the operation's first execution to end and returns its status and
// error.
func executionEnd(t testing.TB, id string) (string, string) { return suite.ExecutionEnd(t, id) }
