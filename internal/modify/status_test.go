package modify_test

import (
	"context"
	"strings"
	"testing"

	"github.com/buyflow/buyflow/internal/buy"
	"github.com/buyflow/buyflow/internal/modify"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/stagetest"
	"github.com/buyflow/buyflow/internal/workflow"
)

// change submits a change of the buy (a cancellation when cancel), then runs its check, its
// update and ApplyChange as the state machine does, and returns the outcome.
func (w *changeWorld) change(t *testing.T, key, body string, cancel bool) modify.ChangeOutcome {
	t.Helper()
	ctx := context.Background()
	parse := modify.ParsePatch
	if cancel {
		parse = modify.ParseCancel
	}
	c, err := parse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	reqs := modify.NewRequests(w.e.Store, &startedExecutions{names: map[string]int{}}, modify.RequestConfig{StateMachineARN: "arn:sm", Now: w.e.Clock.Now})
	acc, err := reqs.Submit(ctx, buy.Caller{Tenant: stagetest.Tenant, Principal: "alice"}, w.buy.ID, key, c)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := w.svc.Check(ctx, w.in(acc.ChangeID, modify.ActionCheck)); err != nil || out.Decision != workflow.GovernanceProceed {
		t.Fatalf("check of %s: %+v, %v", body, out, err)
	}
	if out, err := w.update(acc.ChangeID); err != nil || !out.Terminal {
		t.Fatalf("update of %s: %+v, %v", body, out, err)
	}
	got, err := w.svc.Apply(ctx, w.in(acc.ChangeID, modify.ActionApply))
	if err != nil {
		t.Fatalf("apply of %s: %v", body, err)
	}
	return got
}

// A placed buy's own status and committed budget follow the changes the seller applied: the
// one status every reader and list filter uses, and the status events derive from.
func TestBuyStatusFollowsAppliedChanges(t *testing.T) {
	t.Parallel()
	w := newChangeWorld(t, stagetest.Options{})
	steps := []struct {
		body   string
		cancel bool
		status workflow.Status
		budget string
	}{
		{`{"budget":{"total":3500},"context":{"sim":"approved,sync"}}`, false, workflow.StatusCompleted, "3500.00"},
		{`{"paused":true,"context":{"sim":"approved,sync"}}`, false, workflow.StatusPaused, "3500.00"},
		{`{"paused":false,"context":{"sim":"approved,sync"}}`, false, workflow.StatusCompleted, "3500.00"},
		{`{"paused":true,"context":{"sim":"approved,sync"}}`, false, workflow.StatusPaused, "3500.00"},
		{`{"reason":"campaign withdrawn","context":{"sim":"approved,sync"}}`, true, workflow.StatusCanceled, "3500.00"},
	}
	if op := w.e.Op(w.buy.ID); op.BudgetTotal != "5000.00" {
		t.Fatalf("the placed buy's budget is %s", op.BudgetTotal)
	}
	for i, st := range steps {
		if got := w.change(t, "key-"+string(rune('a'+i)), st.body, st.cancel); got.Outcome != modify.OutcomeApplied {
			t.Fatalf("%s: %+v, want applied", st.body, got)
		}
		op := w.e.Op(w.buy.ID)
		if op.Status != st.status || op.BudgetTotal != st.budget {
			t.Fatalf("after %s the buy reads %s, %s; want %s, %s", st.body, op.Status, op.BudgetTotal, st.status, st.budget)
		}
		// A list filter reads the same status.
		page, err := w.e.Store.ListOperations(context.Background(), stagetest.Tenant, record.ListOptions{Status: st.status})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, v := range page.Items {
			found = found || v.ID == w.buy.ID
		}
		if !found {
			t.Errorf("after %s, ?status=%s does not list the buy", st.body, st.status)
		}
	}
	// The buy's timeline has the moves with the committed amount: finance's view.
	evs, err := w.e.Store.ListEvents(context.Background(), stagetest.Tenant, w.buy.ID, 200, "")
	if err != nil {
		t.Fatal(err)
	}
	var moves []string
	for _, e := range evs.Items {
		if e.Type == record.EventTransition && e.From.Placed() {
			moves = append(moves, string(e.From)+">"+string(e.To)+" "+e.Amount+" "+e.Currency)
		}
	}
	want := "completed>paused 3500.00 USD,paused>completed 3500.00 USD,completed>paused 3500.00 USD,paused>canceled 3500.00 USD"
	if strings.Join(moves, ",") != want {
		t.Errorf("the buy's moves after placement:\n got  %s\n want %s", strings.Join(moves, ","), want)
	}
}

