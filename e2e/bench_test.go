package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/benchtest"
	"github.com/buyflow/buyflow/internal/devstack"
)

// BenchmarkWebhookToResume measures, on the local stack, the time from the seller's terminal
// webhook reaching the API to the workflow's next step (the ReportOutcome invocation), for b.N
// asynchronous buys, resumeInFlight of them in flight at once (the budget's figure). It
// reports p50 and p99 in milliseconds:
//
//	BUYFLOW_E2E=1 go test -run '^$' -bench WebhookToResume -benchtime 100x ./e2e
func BenchmarkWebhookToResume(b *testing.B) {
	if skip != "" {
		b.Skip(skip)
	}
	if suite.local == nil {
		b.Skip("needs the local stack's request trace")
	}
	c := client(b, "bench"+randomID(b))
	ids := make([]string, b.N)
	var (
		wg   sync.WaitGroup
		sem  = make(chan struct{}, resumeInFlight)
		mu   sync.Mutex
		errs []string
	)
	b.ResetTimer()
	for i := range b.N {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			body := buy{PO: fmt.Sprintf("PO-BENCH-%d-%d", time.Now().UnixNano(), i), Sim: "async_complete"}.body(b)
			sub, _, err := c.Submit(ctx, fmt.Sprintf("bench-%d-%d", time.Now().UnixNano(), i), body)
			if err == nil {
				ids[i] = sub.OperationID
				// The latency is read from the stack's trace, not from this wait: a slow poll
				// keeps a hundred waiting clients from loading the stack they measure.
				_, err = c.Wait(ctx, sub.OperationID, time.Second, nil, nil)
			}
			if err != nil {
				mu.Lock()
				errs = append(errs, err.Error())
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	if len(errs) > 0 {
		b.Fatalf("%d buys failed: %s", len(errs), strings.Join(errs, "; "))
	}
	var lat []time.Duration
	hops := map[string][]time.Duration{}
	polled := 0
	for _, id := range ids {
		done, _ := reached(timeline(b, c, id), "completed")
		if done.Type == "poll" || done.Type == "reconcile" {
			polled++
			continue
		}
		if d, ok := webhookToResume(suite.local.Trace.For(id)); ok {
			lat = append(lat, d)
			for name, h := range resumeHops(suite.local.Trace.For(id)) {
				hops[name] = append(hops[name], h)
			}
		} else {
			polled++
		}
	}
	if len(lat) == 0 {
		b.Fatalf("no buy resumed on a webhook (%d completed by polling): is functions/webhook verifying and waking?", polled)
	}
	slices.Sort(lat)
	p50, p99 := benchtest.Percentile(lat, 50), benchtest.Percentile(lat, 99)
	b.ReportMetric(benchtest.Millis(p50), "p50-ms")
	b.ReportMetric(benchtest.Millis(p99), "p99-ms")
	b.ReportMetric(0, "ns/op")
	b.Logf("seller webhook → workflow resumed over %d buys (%d completed by polling instead): p50 %s, p99 %s, max %s",
		len(lat), polled, p50.Round(time.Microsecond), p99.Round(time.Microsecond), lat[len(lat)-1].Round(time.Microsecond))
	// Printed, not logged: a benchmark's log is cut after ten lines.
	for _, h := range resumeHopNames {
		d := hops[h.name]
		if len(d) == 0 {
			continue
		}
		slices.Sort(d)
		fmt.Printf("  %-10s p50 %8s  p99 %8s  (%d of %d buys)  %s\n", h.name, benchtest.Percentile(d, 50).Round(10*time.Microsecond),
			benchtest.Percentile(d, 99).Round(10*time.Microsecond), len(d), len(lat), h.what)
	}
}

// resumeInFlight is how many buys BenchmarkWebhookToResume keeps in flight: the budget's
// figure (docs/ARCHITECTURE.md, budgets: p50 ≤ 10 ms, p99 ≤ 25 ms with 100 buys in flight).
const resumeInFlight = 100

// resumeHopNames are the hops of a webhook's way to the resumed workflow, in order, with what
// each one is on the local stack.
var resumeHopNames = []struct{ name, what string }{
	{"api", "front → kumo's API Gateway → its Lambda invoke reaching the proxy (emulation; API Gateway on AWS)"},
	{"queue", "invoke → kumo's runtime API hands it to the webhook process's poll (emulation; the Lambda service on AWS)"},
	{"function", "the webhook function from its handoff to its SendTaskSuccess (buyflow's code, its ledger calls to kumo's DynamoDB)"},
	{"  calls", "of function: its AWS calls before SendTaskSuccess, as the local stack answered them (kumo's DynamoDB behind the proxy)"},
	{"  own", "of function: the rest (buyflow's code, the SDK, the process's scheduling on a busy machine)"},
	{"engine", "SendTaskSuccess → the local Step Functions invokes ReportOutcome (emulation; Step Functions on AWS)"},
}

// resumeHops splits webhookToResume's span at the trace's hops (see resumeHopNames): the
// webhook function's invocation and handoff of the last webhook before ReportOutcome, and the
// SendTaskSuccess traced with the operation (left out when the local stack could not tell
// which operation a SendTaskSuccess woke).
func resumeHops(evs []devstack.TraceEvent) map[string]time.Duration {
	var webhook, invoke, handoff, success time.Time
	var calls time.Duration
	for _, e := range evs {
		switch {
		case e.Kind == devstack.TraceWebhook:
			webhook, invoke, handoff, success, calls = e.At, time.Time{}, time.Time{}, time.Time{}, 0
		case e.Kind == devstack.TraceCall && e.Function == "webhook" && !handoff.IsZero() && success.IsZero():
			calls += e.Took
		case e.Kind == devstack.TraceInvoke && e.Function == "webhook" && invoke.IsZero():
			invoke = e.At
		case e.Kind == devstack.TraceHandoff && e.Function == "webhook" && handoff.IsZero():
			handoff = e.At
		case e.Kind == devstack.TraceTaskSuccess && e.Function == "webhook" && success.IsZero():
			success = e.At
		case e.Kind == devstack.TraceInvoke && e.Action == "report":
			out := map[string]time.Duration{}
			if webhook.IsZero() || invoke.IsZero() || handoff.IsZero() {
				return out
			}
			out["api"], out["queue"] = invoke.Sub(webhook), handoff.Sub(invoke)
			if !success.IsZero() {
				out["function"], out["engine"] = success.Sub(handoff), e.At.Sub(success)
				out["  calls"], out["  own"] = calls, success.Sub(handoff)-calls
			}
			return out
		}
	}
	return nil
}

// webhookToResume is the time from the last webhook before the first ReportOutcome invocation
// to that invocation.
func webhookToResume(evs []devstack.TraceEvent) (time.Duration, bool) {
	var last time.Time
	for _, e := range evs {
		switch {
		case e.Kind == devstack.TraceWebhook:
			last = e.At
		case e.Kind == devstack.TraceInvoke && e.Action == "report":
			if last.IsZero() {
				return 0, false
			}
			return e.At.Sub(last), true
		}
	}
	return 0, false
}
