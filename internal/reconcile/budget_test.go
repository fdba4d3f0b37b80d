package reconcile_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/adcptest"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/workflow"
)

// readHook wraps the seller's get_task_status: it records when each read started, how many
// were in flight at most, and answers the reads fail says to fail with that error.
type readHook struct {
	*hookAdCP
	hold time.Duration

	mu       sync.Mutex
	starts   []time.Time
	inFlight int
	maxIn    int
	fail     func(n int) error
}

func (h *readHook) GetTaskStatus(ctx context.Context, agentID string, req adcp.GetTaskStatusRequest) (*adcp.TaskStatusResult, error) {
	h.mu.Lock()
	h.starts = append(h.starts, time.Now())
	n := len(h.starts)
	h.inFlight++
	h.maxIn = max(h.maxIn, h.inFlight)
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.inFlight--
		h.mu.Unlock()
	}()
	time.Sleep(h.hold)
	if h.fail != nil {
		if err := h.fail(n); err != nil {
			return nil, err
		}
	}
	return h.hookAdCP.GetTaskStatus(ctx, agentID, req)
}

func (h *readHook) reads() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.starts)
}

// TestDirectReadsStayWithinTheSellersBudget: every pending task of a seller without a listing
// is read, never more than PollConcurrency at once nor faster than PollRate.
func TestDirectReadsStayWithinTheSellersBudget(t *testing.T) {
	t.Parallel()
	e := newEnv(t, adcptest.SellerOptions{})
	e.api.noListing = true
	for i := range 9 {
		e.newOp(workflow.StatusSubmitted, e.sellerTask(fmt.Sprintf("r%d", i)), nil)
	}
	hook := &readHook{hookAdCP: e.api, hold: 30 * time.Millisecond}
	cfg := e.cfg()
	cfg.AdCP, cfg.PollConcurrency, cfg.PollRate = hook, 2, 40 // one start every 25 ms
	if sum := e.run(cfg); !slices.Equal(sum.Reconciled, []string{sellerID}) {
		t.Fatalf("summary %+v", sum)
	}
	if hook.reads() != 9 || hook.maxIn > 2 {
		t.Fatalf("%d reads, at most %d in flight; want 9 reads, at most 2 at once", hook.reads(), hook.maxIn)
	}
	for i := 1; i < len(hook.starts); i++ {
		if gap := hook.starts[i].Sub(hook.starts[i-1]); gap < 20*time.Millisecond {
			t.Errorf("reads %d and %d started %s apart, faster than 40 a second", i-1, i, gap)
		}
	}
}

// TestRetryAfterPastTheRunDefersTheSeller: a seller that answers with a retry_after longer than
// the run is not called again, by this run or the next, until it has passed.
func TestRetryAfterPastTheRunDefersTheSeller(t *testing.T) {
	t.Parallel()
	e := newEnv(t, adcptest.SellerOptions{})
	e.api.noListing = true
	task := e.sellerTask("ra")
	op := e.newOp(workflow.StatusSubmitted, task, nil)
	e.newOp(workflow.StatusSubmitted, e.sellerTask("rb"), nil)
	e.newOp(workflow.StatusSubmitted, e.sellerTask("rc"), nil)
	if err := e.seller.Finish(task, "completed"); err != nil {
		t.Fatal(err)
	}
	hook := &readHook{hookAdCP: e.api, fail: func(n int) error {
		if n == 1 {
			return &adcp.Error{Kind: adcp.KindTool, Agent: sellerID, Tool: adcp.ToolGetTaskStatus, Code: "RATE_LIMITED",
				Recovery: adcp.RecoveryTransient, RecoveryGiven: true, RetryAfter: 2 * time.Hour}
		}
		return nil
	}}
	cfg := e.cfg() // each run may take an hour: the retry_after reaches past it
	cfg.AdCP, cfg.PollConcurrency = hook, 1

	sum := e.run(cfg)
	if hook.reads() != 1 || !slices.Equal(sum.Incomplete, []string{sellerID}) {
		t.Fatalf("first run: %d reads, summary %+v; want one refused read and the seller incomplete", hook.reads(), sum)
	}
	p, err := e.store.GetProgress(context.Background(), sellerID)
	if err != nil || p.NotBefore.Sub(e.clock.Now()) < 119*time.Minute {
		t.Fatalf("progress %+v, %v; want not_before two hours on", p, err)
	}
	e.clock.Advance(time.Hour)
	if sum := e.run(cfg); hook.reads() != 1 || !slices.Equal(sum.Deferred, []string{sellerID}) {
		t.Fatalf("within the retry_after: %d reads, summary %+v; want the seller deferred", hook.reads(), sum)
	}
	e.clock.Advance(61 * time.Minute)
	sum = e.run(cfg)
	if hook.reads() != 4 || !slices.Equal(sum.Reconciled, []string{sellerID}) || e.op(op.ID).Status != workflow.StatusCompleted {
		t.Fatalf("after the retry_after: %d reads, summary %+v, operation %s", hook.reads(), sum, e.op(op.ID).Status)
	}
}

