package modify_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/adcptest"
	"github.com/buyflow/buyflow/internal/buy"
	"github.com/buyflow/buyflow/internal/modify"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/stagetest"
	"github.com/buyflow/buyflow/internal/workflow"
)

// listsNothing is a seller as the @adcp/sdk broadcast example is: get_media_buys answers [].
var listsNothing = stagetest.Options{Seller: adcptest.SellerOptions{ListsNothing: true}}

// submit asks for the change body describes (a cancellation when cancel) of the world's buy
// under key, as the API does; governance approves it and the seller answers inline.
func (w *changeWorld) submit(t *testing.T, key, body string, cancel bool) (string, error) {
	t.Helper()
	parse := modify.ParsePatch
	if cancel {
		parse = modify.ParseCancel
	}
	c, err := parse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	reqs := modify.NewRequests(w.e.Store, &startedExecutions{names: map[string]int{}}, modify.RequestConfig{StateMachineARN: "arn:sm", Now: w.e.Clock.Now})
	acc, err := reqs.Submit(context.Background(), buy.Caller{Tenant: stagetest.Tenant, Principal: "alice"}, w.buy.ID, key, c)
	return acc.ChangeID, err
}

// run takes the change through its stages, check to apply, and returns its outcome.
func (w *changeWorld) run(t *testing.T, id string) modify.ChangeOutcome {
	t.Helper()
	ctx := context.Background()
	if out, err := w.svc.Check(ctx, w.in(id, modify.ActionCheck)); err != nil || out.Decision != workflow.GovernanceProceed {
		t.Fatalf("check of change %s: %+v, %v", id, out, err)
	}
	if out, err := w.update(id); err != nil || out.Status != workflow.StatusCompleted {
		t.Fatalf("update of change %s: %+v, %v", id, out, err)
	}
	got, err := w.svc.Apply(ctx, w.in(id, modify.ActionApply))
	if err != nil {
		t.Fatalf("apply of change %s: %v", id, err)
	}
	return got
}

// sellerBuy is the seller's own copy of the world's buy (the seller lists nothing; its
// store is read directly).
func (w *changeWorld) sellerBuy(t *testing.T) map[string]any {
	t.Helper()
	mbID := w.e.Op(w.buy.ID).MediaBuyID
	for _, mb := range w.e.Seller.MediaBuys() {
		if mb["media_buy_id"] == mbID {
			return mb
		}
	}
	t.Fatalf("the seller holds no media buy %s", mbID)
	return nil
}

// A buy at a seller whose get_media_buys does not list it can still be withdrawn: the
// cancellation is sent, the seller's answer confirms it, and the buy is canceled at the seller
// and in buyflow's record. Before, the read ended the change media_buy_not_found and the buy
// stayed live at the seller.
func TestACancelReachesASellerThatListsNothing(t *testing.T) {
	t.Parallel()
	w := newChangeWorld(t, listsNothing)
	id, err := w.submit(t, "key-cancel", `{"reason":"campaign withdrawn","context":{"sim":"approved,sync"}}`, true)
	if err != nil {
		t.Fatal(err)
	}
	if got := w.run(t, id); got.Outcome != modify.OutcomeApplied || got.State != record.BuyStateCanceled {
		t.Fatalf("the cancellation: %+v, want applied and canceled", got)
	}
	args := stagetest.LastArgs(t, w.e.Seller.CallsTo(adcp.ToolUpdateMediaBuy))
	if args["canceled"] != true || args["cancellation_reason"] != "campaign withdrawn" {
		t.Errorf("update_media_buy sent %v, want the cancellation", args)
	}
	if st := w.sellerBuy(t)["status"]; st != "canceled" {
		t.Errorf("the seller holds the buy %v, want canceled", st)
	}
}

// Any change to a buy the seller does not list is planned from buyflow's own record of what it
// placed (its packages and budgets) and confirmed by the seller's answer; the revision buyflow
// counts is not the seller's, so none is sent, and a second change is not refused as stale.
func TestAChangeToAnUnlistedBuyIsPlannedFromTheRecord(t *testing.T) {
	t.Parallel()
	w := newChangeWorld(t, listsNothing)
	pkg := w.buy.SellerPackages
	if len(pkg) != 1 {
		t.Fatalf("the buy was placed with packages %v, want one", pkg)
	}
	id, err := w.submit(t, "key-budget", `{"budget":{"total":3500},"context":{"sim":"approved,sync"}}`, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := w.run(t, id); got.Outcome != modify.OutcomeApplied {
		t.Fatalf("the budget change: %+v", got)
	}
	args := stagetest.LastArgs(t, w.e.Seller.CallsTo(adcp.ToolUpdateMediaBuy))
	sent, _ := json.Marshal(args["packages"])
	if want := `[{"budget":3500,"package_id":"` + pkg[0].PackageID + `"}]`; string(sent) != want {
		t.Errorf("update_media_buy sent packages %s, want %s", sent, want)
	}
	if _, ok := args["revision"]; ok {
		t.Errorf("update_media_buy sent revision %v: a count of buyflow's own, which the seller would refuse", args["revision"])
	}
	for _, ev := range stagetest.Events(t, w.e, id) {
		var d struct {
			Unlisted bool `json:"unlisted"`
		}
		if ev.Type == record.EventModificationGovernanceCheck && (json.Unmarshal(ev.Detail, &d) != nil || !d.Unlisted) {
			t.Errorf("the governance check's event %s does not say the plan was made from buyflow's record", ev.Detail)
		}
	}
	st, err := w.e.Store.GetBuyState(context.Background(), stagetest.Tenant, w.buy.ID)
	if err != nil || st.BudgetTotal != "3500.00" || len(st.Packages) != 1 || st.Packages[0].Budget != "3500.00" {
		t.Fatalf("the buy's record after the change: %+v, %v", st, err)
	}

	id, err = w.submit(t, "key-pause", `{"paused":true,"context":{"sim":"approved,sync"}}`, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := w.run(t, id); got.Outcome != modify.OutcomeApplied || got.State != "paused" {
		t.Fatalf("the pause after it: %+v", got)
	}
	if st := w.sellerBuy(t)["status"]; st != "paused" {
		t.Errorf("the seller holds the buy %v, want paused", st)
	}
}

// A seller that does not list the buy cannot tell whether an update that may have reached it
// was applied: the update retried after a crash is a resend of the same key, which the seller
// replays, and the change completes once.
func TestAnUnlistedChangeRetriedAfterACrashIsAResend(t *testing.T) {
	t.Parallel()
	w := newChangeWorld(t, listsNothing)
	id := w.checked(t, "3500")
	w.committedThenCrashed(t, id)
	out, err := w.update(id)
	if err != nil || out.Status != workflow.StatusCompleted {
		t.Fatalf("the retried update: %+v, %v", out, err)
	}
	if calls := w.e.Seller.CallsTo(adcp.ToolUpdateMediaBuy); len(calls) != 2 || originals(calls) != 1 || !calls[1].Replayed {
		t.Fatalf("the seller got %d update_media_buy (%d executed), want the first and its replay", len(calls), originals(calls))
	}
	if got := lapsedChecks(t, w, id); !slices.Equal(got, []bool{false}) {
		t.Errorf("looks at the seller %v, want one that could not tell", got)
	}
}