// A seller that answers a cancel with success but shows the buy still active (the SDK's
// broadcast example) has not canceled it: the change ends contradicted with a finding, the
// buy's state records what the seller said, and the buy still reads as live.
func TestSuccessThatContradictsTheCancelIsNotRecordedAsApplied(t *testing.T) {
	t.Parallel()
	w := newChangeWorld(t, stagetest.Options{})
	got := w.change(t, "key-cancel", `{"reason":"campaign withdrawn","context":{"sim":"approved,sync,unchanged"}}`, true)
	if got.Outcome != record.OutcomeContradicted || got.State != "active" || !strings.Contains(got.Reason, "answered the cancel") ||
		!strings.Contains(got.Reason, "the buy active") || !strings.Contains(got.Reason, "Check the buy at the seller") {
		t.Fatalf("the outcome: %+v", got)
	}
	if op := w.e.Op(w.buy.ID); op.Status != workflow.StatusCompleted {
		t.Errorf("the buy reads %s after a cancel the seller did not apply, want completed", op.Status)
	}
	st, err := w.e.Store.GetBuyState(context.Background(), stagetest.Tenant, w.buy.ID)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != "active" || st.LastOutcome != record.OutcomeContradicted || !strings.Contains(st.LastReason, "not recorded as applied") {
		t.Errorf("the buy state: %+v", st)
	}
	chg := w.e.Op(st.LastChangeID)
	if chg.Status != workflow.StatusFailed || chg.ErrorCode != "seller_contradicted" {
		t.Errorf("the change reads %s (%s), want failed (seller_contradicted)", chg.Status, chg.ErrorCode)
	}
	// The buy can still be canceled: it is not canceled.
	if again := w.change(t, "key-cancel-2", `{"reason":"campaign withdrawn","context":{"sim":"approved,sync"}}`, true); again.Outcome != modify.OutcomeApplied {
		t.Fatalf("the second cancel: %+v", again)
	}
	if op := w.e.Op(w.buy.ID); op.Status != workflow.StatusCanceled {
		t.Errorf("the buy reads %s after the cancel applied, want canceled", op.Status)
	}
}

// A pause answered with the buy still active, and a budget answered with the old package
// budget, are contradictions too; the buy keeps its status and committed budget.
func TestSuccessThatContradictsAPauseOrABudget(t *testing.T) {
	t.Parallel()
	w := newChangeWorld(t, stagetest.Options{})
	if got := w.change(t, "key-pause", `{"paused":true,"context":{"sim":"approved,sync,unchanged"}}`, false); got.Outcome != record.OutcomeContradicted || got.State != "active" {
		t.Fatalf("the pause: %+v", got)
	}
	got := w.change(t, "key-budget", `{"budget":{"total":3500},"context":{"sim":"approved,sync,unchanged"}}`, false)
	if got.Outcome != record.OutcomeContradicted || !strings.Contains(got.Reason, "answered the budget change of media buy") ||
		!strings.Contains(got.Reason, "at 5000.00 USD, not the 3500.00 USD asked") {
		t.Fatalf("the budget: %+v", got)
	}
	if op := w.e.Op(w.buy.ID); op.Status != workflow.StatusCompleted || op.BudgetTotal != "5000.00" {
		t.Errorf("the buy reads %s, %s; want completed, 5000.00", op.Status, op.BudgetTotal)
	}
}