// TestShortRetryAfterIsWaitedOutWithinTheRun: a retry_after that ends before the run does
// delays the seller's next read by that long, and the refused read is made again.
func TestShortRetryAfterIsWaitedOutWithinTheRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t, adcptest.SellerOptions{})
	e.api.noListing = true
	task := e.sellerTask("sa")
	op := e.newOp(workflow.StatusSubmitted, task, nil)
	if err := e.seller.Finish(task, "completed"); err != nil {
		t.Fatal(err)
	}
	hook := &readHook{hookAdCP: e.api, fail: func(n int) error {
		if n == 1 {
			return &adcp.Error{Kind: adcp.KindTransport, Agent: sellerID, Tool: adcp.ToolGetTaskStatus, HTTPStatus: 429,
				Recovery: adcp.RecoveryTransient, RetryAfter: 300 * time.Millisecond}
		}
		return nil
	}}
	cfg := e.cfg()
	cfg.AdCP = hook
	sum := e.run(cfg)
	if hook.reads() != 2 || !slices.Equal(sum.Reconciled, []string{sellerID}) || e.op(op.ID).Status != workflow.StatusCompleted {
		t.Fatalf("%d reads, summary %+v, operation %s; want the read made again and the buy completed", hook.reads(), sum, e.op(op.ID).Status)
	}
	if gap := hook.starts[1].Sub(hook.starts[0]); gap < 250*time.Millisecond {
		t.Errorf("the read was made again %s later, before the retry_after", gap)
	}
}

// TestQuietExecutionIsDescribedOncePerStaleAfter: sweeping every minute does not describe
// every quiet operation's execution every minute, only once each StaleAfter of quiet.
func TestQuietExecutionIsDescribedOncePerStaleAfter(t *testing.T) {
	t.Parallel()
	e := newEnv(t, adcptest.SellerOptions{})
	e.newOp(workflow.StatusSubmitted, e.sellerTask("qa"), nil)
	var calls atomic.Int64
	cfg := e.cfg()
	cfg.Executions = executions(func(context.Context, string) (string, time.Time, error) {
		calls.Add(1)
		return "RUNNING", time.Time{}, nil
	})
	e.clock.Advance(31 * time.Minute)
	e.run(cfg)
	for range 5 { // five more one-minute runs
		e.clock.Advance(time.Minute)
		e.run(cfg)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d DescribeExecution calls in six runs within one StaleAfter, want 1", n)
	}
	e.clock.Advance(25 * time.Minute) // past 60 min of quiet
	e.run(cfg)
	if n := calls.Load(); n != 2 {
		t.Fatalf("%d DescribeExecution calls after another StaleAfter, want 2", n)
	}
}

// countingLedger counts the sweep's ledger calls that the sweep's cost model prices.
type countingLedger struct {
	*ledger.Store
	mu sync.Mutex
	n  map[string]int
}

func (c *countingLedger) count(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[name]++
}

func (c *countingLedger) counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := maps.Clone(c.n)
	clear(c.n)
	return out
}

func (c *countingLedger) ListPendingBySeller(ctx context.Context, seller string, limit int, cursor string) (record.Page[*record.Operation], error) {
	c.count("ListPendingBySeller")
	return c.Store.ListPendingBySeller(ctx, seller, limit, cursor)
}

func (c *countingLedger) BackfillSellerIndex(ctx context.Context, scanLimit int) (int, bool, error) {
	c.count("BackfillSellerIndex")
	return c.Store.BackfillSellerIndex(ctx, scanLimit)
}

func (c *countingLedger) GetSweepPlan(ctx context.Context) (record.SweepPlan, error) {
	c.count("GetSweepPlan")
	return c.Store.GetSweepPlan(ctx)
}

func (c *countingLedger) PutSweepPlan(ctx context.Context, p record.SweepPlan) error {
	c.count("PutSweepPlan")
	return c.Store.PutSweepPlan(ctx, p)
}

