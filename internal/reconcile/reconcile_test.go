package reconcile_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/smithy-go"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/adcptest"
	"github.com/buyflow/buyflow/internal/clocktest"
	"github.com/buyflow/buyflow/internal/reconcile"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/workflow"
)

func TestTerminalTaskIsRecordedAndWakesTheWorkflow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, adcptest.SellerOptions{})
	task := e.sellerTask("x")
	op := e.newOp(workflow.StatusSubmitted, task, nil)
	waiting := e.newOp(workflow.StatusSubmitted, e.sellerTask("y"), nil) // still submitted at the seller
	if err := e.seller.Finish(task, "completed"); err != nil {
		t.Fatal(err)
	}
	cfg := e.cfg()

	// Not listed any more: read at once (no grace period), recorded and woken in this run.
	sum := e.run(cfg)

	got := e.op(op.ID)
	if got.Status != workflow.StatusCompleted || got.MediaBuyID == "" {
		t.Fatalf("operation %s, media buy %q; want completed with the seller's media buy", got.Status, got.MediaBuyID)
	}
	if got.TaskToken != "" {
		t.Error("the woken token is still stored")
	}
	c := e.completed()
	if len(c) != 1 || c[0].Token != "token-"+op.ID || c[0].Output.Status != workflow.StatusCompleted || !c[0].Output.Terminal {
		t.Fatalf("completions %+v, want one terminal completion of %s", c, op.ID)
	}
	if e.op(waiting.ID).Status != workflow.StatusSubmitted {
		t.Error("an operation the seller still lists as submitted moved")
	}
	if sum.Findings[reconcile.KindLostUpdate] != 1 || !slices.Equal(sum.Reconciled, []string{sellerID}) {
		t.Errorf("summary %+v", sum)
	}
	evs := e.events(op.ID)
	if !slices.ContainsFunc(evs, func(ev record.Event) bool {
		return ev.Type == record.EventReconcile && ev.To == workflow.StatusCompleted
	}) ||
		!slices.ContainsFunc(evs, func(ev record.Event) bool { return ev.Type == "wake" }) {
		t.Errorf("events %+v lack the reconcile transition and the wake", evs)
	}
	m := e.emf()
	if m["ReconcileFindings/"+reconcile.KindLostUpdate] != 1 || m["PendingOperations/submitted"] != 2 || m["SellerTaskDuration/completed"] <= 0 {
		t.Errorf("metrics %v", m)
	}
	// Only the operation the seller did not list was polled; a second run finds nothing new.
	if n := len(e.seller.CallsTo("get_task_status")); n != 1 {
		t.Errorf("%d direct polls, want 1", n)
	}
	if again := e.run(cfg); len(again.Findings) != 0 || len(e.seller.CallsTo("get_task_status")) != 1 || len(e.completed()) != 1 {
		t.Errorf("second run %+v, %d polls: want nothing more", again, len(e.seller.CallsTo("get_task_status")))
	}
}

func TestUnknownTaskFailsAfterTheGracePeriod(t *testing.T) {
	t.Parallel()
	e := newEnv(t, adcptest.SellerOptions{})
	op := e.newOp(workflow.StatusSubmitted, "task-the-seller-never-had", nil)
	cfg := e.cfg()

	// Within the grace period the task is read, and nothing happens: the seller's records may
	// lag.
	e.run(cfg)
	if got := e.op(op.ID); got.Status != workflow.StatusSubmitted {
		t.Fatalf("failed within the grace period: %s", got.Status)
	}

	e.clock.Advance(11 * time.Minute)
	sum := e.run(cfg)
	got := e.op(op.ID)
	if got.Status != workflow.StatusFailed || !strings.Contains(got.Reason, "does not know task task-the-seller-never-had") {
		t.Fatalf("operation %s (%q), want failed with a readable reason", got.Status, got.Reason)
	}
	c := e.completed()
	if len(c) != 1 || c[0].Output.Status != workflow.StatusFailed || !c[0].Output.Terminal {
		t.Fatalf("completions %+v, want the token woken with the failure", c)
	}
	if sum.Findings[reconcile.KindUnknownTask] != 1 {
		t.Errorf("findings %v", sum.Findings)
	}
	if m := e.emf(); m["ReconcileFindings/"+reconcile.KindUnknownTask] != 1 {
		t.Errorf("metrics %v", m)
	}
	if n := len(e.seller.CallsTo("get_task_status")); n != 2 {
		t.Errorf("%d direct polls, want 2 (one a run)", n)
	}
}

