package ledger_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/workflow"
)

func initialBuy() record.BuyState {
	return record.BuyState{Tenant: "acme", OperationID: "op-1", MediaBuyID: "mb-1", Revision: 2, State: "active",
		BudgetTotal: "20000.50", Currency: "USD",
		Packages: []record.PackageBudget{{PackageID: "p1", Budget: "15000.00"}, {PackageID: "p2", Budget: "5000.50"}}}
}

func TestOneChangeAtATimeAndTheRevisionOnlyMovesForward(t *testing.T) {
	t.Parallel()
	s, clk := newStore(t)
	ctx := context.Background()
	if _, err := s.CreateOperation(ctx, newOp("op-1")); err != nil {
		t.Fatal(err)
	}
	ev := record.Event{Type: "modification_requested"}
	exp := clk.Now().Add(13 * time.Hour)

	got, err := s.BeginChange(ctx, initialBuy(), "chg-1", "budget", exp, ev)
	if err != nil || got.ChangeID != "chg-1" || got.Revision != 2 || len(got.Packages) != 2 || got.BudgetTotal != "20000.50" {
		t.Fatalf("first change: %+v %v", got, err)
	}
	if _, err := s.BeginChange(ctx, initialBuy(), "chg-1", "budget", exp, ev); err != nil {
		t.Fatalf("the same change begun again (a retry): %v", err)
	}
	_, err = s.BeginChange(ctx, initialBuy(), "chg-2", "pause", exp, ev)
	var refused *record.ChangeRefusedError
	if !errors.As(err, &refused) || refused.Canceled || refused.Current.ChangeID != "chg-1" || !errors.Is(err, record.ErrConflict) {
		t.Fatalf("second change in flight: %v", err)
	}

	next := initialBuy()
	next.Revision, next.BudgetTotal = 3, "22000.50"
	next.Packages[1].Budget = "7000.50"
	if _, err := s.ApplyChange(ctx, next, "chg-2", ev); !errors.Is(err, record.ErrConflict) {
		t.Fatalf("applying a change that is not in flight: %v", err)
	}
	stale := next
	stale.Revision = 1
	if _, err := s.ApplyChange(ctx, stale, "chg-1", ev); !errors.Is(err, record.ErrStaleRevision) {
		t.Fatalf("a revision below the recorded one: %v", err)
	}
	got, err = s.ApplyChange(ctx, next, "chg-1", ev)
	if err != nil || got.ChangeID != "" || got.Revision != 3 || got.BudgetTotal != "22000.50" || got.Packages[1].Budget != "7000.50" || got.LastOutcome != "applied" {
		t.Fatalf("apply: %+v %v", got, err)
	}
	if again, err := s.ApplyChange(ctx, next, "chg-1", ev); err != nil || again.Revision != 3 {
		t.Fatalf("apply retried: %+v %v", again, err)
	}

	// The initial state is only used the first time: a later change keeps the recorded one.
	got, err = s.BeginChange(ctx, initialBuy(), "chg-3", "cancel", exp, ev)
	if err != nil || got.Revision != 3 || got.BudgetTotal != "22000.50" {
		t.Fatalf("third change: %+v %v", got, err)
	}
	canceled := *got
	canceled.Revision, canceled.State = 4, record.BuyStateCanceled
	if _, err := s.ApplyChange(ctx, canceled, "chg-3", ev); err != nil {
		t.Fatal(err)
	}
	_, err = s.BeginChange(ctx, initialBuy(), "chg-4", "resume", clk.Now().Add(time.Hour), ev)
	if !errors.As(err, &refused) || !refused.Canceled {
		t.Fatalf("a change after the cancellation: %v", err)
	}
	// Every step is in the buy's timeline, once: the retried begin added none.
	page, err := s.ListEvents(ctx, "acme", "op-1", 100, "")
	mods := 0
	for _, e := range page.Items {
		if e.Type == ev.Type {
			mods++
		}
	}
	if err != nil || mods != 4 {
		t.Fatalf("timeline: %d change events, %v, want 4", mods, err)
	}
}

