package waiting

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/apiclient"
	"github.com/buyflow/buyflow/internal/benchtest"
	"github.com/buyflow/buyflow/internal/devstack"
	"github.com/buyflow/buyflow/internal/ledger"
)

// resumeInFlight is how many buys BenchmarkWebhookToResume keeps in flight: the budget's
// figure (docs/ARCHITECTURE.md, budgets: p50 ≤ 10 ms, p99 ≤ 25 ms with 100 buys in flight).
const resumeInFlight = 100

// resumeBuys is how many webhooks BenchmarkWebhookToResume measures one at a time
// (BUYFLOW_RESUME_BUYS, default 50).
func resumeBuys(b *testing.B) int {
	if v := os.Getenv("BUYFLOW_RESUME_BUYS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("BUYFLOW_RESUME_BUYS=%q: want a positive count", v)
		}
		return n
	}
	return 50
}

// BenchmarkWebhookToResume measures, on this package's stack, the time from a seller's
// terminal webhook reaching the API to the workflow's next step (its ReportOutcome
// invocation), with resumeInFlight buys in flight. Every buy is placed first and parked on a
// task its seller holds, on the long safety net (the sweep's heartbeat is fresh), and the sweep
// is then held, so nothing but the webhook finishes it. Then the seller finishes them:
//
//   - one at a time, resumeBuys of them, each once the one before resumed, with at least
//     resumeInFlight buys still in flight: the budget's figure (p50-ms, p99-ms). A webhook
//     meets the stack as it would meet AWS, where Lambda and Step Functions serve each
//     request on their own capacity;
//   - then the other resumeInFlight-1 all at once: a burst, printed for what it is, a
//     machine's two cores shared by kumo, the local Step Functions and each function's two
//     processes (on AWS the webhook function scales out to the burst).
//
// Each is split at the stack's trace into its hops (resumeHopNames):
//
//	BUYFLOW_E2E=1 go test -run '^$' -bench WebhookToResume ./e2e/waiting
func BenchmarkWebhookToResume(b *testing.B) {
	if skip != "" {
		b.Skip(skip)
	}
	n := resumeBuys(b)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	c := &apiclient.Client{BaseURL: stack.APIURL, HTTP: &http.Client{Timeout: 30 * time.Second},
		TenantHeader: stack.TenantHeader, Tenant: fmt.Sprintf("resume-%d", time.Now().UnixNano())}
	if err := awaitHeartbeat(ctx); err != nil {
		b.Fatal(err)
	}
	parked, err := parkBuys(ctx, c, n+resumeInFlight-1)
	if err != nil {
		b.Fatal(err)
	}
	// Every buy parked on the long net; from now on the sweep, at this stack's cadence of
	// seconds, would read the finished tasks of a burst before their webhooks got through.
	defer stack.HoldSweep()()
	alone := &resumeSamples{}
	for _, p := range parked[:n] {
		if err := alone.finish(ctx, []parkedBuy{p}); err != nil {
			b.Fatal(err)
		}
		// The buy's own tail (ReportOutcome, the outcome's report, the execution's end) runs
		// before the next webhook, as when sellers finish a few tasks a second.
		time.Sleep(100 * time.Millisecond)
	}
	burst := &resumeSamples{}
	if err := burst.finish(ctx, parked[n:]); err != nil {
		b.Fatal(err)
	}
	for _, s := range []*resumeSamples{alone, burst} {
		if err := s.keepWebhooks(ctx, c); err != nil {
			b.Fatal(err)
		}
	}
	if len(alone.lat) == 0 {
		b.Fatalf("no buy resumed on its webhook (%d by another party): is functions/webhook verifying and waking?", alone.other)
	}
	p50, p99 := benchtest.Percentile(alone.sorted(), 50), benchtest.Percentile(alone.sorted(), 99)
	b.ReportMetric(benchtest.Millis(p50), "p50-ms")
	b.ReportMetric(benchtest.Millis(p99), "p99-ms")
	fmt.Printf("seller webhook → workflow resumed (ReportOutcome invoked), %d buys in flight\n", resumeInFlight)
	fmt.Printf("%-34s %10s %10s %10s   %s\n", "", "p50", "p99", "max", "buys (woken by another party)")
	for _, r := range []struct {
		name string
		s    *resumeSamples
		goal string
	}{{"one at a time", alone, "goal p50 ≤ 10 ms, p99 ≤ 25 ms"}, {fmt.Sprintf("%d at once", len(parked)-n), burst, ""}} {
		lat := r.s.sorted()
		if len(lat) == 0 {
			fmt.Printf("%-34s %10s %10s %10s   0 (%d)\n", r.name, "-", "-", "-", r.s.other)
			continue
		}
		fmt.Printf("%-34s %10s %10s %10s   %d (%d)   %s\n", r.name, round(benchtest.Percentile(lat, 50)), round(benchtest.Percentile(lat, 99)),
			round(lat[len(lat)-1]), len(lat), r.s.other, r.goal)
	}
	fmt.Printf("\nhops, p50 / p99: one at a time, and at once\n")
	for _, h := range resumeHopNames {
		fmt.Printf("  %-10s %21s %21s   %s\n", h.name, alone.hop(h.name), burst.hop(h.name), h.what)
	}
	fmt.Println()
	for b.Loop() { // the measurement above runs once, whatever -benchtime says
	}
}