// The sweep takes the lost-task grace from the run configuration, as the poll stage does, so
// that a lost task ends at the same time whoever reads it.
func TestUnknownTaskGraceFromTheRunConfig(t *testing.T) {
	t.Parallel()
	e := newEnv(t, adcptest.SellerOptions{})
	op := e.newOp(workflow.StatusSubmitted, "task-the-seller-never-had", nil)
	cfg := e.cfg()
	cfg.RunConfig.LostTaskGraceSeconds = 45
	e.run(cfg)
	e.clock.Advance(44 * time.Second)
	if e.run(cfg); e.op(op.ID).Status != workflow.StatusSubmitted {
		t.Fatalf("failed within a 45 s grace: %s", e.op(op.ID).Status)
	}
	e.clock.Advance(2 * time.Second)
	e.run(cfg)
	if got := e.op(op.ID); got.Status != workflow.StatusFailed || !strings.Contains(got.Reason, "past the 45-second grace") {
		t.Fatalf("operation %s (%q), want failed past the configured grace", got.Status, got.Reason)
	}
}

func TestOrphanIsRecordedOnceAndNeverAdopted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, adcptest.SellerOptions{})
	known := e.sellerTask("mb-known")
	e.newOp(workflow.StatusSubmitted, known, nil)
	orphan := e.sellerTask("mb-ghost") // a create whose operation the ledger does not have
	cfg := e.cfg()

	if sum := e.run(cfg); sum.Findings[reconcile.KindOrphan] != 0 {
		t.Fatalf("a task younger than the grace period is an orphan: %v", sum.Findings)
	}
	e.clock.Advance(11 * time.Minute)
	sum := e.run(cfg)
	if sum.Findings[reconcile.KindOrphan] != 1 {
		t.Fatalf("findings %v, want one orphan", sum.Findings)
	}
	items := e.orphanEvents()
	if len(items) != 1 {
		t.Fatalf("%d orphan events, want 1", len(items))
	}
	var ev record.Event
	if err := attributevalue.UnmarshalMap(items[0], &ev); err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	if err := json.Unmarshal(ev.Detail, &d); err != nil {
		t.Fatal(err)
	}
	if ev.Type != record.EventOrphan || d["task_id"] != orphan || d["seller"] != sellerID || !strings.Contains(ev.Reason, "decide by hand") {
		t.Errorf("orphan event %+v detail %v", ev, d)
	}

	// The next sweep counts it again (the alarm stays up) but records it only once a day.
	sum = e.run(cfg)
	if sum.Findings[reconcile.KindOrphan] != 1 || len(e.orphanEvents()) != 1 {
		t.Errorf("second sweep: findings %v, %d events", sum.Findings, len(e.orphanEvents()))
	}
	// Never adopted, never canceled: no mutating call reached the seller.
	for _, tool := range []string{"update_media_buy"} {
		if n := len(e.seller.CallsTo(tool)); n != 0 {
			t.Errorf("%d %s calls", n, tool)
		}
	}
	if task, _ := e.seller.Task(orphan); task.Status != "submitted" {
		t.Errorf("orphan task is %s", task.Status)
	}
	if len(e.completed()) != 0 {
		t.Error("an orphan woke a workflow")
	}
}

