package ledger_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/workflow"
)

func newOp(id string) record.Operation {
	return record.Operation{
		ID: id, Tenant: "acme", SellerID: "seller-1", PONumber: "PO-" + id,
		BudgetTotal: "1500.00", Currency: "USD", Request: json.RawMessage(`{"po_number":"PO"}`),
	}
}

func mustCreate(t *testing.T, s *ledger.Store, op record.Operation) *record.Operation {
	t.Helper()
	got, err := s.CreateOperation(context.Background(), op)
	if err != nil {
		t.Fatalf("create %s: %v", op.ID, err)
	}
	return got
}

func TestCreateOperation(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	created := mustCreate(t, s, newOp("op-1"))
	if created.Version != 1 || created.Status != workflow.StatusRequested {
		t.Fatalf("created = %+v", created)
	}
	got, err := s.GetOperation(ctx, "acme", "op-1")
	if err != nil {
		t.Fatal(err)
	}
	if got.BudgetTotal != "1500.00" || string(got.Request) != `{"po_number":"PO"}` || !got.CreatedAt.Equal(created.CreatedAt) {
		t.Fatalf("round trip: %+v", got)
	}
	_, err = s.CreateOperation(ctx, newOp("op-1"))
	var ce *record.ConflictError
	if !errors.As(err, &ce) || ce.Operation == nil || ce.Operation.ID != "op-1" || !errors.Is(err, record.ErrConflict) {
		t.Fatalf("duplicate create: err = %v", err)
	}
	bad := newOp("op#2")
	if _, err := s.CreateOperation(ctx, bad); !errors.Is(err, record.ErrInvalidArgument) {
		t.Fatalf("id with '#': err = %v", err)
	}
}

func TestTransitionConflicts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tests := []struct {
		name     string
		setup    []workflow.Status // transitions applied first
		to       workflow.Status
		expected int64
		kind     record.ConflictKind
	}{
		{"legal move with the right version", nil, workflow.StatusCheckingGovernance, 1, ""},
		{"legal move with any version", nil, workflow.StatusCreating, record.AnyVersion, ""},
		{"version moved", []workflow.Status{workflow.StatusCheckingGovernance}, workflow.StatusCreating, 1, record.ConflictVersion},
		{"illegal from current status", nil, workflow.StatusWorking, record.AnyVersion, record.ConflictIllegal},
		{"already terminal", []workflow.Status{workflow.StatusCreating, workflow.StatusCompleted}, workflow.StatusFailed, record.AnyVersion, record.ConflictTerminal},
		{"late working never overwrites completed", []workflow.Status{workflow.StatusCreating, workflow.StatusCompleted}, workflow.StatusWorking, 3, record.ConflictTerminal},
	}
	s, _ := newStore(t)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := fmt.Sprintf("op-%d", i)
			mustCreate(t, s, newOp(id))
			for _, st := range tt.setup {
				if _, err := s.Transition(ctx, "acme", id, st, record.AnyVersion, record.Patch{}); err != nil {
					t.Fatalf("setup %s: %v", st, err)
				}
			}
			before, _ := s.GetOperation(ctx, "acme", id)
			got, err := s.Transition(ctx, "acme", id, tt.to, tt.expected, record.Patch{MediaBuyID: ptr("mb-1")})
			if tt.kind == "" {
				if err != nil {
					t.Fatalf("transition: %v", err)
				}
				if got.Status != tt.to || got.Version != before.Version+1 || got.MediaBuyID != "mb-1" {
					t.Fatalf("after transition: %+v", got)
				}
				return
			}
			var te *record.TransitionError
			if !errors.As(err, &te) || te.Kind != tt.kind || !errors.Is(err, record.ErrConflict) {
				t.Fatalf("err = %v, want %s conflict", err, tt.kind)
			}
			if te.Current.Status != before.Status || te.Current.Version != before.Version {
				t.Fatalf("conflict reports %s v%d, want %s v%d", te.Current.Status, te.Current.Version, before.Status, before.Version)
			}
			after, _ := s.GetOperation(ctx, "acme", id)
			if after.Version != before.Version || after.Status != before.Status || after.MediaBuyID != "" {
				t.Fatalf("refused transition changed the item: %+v", after)
			}
		})
	}
}