// round is d to a tenth of a millisecond, for the tables.
func round(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }

// parkedBuy is a buy parked on its AwaitSeller token, its task held at the seller.
type parkedBuy struct{ id, task string }

// parkBuys places n buys whose seller holds their task, sixteen at a time, and returns once
// every one's AwaitSeller has stored its token in the ledger.
func parkBuys(ctx context.Context, c *apiclient.Client, n int) ([]parkedBuy, error) {
	root, err := devstack.FindRepoRoot(".")
	if err != nil {
		return nil, err
	}
	db := dynamodb.New(dynamodb.Options{Region: "us-east-1", BaseEndpoint: aws.String(stack.EmulatorURL),
		Credentials: credentials.NewStaticCredentialsProvider("local", "local", "")}, ledger.EmulatorCompat)
	store := ledger.New(db, stack.TableName)
	out := make([]parkedBuy, n)
	errs := make(chan error, n)
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			body, err := apiclient.Buy{PO: fmt.Sprintf("PO-RESUME-%d-%d", time.Now().UnixNano(), i), Sim: "async_complete hold"}.Body(root)
			if err != nil {
				errs <- err
				return
			}
			sub, _, err := c.Submit(ctx, fmt.Sprintf("resume-%d-%d", time.Now().UnixNano(), i), body)
			if err != nil {
				errs <- err
				return
			}
			for {
				op, err := store.GetOperation(ctx, c.Tenant, sub.OperationID)
				switch {
				case err != nil:
					errs <- err
					return
				case op.Status.Terminal():
					errs <- fmt.Errorf("%s ended %s before it parked: %s", sub.OperationID, op.Status, op.Reason)
					return
				case op.SellerTaskID != "" && op.TaskToken != "":
					out[i] = parkedBuy{id: sub.OperationID, task: op.SellerTaskID}
					return
				}
				select {
				case <-ctx.Done():
					errs <- fmt.Errorf("%s never parked: %w", sub.OperationID, ctx.Err())
					return
				case <-time.After(200 * time.Millisecond): // the next look at the ledger
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return nil, err
	}
	return out, nil
}

// resumeSamples are the latencies of the buys a finish measured.
type resumeSamples struct {
	ids   []string
	lat   []time.Duration
	hops  []map[string]time.Duration
	other int // resumed, but not on the seller's webhook (the sweep or the buy's poll was first)
}

// keepWebhooks keeps the samples of the buys the seller's webhook moved to completed (their
// timeline says who did) and counts the others.
func (s *resumeSamples) keepWebhooks(ctx context.Context, c *apiclient.Client) error {
	var kept resumeSamples
	for i, id := range s.ids {
		evs, err := c.Events(ctx, id)
		if err != nil {
			return err
		}
		done := slices.IndexFunc(evs, func(e api.Event) bool { return e.To == "completed" })
		if done < 0 || evs[done].Type != "webhook" {
			s.other++
			continue
		}
		kept.ids, kept.lat, kept.hops = append(kept.ids, id), append(kept.lat, s.lat[i]), append(kept.hops, s.hops[i])
	}
	s.ids, s.lat, s.hops = kept.ids, kept.lat, kept.hops
	return nil
}

// finish has the seller finish the buys' tasks at once and waits until each buy's workflow
// invoked ReportOutcome; it then reads each one's latency and hops from the trace.
func (s *resumeSamples) finish(ctx context.Context, buys []parkedBuy) error {
	resumed := make([]<-chan devstack.TraceEvent, len(buys))
	for i, p := range buys {
		found, stop := stack.Trace.Watch(func(e devstack.TraceEvent) bool {
			return e.OperationID == p.id && e.Kind == devstack.TraceInvoke && e.Action == "report"
		})
		defer stop()
		resumed[i] = found
	}
	for _, p := range buys {
		if err := stack.Seller.Finish(p.task, "completed"); err != nil {
			return err
		}
	}
	for i, p := range buys {
		select {
		case <-resumed[i]:
		case <-ctx.Done():
			return fmt.Errorf("%s never reached ReportOutcome: %w", p.id, ctx.Err())
		}
		evs := stack.Trace.For(p.id)
		d, ok := webhookToResume(evs)
		if !ok {
			s.other++
			continue
		}
		s.ids, s.lat, s.hops = append(s.ids, p.id), append(s.lat, d), append(s.hops, resumeHops(evs))
	}
	return nil
}

func (s *resumeSamples) sorted() []time.Duration {
	out := slices.Clone(s.lat)
	slices.Sort(out)
	return out
}

// hop is a hop's p50 / p99 for the table.
func (s *resumeSamples) hop(name string) string {
	var d []time.Duration
	for _, h := range s.hops {
		if v, ok := h[name]; ok {
			d = append(d, v)
		}
	}
	if len(d) == 0 {
		return "-"
	}
	slices.Sort(d)
	return fmt.Sprintf("%s / %s", round(benchtest.Percentile(d, 50)), round(benchtest.Percentile(d, 99)))
}

// resumeHopNames are the hops of a webhook's way to the resumed workflow, in order, with what
// each one is on the local stack.
var resumeHopNames = []struct{ name, what string }{
	{"api", "front → kumo's API Gateway → its Lambda invoke reaching the proxy (emulation; API Gateway on AWS)"},
	{"queue", "invoke → kumo's runtime API hands it to a webhook process's poll (emulation; the Lambda service on AWS)"},
	{"function", "the webhook function from its handoff to its SendTaskSuccess (buyflow's code, its calls to kumo's DynamoDB)"},
	{"  calls", "of function: the time its AWS calls before SendTaskSuccess were in flight (calls at once counted once), as the local stack answered them"},
	{"  own", "of function: the rest (buyflow's code, the SDK, the process's scheduling)"},
	{"engine", "SendTaskSuccess → the local Step Functions invokes ReportOutcome (emulation; Step Functions on AWS)"},
}

// resumeHops splits webhookToResume's span at the trace's hops (see resumeHopNames): the
// webhook function's invocation and handoff of the last webhook before ReportOutcome, and the
// SendTaskSuccess traced with the operation (left out when the local stack could not tell
// which operation a SendTaskSuccess woke).
func resumeHops(evs []devstack.TraceEvent) map[string]time.Duration {
	var webhook, invoke, handoff, success time.Time
	var calls []span
	for _, e := range evs {
		switch {
		case e.Kind == devstack.TraceWebhook:
			webhook, invoke, handoff, success, calls = e.At, time.Time{}, time.Time{}, time.Time{}, nil
		case e.Kind == devstack.TraceCall && e.Function == "webhook" && !handoff.IsZero() && success.IsZero():
			calls = append(calls, span{e.At, e.At.Add(e.Took)})
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
				inFlight := covered(calls, handoff, success)
				out["  calls"], out["  own"] = inFlight, success.Sub(handoff)-inFlight
			}
			return out
		}
	}
	return nil
}

// span is one call's time, from its start to its answer.
type span struct{ from, to time.Time }

// covered is how much of [from, to] at least one of spans covers: calls made at once (a
// delivery's claim round sends three) count once, so the function's "own" time is what is
// left when none was in flight.
func covered(spans []span, from, to time.Time) time.Duration {
	spans = slices.Clone(spans)
	slices.SortFunc(spans, func(a, b span) int { return a.from.Compare(b.from) })
	var total time.Duration
	end := from
	for _, s := range spans {
		start, stop := s.from, s.to
		if start.Before(end) {
			start = end // end is never before from
		}
		if stop.After(to) {
			stop = to
		}
		if stop.After(start) {
			total += stop.Sub(start)
			end = stop
		}
	}
	return total
}

// webhookToResume is the time from the last webhook before the first ReportOutcome invocation
// to that invocation; false when no webhook came first.
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