func TestEndedExecutionIsMarked(t *testing.T) {
	t.Parallel()
	e := newEnv(t, adcptest.SellerOptions{})
	op := e.newOp(workflow.StatusSubmitted, e.sellerTask("z"), nil)
	running := e.newOp(workflow.StatusSubmitted, e.sellerTask("w"), nil)
	var mu sync.Mutex
	var described []string
	cfg := e.cfg()
	cfg.Executions = executions(func(_ context.Context, arn string) (string, time.Time, error) {
		mu.Lock()
		described = append(described, arn)
		mu.Unlock()
		name := arn[strings.LastIndex(arn, ":")+1:]
		switch name {
		case workflow.ExecutionName(op.ID, 0): // handed over to the next generation
			return "SUCCEEDED", time.Time{}, nil
		case workflow.ExecutionName(op.ID, 1): // which failed
			return "FAILED", time.Now(), nil
		case workflow.ExecutionName(running.ID, 0):
			return "RUNNING", time.Time{}, nil
		}
		return "", time.Time{}, &smithy.GenericAPIError{Code: "ExecutionDoesNotExist", Message: "no " + name}
	})

	// Recently updated operations are not described.
	e.run(cfg)
	if len(described) != 0 {
		t.Fatalf("described %v before StaleAfter", described)
	}
	e.clock.Advance(31 * time.Minute)
	sum := e.run(cfg)
	got := e.op(op.ID)
	if !strings.Contains(got.Reason, "execution "+workflow.ExecutionName(op.ID, 1)+" ended FAILED") || got.Status != workflow.StatusSubmitted {
		t.Fatalf("operation %s reason %q", got.Status, got.Reason)
	}
	if r := e.op(running.ID).Reason; r != "" {
		t.Errorf("running operation marked: %q", r)
	}
	if sum.Findings[reconcile.KindExecutionEnded] != 1 {
		t.Errorf("findings %v", sum.Findings)
	}
	updates := func() int {
		n := 0
		for _, ev := range e.events(op.ID) {
			if ev.Type == record.EventReconcile {
				n++
			}
		}
		return n
	}
	if updates() != 1 {
		t.Fatalf("%d reconcile events, want 1", updates())
	}
	// Marked once; still counted on the next sweep.
	sum = e.run(cfg)
	if updates() != 1 || sum.Findings[reconcile.KindExecutionEnded] != 1 {
		t.Errorf("second sweep: %d events, findings %v", updates(), sum.Findings)
	}
	if m := e.emf(); m["ReconcileFindings/"+reconcile.KindExecutionEnded] != 2 {
		t.Errorf("metrics %v", m)
	}
}

func TestDeadlinePassedIsMarked(t *testing.T) {
	t.Parallel()
	e := newEnv(t, adcptest.SellerOptions{})
	past := e.clock.Now().Add(-time.Hour)
	op := e.newOp(workflow.StatusSubmitted, e.sellerTask("d"), func(o *record.Operation) { o.Deadline = past })
	sum := e.run(e.cfg())
	got := e.op(op.ID)
	if !strings.Contains(got.Reason, "after its deadline") || got.Status != workflow.StatusSubmitted {
		t.Fatalf("operation %s reason %q", got.Status, got.Reason)
	}
	if sum.Findings[reconcile.KindDeadlinePassed] != 1 {
		t.Errorf("findings %v", sum.Findings)
	}
	if m := e.emf(); m["Timeouts/operation_deadline"] != 1 || m["ReconcileFindings/"+reconcile.KindDeadlinePassed] != 1 {
		t.Errorf("metrics %v", m)
	}
}

func TestListingIsPaginatedOnBothToolNames(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		tools adcptest.PollTools
		tool  string
	}{
		{"alias", adcptest.PollAliasOnly, "list_tasks"},
		{"legacy", adcptest.PollLegacyOnly, "tasks/list"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, adcptest.SellerOptions{PollTools: tc.tools})
			for i := range 5 {
				e.newOp(workflow.StatusSubmitted, e.sellerTask("p"+string(rune('a'+i))), nil)
			}
			cfg := e.cfg()
			cfg.PageSize = 2
			e.clock.Advance(11 * time.Minute) // past the grace period: an unlisted operation would be polled
			sum := e.run(cfg)
			calls := e.seller.CallsTo(tc.tool)
			if len(calls) != 3 {
				t.Fatalf("%d %s calls, want 3 pages of 2", len(calls), tc.tool)
			}
			var cursors []string
			for _, c := range calls {
				var args struct {
					Filters struct {
						Statuses        []string `json:"statuses"`
						ContextContains string   `json:"context_contains"`
					} `json:"filters"`
					Pagination struct {
						MaxResults int    `json:"max_results"`
						Cursor     string `json:"cursor"`
					} `json:"pagination"`
				}
				if err := json.Unmarshal(c.Arguments, &args); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(args.Filters.Statuses, []string{"submitted", "working", "input-required"}) || args.Pagination.MaxResults != 2 {
					t.Errorf("list args %s", c.Arguments)
				}
				cursors = append(cursors, args.Pagination.Cursor)
			}
			if !slices.Equal(cursors, []string{"", "off:2", "off:4"}) {
				t.Errorf("cursors %q", cursors)
			}
			if n := len(e.seller.CallsTo("get_task_status")) + len(e.seller.CallsTo("tasks/get")); n != 0 {
				t.Errorf("%d direct polls of listed tasks", n)
			}
			if len(sum.Findings) != 0 || !slices.Equal(sum.Reconciled, []string{sellerID}) {
				t.Errorf("summary %+v", sum)
			}
		})
	}
}