// TestTransitionConcurrent races 50 writers over one operation: each reads, picks a legal next
// status and transitions with the version it read. Every success must be counted in the version
// (no lost update) and nothing may leave a terminal status but by the one legal move,
// completed → canceled.
func TestTransitionConcurrent(t *testing.T) {
	dynamotest.SkipOnMoto(t, motoNotIsolated)
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	mustCreate(t, s, newOp("op-race"))
	var (
		successes atomic.Int64
		wg        sync.WaitGroup
		mu        sync.Mutex
		failures  []error
		terminal  []workflow.Status
	)
	start := make(chan struct{})
	for g := range 50 {
		wg.Go(func() {
			<-start
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for range 4 {
				cur, err := s.GetOperation(ctx, "acme", "op-race")
				if err != nil {
					mu.Lock()
					failures = append(failures, err)
					mu.Unlock()
					return
				}
				next := workflow.Transitions[cur.Status]
				if len(next) == 0 {
					next = []workflow.Status{workflow.StatusWorking} // must be refused
				}
				// Mostly live statuses, so the race runs for a while before it ends.
				to := next[rng.IntN(len(next))]
				if to.Terminal() && rng.IntN(20) != 0 {
					to = next[0]
				}
				_, err = s.Transition(ctx, "acme", "op-race", to, cur.Version, record.Patch{})
				var te *record.TransitionError
				switch {
				case err == nil:
					successes.Add(1)
					if to.Terminal() {
						mu.Lock()
						terminal = append(terminal, to)
						mu.Unlock()
					}
				case errors.As(err, &te):
					// Only a status with no way out must refuse as terminal: a completed one may
					// still lose a race to cancel it on its version.
					if len(workflow.Transitions[cur.Status]) == 0 && te.Kind != record.ConflictTerminal {
						mu.Lock()
						failures = append(failures, fmt.Errorf("from terminal %s: kind %s", cur.Status, te.Kind))
						mu.Unlock()
					}
				default:
					mu.Lock()
					failures = append(failures, err)
					mu.Unlock()
				}
			}
		})
	}
	close(start)
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("failures: %v", failures)
	}
	final, err := s.GetOperation(ctx, "acme", "op-race")
	if err != nil {
		t.Fatal(err)
	}
	if final.Version != 1+successes.Load() {
		t.Fatalf("version %d after %d successful transitions: lost update", final.Version, successes.Load())
	}
	// The one legal move out of a terminal status is completed → canceled (a compensation), so
	// the race may reach two terminal statuses, in that order only; the slice's order is the
	// order the writers took the mutex, not the order of their writes, so it is not checked.
	switch {
	case len(terminal) > 2:
		t.Fatalf("left a terminal status: reached %v", terminal)
	case len(terminal) == 2:
		if !slices.Contains(terminal, workflow.StatusCompleted) || !slices.Contains(terminal, workflow.StatusCanceled) {
			t.Fatalf("left a terminal status: reached %v", terminal)
		}
		if final.Status != workflow.StatusCanceled {
			t.Fatalf("final status %s after reaching %v, want canceled", final.Status, terminal)
		}
	case len(terminal) == 1 && final.Status != terminal[0]:
		t.Fatalf("final status %s, want the terminal %s", final.Status, terminal[0])
	}
	// Every success wrote its event in the same transaction.
	var events int
	cursor := ""
	for {
		page, err := s.ListEvents(ctx, "acme", "op-race", 200, cursor)
		if err != nil {
			t.Fatal(err)
		}
		events += len(page.Items)
		if cursor = page.Cursor; cursor == "" {
			break
		}
	}
	if int64(events) != 1+successes.Load() {
		t.Fatalf("%d events for 1 create + %d transitions", events, successes.Load())
	}
	t.Logf("%d successful transitions, final %s v%d", successes.Load(), final.Status, final.Version)

	// Phase 2: end the operation, then 50 concurrent late updates (the "late working" webhook)
	// must all be refused as terminal and change nothing.
	if !final.Status.Terminal() {
		if final, err = s.Transition(ctx, "acme", "op-race", workflow.StatusCanceled, final.Version, record.Patch{}); err != nil {
			t.Fatal(err)
		}
	}
	var refused atomic.Int64
	for g := range 50 {
		wg.Go(func() {
			to := []workflow.Status{workflow.StatusWorking, workflow.StatusCompleted, workflow.StatusFailed}[g%3]
			_, err := s.Transition(ctx, "acme", "op-race", to, record.AnyVersion, record.Patch{})
			var te *record.TransitionError
			if errors.As(err, &te) && te.Kind == record.ConflictTerminal {
				refused.Add(1)
			}
		})
	}
	wg.Wait()
	after, err := s.GetOperation(ctx, "acme", "op-race")
	if err != nil {
		t.Fatal(err)
	}
	if refused.Load() != 50 || after.Status != final.Status || after.Version != final.Version {
		t.Fatalf("late updates: %d/50 refused as terminal; %s v%d became %s v%d",
			refused.Load(), final.Status, final.Version, after.Status, after.Version)
	}
}