func TestAnEndedChangeFreesTheBuyAndAnExpiredOneStopsBlocking(t *testing.T) {
	t.Parallel()
	s, clk := newStore(t)
	ctx := context.Background()
	ev := record.Event{Type: "modification"}
	if _, err := s.BeginChange(ctx, initialBuy(), "chg-1", "budget", clk.Now().Add(time.Hour), ev); err != nil {
		t.Fatal(err)
	}
	got, err := s.EndChange(ctx, "acme", "op-1", "chg-1", "denied", "governance denied the increase", ev)
	if err != nil || got.ChangeID != "" || got.Revision != 2 || got.LastOutcome != "denied" || got.LastReason == "" {
		t.Fatalf("end: %+v %v", got, err)
	}
	if _, err := s.EndChange(ctx, "acme", "op-1", "chg-1", "denied", "again", ev); err != nil {
		t.Fatalf("ending twice: %v", err)
	}
	if _, err := s.BeginChange(ctx, initialBuy(), "chg-2", "pause", clk.Now().Add(time.Hour), ev); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Hour) // chg-2's run died and its deadline passed
	got, err = s.BeginChange(ctx, initialBuy(), "chg-3", "pause", clk.Now().Add(time.Hour), ev)
	if err != nil || got.ChangeID != "chg-3" {
		t.Fatalf("after the expiry of the change in flight: %+v %v", got, err)
	}
	if _, err := s.GetBuyState(ctx, "other", "op-1"); !errors.Is(err, record.ErrNotFound) {
		t.Fatalf("another tenant reads %v", err)
	}
}

// TestDeliverySnapshotsAreKeptOncePerAsOfNewestFirst: one snapshot per as-of; the same report
// again writes nothing; other figures for a stored as-of are the seller's correction, which
// replaces the snapshot and returns the one it replaced.
func TestDeliverySnapshotsAreKeptOncePerAsOfNewestFirst(t *testing.T) {
	t.Parallel()
	s, clk := newStore(t)
	ctx := context.Background()
	at := clk.Now()
	snap := func(hour, impressions int, spend, pacing string) record.DeliverySnapshot {
		return record.DeliverySnapshot{Tenant: "acme", OperationID: "op-1", MediaBuyID: "mb-1", AsOf: at.Add(time.Duration(hour) * time.Hour),
			Impressions: int64(impressions), Spend: spend, Pacing: pacing, Currency: "USD", Approved: "200.00"}
	}
	for i, c := range []struct {
		d               record.DeliverySnapshot
		stored          bool
		replacedImpress int64
	}{
		{snap(0, 1000, "100.00", ""), true, 0},
		{snap(1, 2000, "250.00", "1.1"), true, 0},
		{snap(1, 2000, "250.00", "1.1"), false, 0}, // sent again
		{snap(1, 2100, "250.00", "1.1"), true, 2000},
		{snap(1, 2100, "250.00", ""), true, 2100}, // the pacing withdrawn
		{snap(1, 2100, "250.00", ""), false, 0},
	} {
		stored, replaced, err := s.PutDeliverySnapshot(ctx, c.d)
		if err != nil || stored != c.stored || (replaced == nil) != (c.replacedImpress == 0) || replaced != nil && replaced.Impressions != c.replacedImpress {
			t.Fatalf("snapshot %d: stored %v, replaced %+v, %v", i, stored, replaced, err)
		}
	}
	snaps, err := s.ListDeliverySnapshots(ctx, "acme", "op-1", 10)
	if err != nil || len(snaps) != 2 || snaps[0].Spend != "250.00" || snaps[0].Impressions != 2100 || snaps[0].Pacing != "" || snaps[1].Spend != "100.00" {
		t.Fatalf("snapshots: %+v %v", snaps, err)
	}
	if other, err := s.ListDeliverySnapshots(ctx, "other", "op-1", 10); err != nil || len(other) != 0 {
		t.Fatalf("another tenant: %+v %v", other, err)
	}
}

