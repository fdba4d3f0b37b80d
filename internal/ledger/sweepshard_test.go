package ledger_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/buyflow/buyflow/internal/clocktest"
	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/workflow"
)

// pendingOf lists every pending operation of seller, page by page, by id.
func pendingOf(t *testing.T, s *ledger.Store, seller string, limit int) []string {
	t.Helper()
	var ids []string
	cursor := ""
	for range 100 {
		page, err := s.ListPendingBySeller(context.Background(), seller, limit, cursor)
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range page.Items {
			if op.SellerID != seller || !op.Status.Pending() {
				t.Errorf("listed %s of %s in %s", op.ID, op.SellerID, op.Status)
			}
			ids = append(ids, op.ID)
		}
		if cursor = page.Cursor; cursor == "" {
			slices.Sort(ids) // kumo's index order is not AWS's; the order is no promise
			return ids
		}
	}
	t.Fatal("the listing never ended")
	return nil
}

// The per-seller index holds a seller's operations while they are pending, whatever write
// moved them, and drops them once they end (completed: the live list takes them) or fail.
func TestListPendingBySellerFollowsTheStatus(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	for _, id := range []string{"a", "b", "c", "done", "failed"} {
		mustCreate(t, s, newOp(id))
	}
	other := newOp("other")
	other.SellerID = "seller-2"
	mustCreate(t, s, other)
	move := func(id string, to ...workflow.Status) {
		t.Helper()
		for _, st := range to {
			if _, err := s.Transition(ctx, "acme", id, st, record.AnyVersion, record.Patch{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	move("a", workflow.StatusCreating, workflow.StatusSubmitted, workflow.StatusWorking)
	taskID := "task-b"
	if _, err := s.UpdateFields(ctx, "acme", "b", record.AnyVersion, record.Patch{SellerTaskID: &taskID}); err != nil {
		t.Fatal(err)
	}
	move("done", workflow.StatusCreating, workflow.StatusCompleted)
	move("failed", workflow.StatusFailed)

	if got, want := pendingOf(t, s, "seller-1", 2), []string{"a", "b", "c"}; !slices.Equal(got, want) {
		t.Errorf("seller-1's pending operations, 2 a page: %v, want %v", got, want)
	}
	if got := pendingOf(t, s, "seller-2", 0); !slices.Equal(got, []string{"other"}) {
		t.Errorf("seller-2's pending operations: %v, want [other]", got)
	}
	if got := pendingOf(t, s, "seller-3", 0); len(got) != 0 {
		t.Errorf("a seller with nothing pending lists %v", got)
	}
	if _, err := s.ListPendingBySeller(ctx, "seller-1", 1, "bm90IGEgY3Vyc29y"); !errors.Is(err, record.ErrInvalidCursor) {
		t.Errorf("a forged cursor: %v, want ErrInvalidCursor", err)
	}
}

// Operations pending before the index existed carry no gsi3 keys: the backfill indexes them,
// a bounded scan per call, and none that ended.
func TestBackfillSellerIndexCoversTheOperationsPendingBeforeIt(t *testing.T) {
	t.Parallel()
	client, table := dynamotest.Start(t)
	s := ledger.New(client, table)
	s.Now = clocktest.At(time.Date(2099, 1, 1, 12, 0, 0, 0, time.UTC)).Now
	ctx := context.Background()
	unindex := func(id string) {
		t.Helper()
		_, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table),
			Key: map[string]types.AttributeValue{
				ledger.AttrPK: &types.AttributeValueMemberS{Value: "TENANT#acme#OP#" + id},
				ledger.AttrSK: &types.AttributeValueMemberS{Value: "OP"}},
			UpdateExpression: aws.String("REMOVE gsi3pk, gsi3sk")})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"old-1", "old-2", "old-3", "old-4", "ended", "new"} {
		mustCreate(t, s, newOp(id))
	}
	for _, id := range []string{"old-3", "old-4"} {
		if _, err := s.Transition(ctx, "acme", id, workflow.StatusCheckingGovernance, record.AnyVersion, record.Patch{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"old-1", "old-2", "old-3", "old-4", "ended"} {
		unindex(id)
	}
	if _, err := s.Transition(ctx, "acme", "ended", workflow.StatusFailed, record.AnyVersion, record.Patch{}); err != nil {
		t.Fatal(err)
	}
	if got := pendingOf(t, s, "seller-1", 0); !slices.Equal(got, []string{"new"}) {
		t.Fatalf("before the backfill: %v, want only [new]", got)
	}

	added, calls, done := 0, 0, false
	for !done {
		if calls++; calls > 100 {
			t.Fatal("the backfill never finished")
		}
		n, d, err := s.BackfillSellerIndex(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		added, done = added+n, d
	}
	if added != 4 || calls < 4 {
		t.Errorf("the backfill added %d in %d calls, want 4 in at least 4 (scans of 1 item)", added, calls)
	}
	if got, want := pendingOf(t, s, "seller-1", 0), []string{"new", "old-1", "old-2", "old-3", "old-4"}; !slices.Equal(got, want) {
		t.Errorf("after the backfill: %v, want %v", got, want)
	}
	if n, d, err := s.BackfillSellerIndex(ctx, 1); n != 0 || !d || err != nil {
		t.Errorf("a finished backfill: %d, %v, %v; want 0, done", n, d, err)
	}
}

// A shard's report counts for the plan it was handed out by, and for no later one.
func TestSweepPlanCountsTheShardsOfTheStoredPlanOnly(t *testing.T) {
	t.Parallel()
	s, clk := newStore(t)
	ctx := context.Background()
	if p, err := s.GetSweepPlan(ctx); err != nil || p.Complete() {
		t.Fatalf("no plan: %+v, %v; want an incomplete zero plan", p, err)
	}
	if err := s.PutSweepPlan(ctx, record.SweepPlan{ID: "p1", At: clk.Now(), Shards: 2}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if p, ok, err := s.ReportShard(ctx, "p1"); !ok || err != nil || p.Reported != i+1 || p.Shards != 2 {
			t.Fatalf("report %d to the stored plan: %+v, %v, %v", i+1, p, ok, err)
		}
	}
	p, err := s.GetSweepPlan(ctx)
	if err != nil || !p.Complete() || p.Reported != 2 || !p.At.Equal(clk.Now()) {
		t.Fatalf("after both shards: %+v, %v", p, err)
	}
	if err := s.PutSweepPlan(ctx, record.SweepPlan{ID: "p2", At: clk.Now(), Shards: 1}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := s.ReportShard(ctx, "p1"); ok || err != nil {
		t.Errorf("a late shard of p1 counted for p2: %v, %v", ok, err)
	}
	if p, err := s.GetSweepPlan(ctx); err != nil || p.Complete() {
		t.Errorf("p2 with no shard reported: %+v, %v", p, err)
	}
}