func TestCrossTenantIsNotFound(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	mustCreate(t, s, newOp("op-1"))
	if _, err := s.GetOperation(ctx, "globex", "op-1"); !errors.Is(err, record.ErrNotFound) {
		t.Errorf("get: err = %v", err)
	}
	if _, err := s.Transition(ctx, "globex", "op-1", workflow.StatusCreating, record.AnyVersion, record.Patch{}); !errors.Is(err, record.ErrNotFound) {
		t.Errorf("transition: err = %v", err)
	}
	if _, err := s.ListEvents(ctx, "globex", "op-1", 10, ""); !errors.Is(err, record.ErrNotFound) {
		t.Errorf("events: err = %v", err)
	}
	if _, err := s.SetTaskToken(ctx, "globex", "op-1", "tok"); !errors.Is(err, record.ErrNotFound) {
		t.Errorf("set task token: err = %v", err)
	}
	if _, err := s.GetIntent(ctx, "globex", "op-1", "create_media_buy"); !errors.Is(err, record.ErrNotFound) {
		t.Errorf("intent: err = %v", err)
	}
	page, err := s.ListOperations(ctx, "globex", record.ListOptions{})
	if err != nil || len(page.Items) != 0 {
		t.Errorf("list: %v items, err = %v", len(page.Items), err)
	}
	// A cursor from acme's listing is refused for globex.
	mustCreate(t, s, newOp("op-2"))
	p, err := s.ListOperations(ctx, "acme", record.ListOptions{Limit: 1})
	if err != nil || p.Cursor == "" {
		t.Fatalf("acme page: %+v, %v", p, err)
	}
	if _, err := s.ListOperations(ctx, "globex", record.ListOptions{Cursor: p.Cursor}); !errors.Is(err, record.ErrInvalidCursor) {
		t.Errorf("foreign cursor: err = %v", err)
	}
	if _, err := s.ListOperations(ctx, "acme", record.ListOptions{Cursor: "not-base64!"}); !errors.Is(err, record.ErrInvalidCursor) {
		t.Errorf("garbage cursor: err = %v", err)
	}
	// The original tenant still sees everything.
	if _, err := s.GetOperation(ctx, "acme", "op-1"); err != nil {
		t.Errorf("own get: %v", err)
	}
}

