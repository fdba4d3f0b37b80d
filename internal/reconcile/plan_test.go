package reconcile_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/adcptest"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/reconcile"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/registry"
	"github.com/buyflow/buyflow/internal/workflow"
)

// recordingDispatcher keeps the shards a planner hands out, for the test to run as a worker.
type recordingDispatcher struct {
	mu     sync.Mutex
	calls  int
	shards []reconcile.ShardMessage
}

func (d *recordingDispatcher) Dispatch(_ context.Context, shards []reconcile.ShardMessage) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls++
	d.shards = append(d.shards, shards...)
	return nil
}

func (d *recordingDispatcher) take() []reconcile.ShardMessage {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := d.shards
	d.shards = nil
	return out
}

// The planner hands each seller one shard and sweeps nothing itself; a worker's shard sweeps
// its seller from the per-seller index; the heartbeat comes only once every shard of the plan
// reported, and a plan whose shards still run holds off the next one until PlanTimeout.
func TestPlanHandsEachSellerOneShardAndTheLastShardVouches(t *testing.T) {
	t.Parallel()
	e := newEnv(t, adcptest.SellerOptions{})
	ctx := context.Background()
	task := e.sellerTask("fan")
	op := e.newOp(workflow.StatusSubmitted, task, nil)
	if err := e.seller.Finish(task, "completed"); err != nil {
		t.Fatal(err)
	}
	d := &recordingDispatcher{}
	cfg := e.cfg()
	cfg.Sellers = func(context.Context) ([]string, error) { return []string{sellerID, "seller-idle", sellerID}, nil }
	cfg.Dispatcher = d
	svc := e.svc(cfg)
	heartbeat := func() bool {
		t.Helper()
		h, err := e.store.GetSweepHeartbeat(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return h.Fresh(e.clock.Now())
	}

	sum, err := svc.Handle(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	shards := d.take()
	want := []reconcile.ShardMessage{{Plan: sum.Plan, Seller: sellerID}, {Plan: sum.Plan, Seller: "seller-idle"}}
	if sum.Plan == "" || sum.Shards != 2 || !slices.Equal(shards, want) {
		t.Fatalf("plan %+v handed out %+v; want one shard per seller: %+v", sum, shards, want)
	}
	if n := len(e.seller.CallsTo("list_tasks")) + len(e.seller.CallsTo("get_task_status")); n != 0 || e.op(op.ID).Status != workflow.StatusSubmitted {
		t.Fatalf("the planner called the seller %d times itself", n)
	}
	if heartbeat() {
		t.Fatal("a heartbeat before any shard ran")
	}
	if again, err := svc.Plan(ctx); err != nil || !again.Waiting || again.Plan != "" || len(d.take()) != 0 {
		t.Fatalf("a plan while the last one's shards run: %+v, %v; want none (waiting)", again, err)
	}

	got, err := svc.Shard(ctx, shards[0])
	if err != nil || !slices.Equal(got.Reconciled, []string{sellerID}) || got.Pending[string(workflow.StatusSubmitted)] != 1 {
		t.Fatalf("shard of %s: %+v, %v", sellerID, got, err)
	}
	if e.op(op.ID).Status != workflow.StatusCompleted || len(e.completed()) != 1 {
		t.Fatal("the shard did not record the task the seller completed")
	}
	if heartbeat() {
		t.Fatal("a heartbeat with one shard of two reported")
	}
	if got, err := svc.Shard(ctx, shards[1]); err != nil || len(got.Reconciled) != 0 || len(got.Failed) != 0 {
		t.Fatalf("shard of a seller with nothing pending: %+v, %v", got, err)
	}
	if !heartbeat() {
		t.Fatal("no heartbeat once every shard of the plan reported")
	}

	// A plan one of whose shards never reports holds the next one off for PlanTimeout only,
	// and that shard, run late, counts for nothing.
	cfg.PlanTimeout = time.Minute
	svc = e.svc(cfg)
	first, err := svc.Plan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	late := d.take()
	e.clock.Advance(time.Minute)
	second, err := svc.Plan(ctx)
	if err != nil || second.Waiting || second.Plan == first.Plan || len(d.take()) != 2 {
		t.Fatalf("a plan after the last one timed out: %+v, %v", second, err)
	}
	e.clock.Advance(10 * time.Minute) // the heartbeat of the first plan is long stale
	for _, m := range late {
		if _, err := svc.Shard(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if heartbeat() {
		t.Fatal("late shards of a replaced plan stored a heartbeat")
	}
}

// SellersOf keeps the registry's sellers, disabled ones too (their open buys still finish),
// and no governance agent.
func TestSellersOfListsEverySellerOfTheRegistry(t *testing.T) {
	t.Parallel()
	all := func(context.Context) ([]registry.Record, error) {
		return []registry.Record{
			{Agent: adcp.Agent{ID: "gov", Role: adcp.RoleGovernance}},
			{Agent: adcp.Agent{ID: "s1", Role: adcp.RoleSeller}},
			{Agent: adcp.Agent{ID: "s2", Role: adcp.RoleSeller}, Disabled: true},
		}, nil
	}
	got, err := reconcile.SellersOf(all)(context.Background())
	if err != nil || !slices.Equal(got, []string{"s1", "s2"}) {
		t.Fatalf("sellers %v, %v; want [s1 s2]", got, err)
	}
	boom := errors.New("registry unreadable")
	if _, err := reconcile.SellersOf(func(context.Context) ([]registry.Record, error) { return nil, boom })(context.Background()); !errors.Is(err, boom) {
		t.Fatalf("an unreadable registry: %v", err)
	}
}

// An operation pending since before the per-seller index (no gsi3 keys) is swept all the same:
// the plan backfills the index before it hands out shards, and vouches for the sweep only
// once the backfill is done.
func TestOperationsPendingBeforeTheIndexAreSwept(t *testing.T) {
	t.Parallel()
	e := newEnv(t, adcptest.SellerOptions{})
	ctx := context.Background()
	task := e.sellerTask("old")
	op := e.newOp(workflow.StatusSubmitted, task, nil)
	_, err := e.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(e.table),
		Key: map[string]types.AttributeValue{
			ledger.AttrPK: &types.AttributeValueMemberS{Value: "TENANT#" + tenant + "#OP#" + op.ID},
			ledger.AttrSK: &types.AttributeValueMemberS{Value: "OP"}},
		UpdateExpression: aws.String("REMOVE gsi3pk, gsi3sk")})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.seller.Finish(task, "completed"); err != nil {
		t.Fatal(err)
	}
	if sum := e.run(e.cfg()); sum.Pending[string(workflow.StatusSubmitted)] != 1 || sum.Partial {
		t.Fatalf("run %+v; want the old operation read and the index complete", sum)
	}
	if e.op(op.ID).Status != workflow.StatusCompleted {
		t.Fatal("the operation pending before the index was not swept")
	}
	if h, err := e.store.GetSweepHeartbeat(ctx); err != nil || !h.Fresh(e.clock.Now()) {
		t.Fatalf("heartbeat %+v, %v; want one", h, err)
	}
}

// listOrder records which sellers' listings were asked for, in order; each costs a minute.
type listOrder struct {
	reconcile.AdCP
	advance func()
	mu      sync.Mutex
	sellers []string
}

func (o *listOrder) ListTool(ctx context.Context, agentID string) (string, error) {
	o.mu.Lock()
	o.sellers = append(o.sellers, agentID)
	o.mu.Unlock()
	o.advance()
	return o.AdCP.ListTool(ctx, agentID)
}

// Run sweeps the sellers least recently completed first: when its deadline leaves room for one
// shard, the seller whose last pass completed earlier (here: never) goes before the other,
// whatever their names.
func TestRunSweepsTheLeastRecentlyCompletedSellerFirst(t *testing.T) {
	t.Parallel()
	e := newEnv(t, adcptest.SellerOptions{})
	ctx := context.Background()
	const later = "seller-b" // not in the AdCP registry: its pass fails, after its minute
	e.newOp(workflow.StatusSubmitted, e.sellerTask("first"), nil)
	e.newOp(workflow.StatusSubmitted, e.sellerTask("second"), func(op *record.Operation) { op.SellerID = later })
	if err := e.store.PutProgress(ctx, record.SweepProgress{Seller: sellerID, LastPass: e.clock.Now(), Fence: 1}); err != nil {
		t.Fatal(err)
	}
	order := &listOrder{AdCP: e.api, advance: func() { e.clock.Advance(time.Minute) }}
	cfg := e.cfg()
	cfg.AdCP = order
	cfg.Sellers = func(context.Context) ([]string, error) { return []string{sellerID, later}, nil }
	cfg.SellerConcurrency = 1
	start := e.clock.Now()
	cfg.Deadline = func(context.Context) time.Time { return start.Add(30 * time.Second) }
	sum := e.run(cfg)
	if !slices.Equal(order.sellers, []string{later}) || !slices.Equal(sum.Deferred, []string{sellerID}) {
		t.Fatalf("listings %v, run %+v; want %s (never completed) first and %s (completed recently) deferred",
			order.sellers, sum, later, sellerID)
	}
}

// slowBackfill is a ledger whose index backfill never finishes and costs clock time per call.
type slowBackfill struct {
	*ledger.Store
	advance func()
	calls   atomic.Int32
}

func (l *slowBackfill) BackfillSellerIndex(context.Context, int) (int, bool, error) {
	l.calls.Add(1)
	l.advance()
	return 0, false, nil
}

// A backfill that takes longer than a plan's share of the run (a large table on the first
// deploy) is continued by later plans: this one still hands out its shards, which sweep what
// is indexed, and stores no heartbeat.
func TestALongBackfillLeavesTheShardsTheirTime(t *testing.T) {
	t.Parallel()
	e := newEnv(t, adcptest.SellerOptions{})
	task := e.sellerTask("during")
	op := e.newOp(workflow.StatusSubmitted, task, nil)
	if err := e.seller.Finish(task, "completed"); err != nil {
		t.Fatal(err)
	}
	slow := &slowBackfill{Store: e.store, advance: func() { e.clock.Advance(4 * time.Second) }}
	cfg := e.cfg() // the run's budget: an hour
	cfg.Ledger = slow
	sum := e.run(cfg)
	if n := slow.calls.Load(); n < 2 || n > 4 {
		t.Errorf("%d backfill calls of 4 s in one plan, want the plan's 10 s of them", n)
	}
	if !sum.Partial || !slices.Equal(sum.Reconciled, []string{sellerID}) || e.op(op.ID).Status != workflow.StatusCompleted {
		t.Fatalf("run %+v: want the shard swept while the backfill goes on (partial)", sum)
	}
	if h, err := e.store.GetSweepHeartbeat(context.Background()); err != nil || h.Fresh(e.clock.Now()) {
		t.Fatalf("heartbeat %+v, %v: none while the backfill is not done", h, err)
	}
}