func TestLeaseHeldByAnotherRunSkipsTheSeller(t *testing.T) {
	t.Parallel()
	e := newEnv(t, adcptest.SellerOptions{})
	e.newOp(workflow.StatusSubmitted, e.sellerTask("l"), nil)
	ctx := context.Background()
	if _, err := e.store.AcquireLock(ctx, record.ReconcileLock(sellerID), "someone-else", time.Minute); err != nil {
		t.Fatal(err)
	}
	sum := e.run(e.cfg())
	if !slices.Equal(sum.Skipped, []string{sellerID}) || len(sum.Reconciled) != 0 {
		t.Errorf("summary %+v", sum)
	}
	if n := len(e.seller.CallsTo("list_tasks")); n != 0 {
		t.Errorf("%d listings under another run's lease", n)
	}
}

func TestTwoConcurrentRunsNeverReconcileOneSellerTogether(t *testing.T) {
	t.Parallel()
	e := newEnv(t, adcptest.SellerOptions{})
	e.newOp(workflow.StatusSubmitted, e.sellerTask("c"), nil)
	inside, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	e.api.beforeList = func() {
		once.Do(func() {
			close(inside)
			<-release
		})
	}
	cfg := e.cfg()
	first := make(chan reconcile.Summary, 1)
	go func() {
		sum, err := e.svc(cfg).Run(context.Background())
		if err != nil {
			t.Error(err)
		}
		first <- sum
	}()
	<-inside // the first run holds the lease and is listing
	second := e.run(cfg)
	close(release)
	one := <-first
	if !slices.Equal(one.Reconciled, []string{sellerID}) || !slices.Equal(second.Skipped, []string{sellerID}) || len(second.Reconciled) != 0 {
		t.Errorf("first %+v, second %+v: want one reconciled and one skipped", one, second)
	}
	// The lease was released: a third run reconciles.
	if third := e.run(cfg); !slices.Equal(third.Reconciled, []string{sellerID}) {
		t.Errorf("third %+v", third)
	}
}

func TestTimeBudgetStopsAndTheNextRunResumesFromTheCursor(t *testing.T) {
	t.Parallel()
	e := newEnv(t, adcptest.SellerOptions{})
	for i := range 5 {
		e.newOp(workflow.StatusSubmitted, e.sellerTask("b"+string(rune('a'+i))), nil)
	}
	e.api.beforeList = func() { e.clock.Advance(time.Minute) } // every page costs a minute
	cfg := e.cfg()
	cfg.PageSize = 2
	start := e.clock.Now()
	cfg.Deadline = func(context.Context) time.Time { return start.Add(90 * time.Second) }

	sum := e.run(cfg)
	if !slices.Equal(sum.Incomplete, []string{sellerID}) || len(sum.Reconciled) != 0 {
		t.Fatalf("first run %+v, want the seller incomplete", sum)
	}
	if n := len(e.seller.CallsTo("list_tasks")); n != 2 {
		t.Fatalf("%d pages before the budget ran out, want 2", n)
	}
	p, err := e.store.GetProgress(context.Background(), sellerID)
	if err != nil {
		t.Fatal(err)
	}
	if p.Phase != record.PhaseList || p.ListCursor != "off:4" || !p.LastPass.IsZero() || p.Fence < 1 {
		t.Fatalf("stored progress %+v, want the list cursor off:4", p)
	}

	cfg.Deadline = func(context.Context) time.Time { return e.clock.Now().Add(time.Hour) }
	sum = e.run(cfg)
	if !slices.Equal(sum.Reconciled, []string{sellerID}) {
		t.Fatalf("second run %+v", sum)
	}
	calls := e.seller.CallsTo("list_tasks")
	if len(calls) != 3 || !strings.Contains(string(calls[2].Arguments), `"cursor":"off:4"`) {
		t.Fatalf("resumed listing %d calls, last %s", len(calls), calls[len(calls)-1].Arguments)
	}
	p, err = e.store.GetProgress(context.Background(), sellerID)
	if err != nil {
		t.Fatal(err)
	}
	if p.Phase != "" || p.ListCursor != "" || p.LastPass.IsZero() {
		t.Errorf("progress after a complete pass %+v", p)
	}
}