func TestTaskToken(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	mustCreate(t, s, newOp("op-1"))
	op, err := s.SetTaskToken(ctx, "acme", "op-1", "token-1")
	if err != nil || op.TaskToken != "token-1" {
		t.Fatalf("set: %+v, %v", op, err)
	}
	b, _ := json.Marshal(op.View())
	if strings.Contains(string(b), "token-1") || strings.Contains(string(b), "task_token") {
		t.Fatalf("view leaks the task token: %s", b)
	}
	page, _ := s.ListOperations(ctx, "acme", record.ListOptions{})
	b, _ = json.Marshal(page)
	if strings.Contains(string(b), "token-1") {
		t.Fatalf("listing leaks the task token: %s", b)
	}
	if _, err := s.SetTaskToken(ctx, "acme", "op-1", "token-2"); err != nil {
		t.Fatal(err)
	}
	if err := s.ClearTaskToken(ctx, "acme", "op-1", "token-1"); !errors.Is(err, record.ErrTokenMismatch) || !errors.Is(err, record.ErrConflict) {
		t.Fatalf("clear stale token: err = %v", err)
	}
	if err := s.ClearTaskToken(ctx, "acme", "op-1", "token-2"); err != nil {
		t.Fatalf("clear: %v", err)
	}
	got, _ := s.GetOperation(ctx, "acme", "op-1")
	if got.TaskToken != "" {
		t.Fatalf("token still stored: %q", got.TaskToken)
	}
	if err := s.ClearTaskToken(ctx, "acme", "op-1", "token-2"); !errors.Is(err, record.ErrTokenMismatch) {
		t.Fatalf("second clear: err = %v", err)
	}
}