func TestCompletedOperationsAreListedLiveUntilRetiredOrCanceled(t *testing.T) {
	t.Parallel()
	s, clk := newStore(t)
	ctx := context.Background()
	for _, id := range []string{"op-live", "op-canceled", "op-pending"} {
		mustCreate(t, s, newOp(id))
		if _, err := s.Transition(ctx, "acme", id, workflow.StatusCreating, record.AnyVersion, record.Patch{}); err != nil {
			t.Fatal(err)
		}
		if id == "op-pending" {
			continue
		}
		if _, err := s.Transition(ctx, "acme", id, workflow.StatusCompleted, record.AnyVersion, record.Patch{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Transition(ctx, "acme", "op-canceled", workflow.StatusCanceled, record.AnyVersion, record.Patch{}); err != nil {
		t.Fatal(err)
	}
	ids := func(at time.Time) []string {
		t.Helper()
		ops, err := s.ListLiveDue(ctx, at, 10)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, op := range ops {
			out = append(out, op.ID)
		}
		return out
	}
	clk.Advance(time.Second)
	if got := ids(clk.Now()); len(got) != 1 || got[0] != "op-live" {
		t.Fatalf("live and due: %v, want only op-live (the canceled and the pending ones are not live)", got)
	}
	if err := s.ScheduleDeliveryRead(ctx, "acme", "op-live", clk.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got := ids(clk.Now()); len(got) != 0 {
		t.Fatalf("after scheduling the next read in an hour: %v due now", got)
	}
	if got := ids(clk.Now().Add(2 * time.Hour)); len(got) != 1 {
		t.Fatalf("two hours later: %v, want op-live due", got)
	}
	// The mark of the last snapshot rides on the schedule's write; an empty mark keeps it.
	ops, err := s.ListLiveDue(ctx, clk.Now().Add(2*time.Hour), 10)
	if err != nil || len(ops) != 1 || !ops[0].DeliveryEntry {
		t.Fatalf("after its first schedule the buy is listed by its live entry: %+v %v", ops, err)
	}
	if err := s.ScheduleLive(ctx, ops[0], clk.Now(), "12000|2999.995"); err != nil {
		t.Fatal(err)
	}
	if err := s.ScheduleDeliveryRead(ctx, "acme", "op-live", clk.Now()); err != nil {
		t.Fatal(err)
	}
	if ops, err := s.ListLiveDue(ctx, clk.Now(), 10); err != nil || len(ops) != 1 || ops[0].DeliveryMark != "12000|2999.995" {
		t.Fatalf("the live buy's delivery mark: %+v %v", ops, err)
	}
	if err := s.MarkDeliveryPushed(ctx, "acme", "op-live"); err != nil {
		t.Fatal(err)
	}
	if ops, err := s.ListLiveDue(ctx, clk.Now(), 10); err != nil || len(ops) != 1 || !ops[0].DeliveryPushed {
		t.Fatalf("the live buy's seller pushes: %+v %v", ops, err)
	}
	if err := s.MarkDeliveryPushed(ctx, "acme", "op-canceled"); !errors.Is(err, record.ErrConflict) {
		t.Fatalf("marking a buy that is not live: %v", err)
	}
	if err := s.ScheduleDeliveryRead(ctx, "acme", "op-canceled", clk.Now()); !errors.Is(err, record.ErrConflict) {
		t.Fatalf("scheduling a canceled operation: %v", err)
	}
	if err := s.RetireLive(ctx, "acme", "op-live"); err != nil {
		t.Fatal(err)
	}
	if got := ids(clk.Now().Add(2 * time.Hour)); len(got) != 0 {
		t.Fatalf("after retiring: %v", got)
	}
	if pending := pendingOf(t, s, "seller-1", 10); len(pending) != 1 {
		t.Fatalf("the pending list still holds only the pending operation: %v", pending)
	}
}

// placed creates operation id and moves it to completed, as a buy the seller placed.
func placed(t *testing.T, s interface {
	Transition(context.Context, string, string, workflow.Status, int64, record.Patch) (*record.Operation, error)
}, id string) {
	t.Helper()
	for _, to := range []workflow.Status{workflow.StatusCreating, workflow.StatusSubmitted, workflow.StatusCompleted} {
		if _, err := s.Transition(context.Background(), "acme", id, to, record.AnyVersion, record.Patch{}); err != nil {
			t.Fatalf("move %s to %s: %v", id, to, err)
		}
	}
}

// A placed buy's status and committed budget follow its changes, conditionally: only from the
// status the caller read, a retry writes nothing twice, a cancellation is final, and the resume
// is legal only here (a plain transition to completed never resumes a paused buy).
func TestPlacedBuyFollowsItsChanges(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	mustCreate(t, s, newOp("op-1"))
	placed(t, s, "op-1")
	ch := record.Patch{Actor: "seller:seller-1", EventCurrency: "USD"}

	got, err := s.FollowChange(ctx, "acme", "op-1", workflow.StatusCompleted, workflow.StatusCompleted, "1800.00", ch)
	if err != nil || got.Status != workflow.StatusCompleted || got.BudgetTotal != "1800.00" {
		t.Fatalf("a budget change: %+v %v", got, err)
	}
	v := got.Version
	if again, err := s.FollowChange(ctx, "acme", "op-1", workflow.StatusCompleted, workflow.StatusCompleted, "1800.00", ch); err != nil || again.Version != v {
		t.Fatalf("the same change recorded again: %+v %v; want a no-op at version %d", again, err, v)
	}
	if got, err = s.FollowChange(ctx, "acme", "op-1", workflow.StatusCompleted, workflow.StatusPaused, "1800.00", ch); err != nil || got.Status != workflow.StatusPaused {
		t.Fatalf("a pause: %+v %v", got, err)
	}
	// A late completion of the buy's create task does not resume it.
	if _, err := s.Transition(ctx, "acme", "op-1", workflow.StatusCompleted, record.AnyVersion, record.Patch{}); !errors.Is(err, record.ErrConflict) {
		t.Fatalf("a plain transition of a paused buy to completed: %v, want a conflict", err)
	}
	// From a status the buy is no longer in: refused, with the buy as it is.
	_, err = s.FollowChange(ctx, "acme", "op-1", workflow.StatusCompleted, workflow.StatusCanceled, "1800.00", ch)
	var te *record.TransitionError
	if !errors.As(err, &te) || te.Current.Status != workflow.StatusPaused {
		t.Fatalf("a change recorded from a stale status: %v", err)
	}
	if got, err = s.FollowChange(ctx, "acme", "op-1", workflow.StatusPaused, workflow.StatusCompleted, "1800.00", ch); err != nil || got.Status != workflow.StatusCompleted {
		t.Fatalf("a resume: %+v %v", got, err)
	}
	if got, err = s.FollowChange(ctx, "acme", "op-1", workflow.StatusCompleted, workflow.StatusCanceled, "1800.00", ch); err != nil || got.Status != workflow.StatusCanceled {
		t.Fatalf("a cancellation: %+v %v", got, err)
	}
	if _, err := s.FollowChange(ctx, "acme", "op-1", workflow.StatusCanceled, workflow.StatusCompleted, "1800.00", ch); !errors.Is(err, record.ErrInvalidArgument) {
		t.Fatalf("a canceled buy revived: %v", err)
	}
	page, err := s.ListOperations(ctx, "acme", record.ListOptions{Status: workflow.StatusCanceled})
	if err != nil || len(page.Items) != 1 || page.Items[0].BudgetTotal != "1800.00" {
		t.Fatalf("?status=canceled: %+v %v", page.Items, err)
	}
	evs, err := s.ListEvents(ctx, "acme", "op-1", 100, "")
	if err != nil {
		t.Fatal(err)
	}
	var moves []string
	for _, e := range evs.Items {
		if e.From.Placed() {
			moves = append(moves, e.Type+":"+string(e.From)+">"+string(e.To)+" "+e.Amount+" "+e.Currency)
		}
	}
	want := []string{"update:completed>completed 1800.00 USD", "transition:completed>paused 1800.00 USD",
		"transition:paused>completed 1800.00 USD", "transition:completed>canceled 1800.00 USD"}
	if !slices.Equal(moves, want) {
		t.Errorf("the timeline after placement:\n got  %q\n want %q", moves, want)
	}
}

// A change the seller's answer contradicted ends with the state the seller reported.
func TestContradictedChangeRecordsTheSellersState(t *testing.T) {
	t.Parallel()
	s, clk := newStore(t)
	ctx := context.Background()
	mustCreate(t, s, newOp("op-1"))
	ev := record.Event{Type: "modification_requested"}
	if _, err := s.BeginChange(ctx, initialBuy(), "chg-1", "cancel", clk.Now().Add(time.Hour), ev); err != nil {
		t.Fatal(err)
	}
	got, err := s.ContradictChange(ctx, "acme", "op-1", "chg-1", "paused", "the seller says paused", record.Event{Type: "modification_ended"})
	if err != nil || got.State != "paused" || got.LastOutcome != record.OutcomeContradicted || got.ChangeID != "" || got.Revision != 2 || got.BudgetTotal != "20000.50" {
		t.Fatalf("contradicted: %+v %v", got, err)
	}
	if again, err := s.ContradictChange(ctx, "acme", "op-1", "chg-1", "paused", "the seller says paused", record.Event{Type: "modification_ended"}); err != nil || again.State != "paused" {
		t.Fatalf("ended twice: %+v %v", again, err)
	}
}