func TestProgressRefusesAStaleFence(t *testing.T) {
	t.Parallel()
	e := newEnv(t, adcptest.SellerOptions{})
	ps := e.store
	ctx := context.Background()
	if err := ps.PutProgress(ctx, record.SweepProgress{Seller: sellerID, Fence: 5, Phase: record.PhaseList, ListCursor: "off:8"}); err != nil {
		t.Fatal(err)
	}
	if err := ps.PutProgress(ctx, record.SweepProgress{Seller: sellerID, Fence: 4}); !errors.Is(err, record.ErrStaleFence) {
		t.Fatalf("stale fence: %v", err)
	}
	if err := ps.PutProgress(ctx, record.SweepProgress{Seller: sellerID, Fence: 5, ListCursor: "off:10", Phase: record.PhaseList}); err != nil {
		t.Fatal(err)
	}
	p, err := ps.GetProgress(ctx, sellerID)
	if err != nil || p.ListCursor != "off:10" {
		t.Errorf("progress %+v, %v", p, err)
	}
}

// TestSellerWithoutListingIsReadEveryRun: a seller without list_tasks (the official SDK's) has
// every pending task read on every run, so a lost webhook is found within one cadence, not
// after StaleAfter; a task read with the ledger's status changes nothing.
func TestSellerWithoutListingIsReadEveryRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t, adcptest.SellerOptions{})
	e.api.noListing = true
	task, other := e.sellerTask("n"), e.sellerTask("m")
	op := e.newOp(workflow.StatusSubmitted, task, nil)
	waiting := e.newOp(workflow.StatusSubmitted, other, nil)
	cfg := e.cfg()
	if sum := e.run(cfg); len(sum.Failed) != 0 || len(e.seller.CallsTo("get_task_status")) != 2 || len(sum.Findings) != 0 {
		t.Fatalf("summary %+v, %d reads; want both tasks read and nothing changed", sum, len(e.seller.CallsTo("get_task_status")))
	}
	if err := e.seller.Finish(task, "completed"); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute) // one cadence, far below Grace and StaleAfter
	sum := e.run(cfg)
	if got := e.op(op.ID); got.Status != workflow.StatusCompleted || sum.Findings[reconcile.KindLostUpdate] != 1 {
		t.Fatalf("operation %s, summary %+v", got.Status, sum)
	}
	if c := e.completed(); len(c) != 1 || c[0].Output.Status != workflow.StatusCompleted {
		t.Fatalf("completions %+v, want the finished buy woken", c)
	}
	if got := e.op(waiting.ID); got.Status != workflow.StatusSubmitted || got.Version != waiting.Version {
		t.Fatalf("the unfinished buy moved: %+v", got)
	}
	// The finished one is no longer pending: only the other is read again.
	e.run(cfg)
	if n := len(e.seller.CallsTo("get_task_status")); n != 5 {
		t.Errorf("%d reads after three runs, want 5", n)
	}
}

func TestTimeBudgetStopsInTheComparePhaseAndResumesAfterTheLastOperation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, adcptest.SellerOptions{})
	var ops []*record.Operation
	for range 3 {
		ops = append(ops, e.newOp(workflow.StatusSubmitted, "gone-"+e.sellerTask("q"), nil)) // unknown tasks: each is polled
	}
	e.run(e.cfg()) // each task's first REFERENCE_NOT_FOUND starts its grace
	warm := len(e.seller.CallsTo("get_task_status"))
	e.clock.Advance(11 * time.Minute)
	cfg := e.cfg()
	start := e.clock.Now()
	// The listing is free; every direct poll costs a minute; the budget allows two.
	cfg.Deadline = func(context.Context) time.Time { return start.Add(90 * time.Second) }
	cfg.AdCP = &pollCost{hookAdCP: e.api, clock: e.clock}
	cfg.PollConcurrency = 1 // one poll at a time: the clock moves a minute each
	sum := e.run(cfg)
	if !slices.Equal(sum.Incomplete, []string{sellerID}) || sum.Findings[reconcile.KindUnknownTask] != 2 {
		t.Fatalf("first run %+v", sum)
	}
	p, err := e.store.GetProgress(context.Background(), sellerID)
	if err != nil || p.Phase != record.PhaseCompare || p.AfterOp == "" {
		t.Fatalf("progress %+v, %v", p, err)
	}
	cfg.Deadline = func(context.Context) time.Time { return e.clock.Now().Add(time.Hour) }
	sum = e.run(cfg)
	if !slices.Equal(sum.Reconciled, []string{sellerID}) || sum.Findings[reconcile.KindUnknownTask] != 1 {
		t.Fatalf("second run %+v", sum)
	}
	for _, op := range ops {
		if got := e.op(op.ID); got.Status != workflow.StatusFailed {
			t.Errorf("%s is %s", op.ID, got.Status)
		}
	}
	if n := len(e.seller.CallsTo("get_task_status")) - warm; n != 3 {
		t.Errorf("%d polls, want each operation polled once", n)
	}
}