func TestListOperationsPaginationAndFilters(t *testing.T) {
	t.Parallel()
	s, clk := newStore(t)
	ctx := context.Background()
	// 9 operations, one per second: sellers alternate, every third one is creating.
	for i := range 9 {
		op := newOp(fmt.Sprintf("op-%d", i))
		op.SellerID = []string{"seller-a", "seller-b"}[i%2]
		mustCreate(t, s, op)
		if i%3 == 0 {
			if _, err := s.Transition(ctx, "acme", op.ID, workflow.StatusCreating, 1, record.Patch{}); err != nil {
				t.Fatal(err)
			}
		}
		clk.Advance(time.Second)
	}
	other := newOp("op-x")
	other.Tenant = "globex"
	mustCreate(t, s, other)

	tests := []struct {
		name string
		opts record.ListOptions
		want []string // newest first
	}{
		{"all", record.ListOptions{Limit: 2}, []string{"op-8", "op-7", "op-6", "op-5", "op-4", "op-3", "op-2", "op-1", "op-0"}},
		{"by seller", record.ListOptions{Limit: 2, SellerID: "seller-b"}, []string{"op-7", "op-5", "op-3", "op-1"}},
		{"by status", record.ListOptions{Limit: 2, Status: workflow.StatusCreating}, []string{"op-6", "op-3", "op-0"}},
		{"by seller and status", record.ListOptions{Limit: 1, SellerID: "seller-a", Status: workflow.StatusCreating}, []string{"op-6", "op-0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			opts := tt.opts
			for pages := 0; ; pages++ {
				if pages > 20 {
					t.Fatal("pagination does not end")
				}
				page, err := s.ListOperations(ctx, "acme", opts)
				if err != nil {
					t.Fatal(err)
				}
				if len(page.Items) > opts.Limit {
					t.Fatalf("page of %d items over limit %d", len(page.Items), opts.Limit)
				}
				for _, v := range page.Items {
					got = append(got, v.ID)
				}
				if page.Cursor == "" {
					break
				}
				opts.Cursor = page.Cursor
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestListPendingIsSparse(t *testing.T) {
	t.Parallel()
	s, clk := newStore(t)
	ctx := context.Background()
	for _, id := range []string{"op-1", "op-2", "op-3"} {
		mustCreate(t, s, newOp(id))
		if _, err := s.Transition(ctx, "acme", id, workflow.StatusCreating, 1, record.Patch{}); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Second)
	}
	if _, err := s.Transition(ctx, "acme", "op-2", workflow.StatusFailed, record.AnyVersion, record.Patch{Reason: ptr("seller down")}); err != nil {
		t.Fatal(err)
	}
	if ids := pendingOf(t, s, "seller-1", 10); !slices.Equal(ids, []string{"op-1", "op-3"}) {
		t.Fatalf("pending = %v, want [op-1 op-3] (the terminal one gone)", ids)
	}
	failed, _ := s.GetOperation(ctx, "acme", "op-2")
	if failed.Reason != "seller down" {
		t.Fatalf("reason = %q", failed.Reason)
	}
}

func ptr[T any](v T) *T { return &v }

func TestUpdateFields(t *testing.T) {
	t.Parallel()
	s, clk := newStore(t)
	ctx := context.Background()
	mustCreate(t, s, newOp("op-1"))
	if _, err := s.Transition(ctx, "acme", "op-1", workflow.StatusWorking, record.AnyVersion, record.Patch{}); !errors.Is(err, record.ErrConflict) {
		t.Fatalf("requested → working must be illegal: %v", err)
	}
	if _, err := s.Transition(ctx, "acme", "op-1", workflow.StatusCreating, 1, record.Patch{}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	got, err := s.UpdateFields(ctx, "acme", "op-1", 2, record.Patch{SellerTaskID: ptr("task-9"), Actor: "poll"})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != workflow.StatusCreating || got.Version != 3 || got.SellerTaskID != "task-9" || !got.UpdatedAt.Equal(clk.Now()) {
		t.Fatalf("after update: %+v", got)
	}
	var te *record.TransitionError
	if _, err := s.UpdateFields(ctx, "acme", "op-1", 2, record.Patch{}); !errors.As(err, &te) || te.Kind != record.ConflictVersion {
		t.Fatalf("stale version: %v", err)
	}
	if _, err := s.Transition(ctx, "acme", "op-1", workflow.StatusCanceled, 3, record.Patch{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateFields(ctx, "acme", "op-1", record.AnyVersion, record.Patch{MediaBuyID: ptr("x")}); !errors.As(err, &te) || te.Kind != record.ConflictTerminal {
		t.Fatalf("update of a terminal operation: %v", err)
	}
	if _, err := s.UpdateFields(ctx, "globex", "op-1", record.AnyVersion, record.Patch{}); !errors.Is(err, record.ErrNotFound) {
		t.Fatalf("cross-tenant update: %v", err)
	}
	page, err := s.ListEvents(ctx, "acme", "op-1", 10, "")
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, ev := range page.Items {
		types = append(types, ev.Type)
	}
	if want := []string{"created", "transition", "update", "transition"}; !slices.Equal(types, want) {
		t.Fatalf("events %v, want %v", types, want)
	}
}

func TestLocateOperationByIDAlone(t *testing.T) {
	t.Parallel()
	client, table := dynamotest.Start(t)
	s := ledger.New(client, table)
	ctx := context.Background()
	op := newOp("op-find")
	mustCreate(t, s, op)
	got, err := s.LocateOperation(ctx, "op-find")
	if err != nil || got != (record.OperationOwner{Tenant: "acme", SellerID: op.SellerID}) || op.SellerID == "" {
		t.Fatalf("LocateOperation = %+v, %v (seller %q)", got, err, op.SellerID)
	}
	// A fresh store (another instance) reads the index; this one remembers it.
	if again, err := ledger.New(client, table).LocateOperation(ctx, "op-find"); err != nil || again != got {
		t.Fatalf("a fresh store's LocateOperation = %+v, %v", again, err)
	}
	if _, err := s.LocateOperation(ctx, "op-missing"); !errors.Is(err, record.ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
	// The id is unique across tenants: another tenant cannot create it, and learns nothing of
	// the existing operation.
	other := newOp("op-find")
	other.Tenant = "globex"
	_, err = s.CreateOperation(ctx, other)
	var ce *record.ConflictError
	if !errors.As(err, &ce) || ce.Operation != nil {
		t.Fatalf("cross-tenant create: err = %v (%+v)", err, ce)
	}
	if _, err := s.GetOperation(ctx, "globex", "op-find"); !errors.Is(err, record.ErrNotFound) {
		t.Fatalf("globex sees the operation: %v", err)
	}
}