func (c *countingLedger) ReportShard(ctx context.Context, plan string) (record.SweepPlan, bool, error) {
	c.count("ReportShard")
	return c.Store.ReportShard(ctx, plan)
}

func (c *countingLedger) GetProgress(ctx context.Context, seller string) (record.SweepProgress, error) {
	c.count("GetProgress")
	return c.Store.GetProgress(ctx, seller)
}

func (c *countingLedger) PutProgress(ctx context.Context, p record.SweepProgress) error {
	c.count("PutProgress")
	return c.Store.PutProgress(ctx, p)
}

func (c *countingLedger) AcquireLock(ctx context.Context, name, owner string, ttl time.Duration) (record.Lease, error) {
	c.count("AcquireLock")
	return c.Store.AcquireLock(ctx, name, owner, ttl)
}

func (c *countingLedger) ReleaseLock(ctx context.Context, l record.Lease) error {
	c.count("ReleaseLock")
	return c.Store.ReleaseLock(ctx, l)
}

func (c *countingLedger) PutSweepHeartbeat(ctx context.Context, h record.SweepHeartbeat) error {
	c.count("PutSweepHeartbeat")
	return c.Store.PutSweepHeartbeat(ctx, h)
}

// TestCallsPerRunMatchTheCostModel counts what one run costs and checks it against the
// assumptions of the sweep's table in statemachine/sweep_cost_test.go: per seller with a listing,
// ceil(pending/listPageSize) list pages (listPageSize 100) plus one direct read per task that
// ended since the last run, and per shard ceil(pending/record.MaxListLimit) pages of the
// per-seller index, perSellerLedgerOps (4) ledger calls (GetProgress, AcquireLock,
// ReleaseLock, PutProgress) and one report to the plan; per plan, one plan write, one read of
// the index backfill's progress once it is done, and one heartbeat (from the shard that
// completes the plan). The planner's SQS messages are counted in
// TestPlanHandsEachSellerOneShardAndTheLastShardVouches.
func TestCallsPerRunMatchTheCostModel(t *testing.T) {
	t.Parallel()
	const pending, ended = 250, 2
	e := newEnv(t, adcptest.SellerOptions{})
	var tasks []string
	for i := range pending {
		task := e.sellerTask(fmt.Sprintf("m%03d", i))
		e.newOp(workflow.StatusSubmitted, task, nil)
		tasks = append(tasks, task)
	}
	counting := &countingLedger{Store: e.store, n: map[string]int{}}
	cfg := e.cfg()
	cfg.Ledger = counting
	ceil := func(a, b int) int { return (a + b - 1) / b }
	want := map[string]int{"ListPendingBySeller": ceil(pending, record.MaxListLimit), "GetProgress": 1, "AcquireLock": 1, "ReleaseLock": 1,
		"PutProgress": 1, "ReportShard": 1, "BackfillSellerIndex": 1, "PutSweepPlan": 1, "PutSweepHeartbeat": 1}
	// The backfill's scan is once per table, not per run: finished before the runs counted.
	for done := false; !done; {
		var err error
		if _, done, err = e.store.BackfillSellerIndex(context.Background(), 1000); err != nil {
			t.Fatal(err)
		}
	}

	e.run(cfg)
	if got, want := counting.counts(), want; !maps.Equal(got, want) {
		t.Errorf("ledger calls of a run: %v, want %v", got, want)
	}
	if got := len(e.seller.CallsTo("list_tasks")); got != ceil(pending, 100) {
		t.Errorf("%d list pages for %d pending tasks, want %d", got, pending, ceil(pending, 100))
	}
	if got := len(e.seller.CallsTo("get_task_status")); got != 0 {
		t.Errorf("%d direct reads with no task ended, want 0", got)
	}

	for _, task := range tasks[:ended] {
		for range 2 { // submitted → working → completed
			if _, err := e.seller.Advance(task); err != nil {
				t.Fatal(err)
			}
		}
	}
	e.run(cfg)
	if got, want := counting.counts(), want; !maps.Equal(got, want) {
		t.Errorf("ledger calls of the second run: %v, want %v", got, want)
	}
	if got := len(e.seller.CallsTo("list_tasks")); got != 2*ceil(pending, 100) {
		t.Errorf("%d list pages after two runs, want %d", got, 2*ceil(pending, 100))
	}
	if got := len(e.seller.CallsTo("get_task_status")); got != ended {
		t.Errorf("%d direct reads after %d tasks ended, want one each", got, ended)
	}
}