// pollCost advances the clock a minute per direct poll.
type pollCost struct {
	*hookAdCP
	clock *clocktest.Clock
}

func (p *pollCost) GetTaskStatus(ctx context.Context, agentID string, req adcp.GetTaskStatusRequest) (*adcp.TaskStatusResult, error) {
	p.clock.Advance(time.Minute)
	return p.hookAdCP.GetTaskStatus(ctx, agentID, req)
}

func TestDescribeExecutionDeniedTurnsTheCheckOffForTheRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t, adcptest.SellerOptions{})
	e.newOp(workflow.StatusSubmitted, e.sellerTask("a"), nil)
	e.newOp(workflow.StatusSubmitted, e.sellerTask("b"), nil)
	var calls atomic.Int64
	cfg := e.cfg()
	cfg.Executions = executions(func(context.Context, string) (string, time.Time, error) {
		calls.Add(1)
		return "", time.Time{}, &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "not authorized to perform states:DescribeExecution"}
	})
	cfg.PollConcurrency = 1 // with more, the operations compared together are each refused once
	e.clock.Advance(31 * time.Minute)
	sum := e.run(cfg)
	if calls.Load() != 1 || !slices.Equal(sum.Reconciled, []string{sellerID}) || len(sum.Findings) != 0 {
		t.Errorf("%d DescribeExecution calls, summary %+v; want one refused call and a completed pass", calls.Load(), sum)
	}
}

// TestLostTaskGetsTheGraceFromTheFirstAnswer (issue 30, symptom 3): a seller restarted during
// an IO review that has run for hours forgets the task. The grace runs from the seller's first
// REFERENCE_NOT_FOUND, not from the operation's last change: the buy waits, and past the grace
// it fails with a finding a person can act on (seller, PO number, what may exist, what to
// check), on the timeline and in LostSellerTasks.
func TestLostTaskGetsTheGraceFromTheFirstAnswer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, adcptest.SellerOptions{ForgetTasksOnRestart: true})
	task := e.sellerTask("io-review")
	op := e.newOp(workflow.StatusSubmitted, task, func(o *record.Operation) { o.PONumber = "PO-IO-7" })
	cfg := e.cfg()
	e.run(cfg)
	e.clock.Advance(3 * time.Hour) // the seller's people review the IO
	e.seller.Restart()

	firstAnswer := e.clock.Now()
	for _, after := range []time.Duration{0, 9 * time.Minute} {
		e.clock.Advance(after)
		e.run(cfg)
		if got := e.op(op.ID); got.Status != workflow.StatusSubmitted {
			t.Fatalf("%s after the first REFERENCE_NOT_FOUND: %s (%q); the grace counts from that answer", after, got.Status, got.Reason)
		}
	}
	if c := e.completed(); len(c) != 0 {
		t.Fatalf("woken within the grace: %+v", c)
	}

	e.clock.Advance(2 * time.Minute)
	sum := e.run(cfg)
	got := e.op(op.ID)
	if got.Status != workflow.StatusFailed {
		t.Fatalf("operation %s past the grace, want failed", got.Status)
	}
	for _, want := range []string{sellerID, "PO-IO-7", task, "may", "get_media_buys"} {
		if !strings.Contains(got.Reason, want) {
			t.Errorf("reason %q lacks %q", got.Reason, want)
		}
	}
	evs := e.events(op.ID)
	i := slices.IndexFunc(evs, func(ev record.Event) bool { return ev.Type == record.EventLostTask })
	if i < 0 {
		t.Fatalf("no %s event in %+v", record.EventLostTask, evs)
	}
	var d map[string]any
	if err := json.Unmarshal(evs[i].Detail, &d); err != nil {
		t.Fatal(err)
	}
	since, _ := time.Parse(time.RFC3339, fmt.Sprint(d["lost_since"]))
	if d["seller"] != sellerID || d["po_number"] != "PO-IO-7" || d["task_id"] != task || d["may_exist"] == "" || d["check"] == "" ||
		since.Sub(firstAnswer).Abs() > 5*time.Second || evs[i].To != workflow.StatusFailed || evs[i].Reason != got.Reason {
		t.Errorf("finding %+v detail %v", evs[i], d)
	}
	if c := e.completed(); len(c) != 1 || c[0].Output.Status != workflow.StatusFailed || !c[0].Output.Terminal {
		t.Fatalf("completions %+v, want the token woken with the failure", c)
	}
	m := e.emf()
	if sum.Findings[reconcile.KindUnknownTask] != 1 || m["LostSellerTasks/"+sellerID] != 1 || m["LostSellerTasks/"] != 1 {
		t.Errorf("findings %v, metrics %v", sum.Findings, m)
	}
}

// TestRunVouchesForTheSweepOnlyWhenItReadEveryPendingOperation: a run that read the whole
// pending index stores a heartbeat fresh for HeartbeatFor (the stages then give buys the long
// safety net); a run whose budget ran out before the ledger was read completely stores none.
func TestRunVouchesForTheSweepOnlyWhenItReadEveryPendingOperation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, adcptest.SellerOptions{})
	e.newOp(workflow.StatusSubmitted, e.sellerTask("hb"), nil)
	ctx := context.Background()

	cfg := e.cfg()
	start := e.clock.Now()
	cfg.Deadline = func(context.Context) time.Time { return start } // out of budget at once
	if sum := e.run(cfg); !sum.Partial {
		t.Fatalf("run %+v, want a partial read", sum)
	}
	if h, err := e.store.GetSweepHeartbeat(ctx); err != nil || h.Fresh(e.clock.Now()) || !h.At.IsZero() {
		t.Fatalf("after a partial run: heartbeat %+v, %v; want none", h, err)
	}

	cfg = e.cfg()
	cfg.HeartbeatFor = 3 * time.Minute
	if sum := e.run(cfg); sum.Partial {
		t.Fatalf("run %+v, want a complete read", sum)
	}
	h, err := e.store.GetSweepHeartbeat(ctx)
	if err != nil || !h.Fresh(e.clock.Now()) || h.Until.Sub(h.At) != 3*time.Minute {
		t.Fatalf("after a complete run: heartbeat %+v, %v; want one fresh for 3 min", h, err)
	}
	e.clock.Advance(3 * time.Minute)
	if h.Fresh(e.clock.Now()) {
		t.Fatal("the heartbeat still vouches for the sweep after HeartbeatFor with no run")
	}
}

// TestShardBudgetBoundsOneSellersPass: a seller's pass (a shard) stops at ShardBudget even
// when the run's own budget is far off, keeps its list cursor, and the next run resumes it.
func TestShardBudgetBoundsOneSellersPass(t *testing.T) {
	t.Parallel()
	e := newEnv(t, adcptest.SellerOptions{})
	for i := range 5 {
		e.newOp(workflow.StatusSubmitted, e.sellerTask("s"+string(rune('a'+i))), nil)
	}
	e.api.beforeList = func() { e.clock.Advance(time.Minute) } // every page costs a minute
	cfg := e.cfg()                                             // the run's budget: an hour
	cfg.PageSize = 2
	cfg.ShardBudget = 90 * time.Second

	if sum := e.run(cfg); !slices.Equal(sum.Incomplete, []string{sellerID}) || len(sum.Reconciled) != 0 {
		t.Fatalf("first run %+v, want the seller's pass stopped by the shard budget", sum)
	}
	if n := len(e.seller.CallsTo("list_tasks")); n != 2 {
		t.Fatalf("%d pages before the shard budget ran out, want 2", n)
	}
	if p, err := e.store.GetProgress(context.Background(), sellerID); err != nil || p.ListCursor != "off:4" {
		t.Fatalf("stored progress %+v, %v; want the list cursor off:4", p, err)
	}
	if sum := e.run(cfg); !slices.Equal(sum.Reconciled, []string{sellerID}) {
		t.Fatalf("second run %+v, want the pass resumed and completed", sum)
	}
	if calls := e.seller.CallsTo("list_tasks"); len(calls) != 3 || !strings.Contains(string(calls[2].Arguments), `"cursor":"off:4"`) {
		t.Fatalf("resumed listing: %d calls", len(calls))
	}
}
