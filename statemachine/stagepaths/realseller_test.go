package stagepaths

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/adcptest"
	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/apiclient"
	"github.com/buyflow/buyflow/internal/devstack"
)

// The workflow's seller paths against the simulated seller in the modes that make it behave as
// the official SDK's sellers do, not as kindly as a double may: webhooks on terminal statuses
// only (no working), no buys listed by get_media_buys, tasks kept in memory and forgotten on a
// restart (adcptest.SellerOptions). The SDK's own sellers run the same paths end to end in
// e2e/sdkseller and e2e/sdkexamples; here every state of the workflow is checked.

// beginRealSeller starts a scenario whose buy goes to a seller of its own in those modes,
// speaking AdCP 3.2 as the suite's agents do (versions_test.go), with the system's governance
// agent.
func beginRealSeller(t *testing.T, patch map[string]any) *buyRun {
	t.Helper()
	r := begin(t, patch)
	a := &runAgents{gov: sys.agents.Governance, govID: devstack.GovernanceID, version: adcp.Version32}
	a.seller, a.sellerID = startSellerWith(t, "sdklike", adcptest.SellerOptions{Version: adcptest.Version32, TerminalWebhooks: true, ListsNothing: true, ForgetTasksOnRestart: true})
	r.agents = a
	return r
}

// A create the seller finishes asynchronously, telling buyflow only when it is done: the
// terminal webhook wakes the buy; nothing polled it.
func TestRealSellerTerminalWebhookCompletesTheBuy(t *testing.T) {
	r := beginRealSeller(t, map[string]any{"poll_initial_seconds": 20, "poll_max_seconds": 20})
	r.submit(apiclient.Buy{Sim: "async_complete"})
	ex := only(t, r.finish(60*time.Second))
	path(t, ex, "SUCCEEDED", "", seq(prelude, []string{"CreateMediaBuy", "SellerAvailable", "AwaitSeller"}, completes)...)
	wantCalls(t, "seller", tools(r.sellerCalls("")), "create_media_buy") // no poll
	wantStatus(t, r.operation(), "completed")
	tl := r.timeline()
	if count(tl, "webhook") != 1 || slices.Contains(tl, "poll") {
		t.Errorf("timeline %v: want one webhook (the terminal one) and no poll", tl)
	}
}

// A cancel at a seller that lists no buys is planned from buyflow's own record of the buy and
// sent; the seller's answer decides it.
func TestRealSellerCancelWithoutAListing(t *testing.T) {
	r := beginRealSeller(t, nil)
	r.submit(apiclient.Buy{Sim: "sync"})
	path(t, only(t, r.finish(60*time.Second)), "SUCCEEDED", "", seq(prelude, []string{"CreateMediaBuy", "SellerAvailable", "AwaitSeller"}, completes)...)
	id := r.change(`{"reason":"campaign withdrawn","context":{"sim":"sync"}}`, true)
	ex := only(t, r.finishNamed(id, 60*time.Second))
	ends(t, ex, "SUCCEEDED", "", "ApplyChange", "ChangeOutcome", "ChangeApplied")
	if got := r.sellerCalls("update_media_buy"); len(got) != 1 || arg(t, got[0].Arguments, "canceled") != true {
		t.Fatalf("the seller heard %d update_media_buy, want the one cancel", len(got))
	}
	if op := r.operation(); op.Status != "canceled" {
		t.Errorf("the buy reads %s after the cancel, want canceled", op.Status)
	}
	planned := false
	for _, e := range r.events(id) {
		planned = planned || e.Type == "modification_governance_check" && detailOf(e)["unlisted"] == true
	}
	if !planned {
		t.Errorf("the cancel's timeline %v does not say it was planned from buyflow's record", r.timelineOf(id))
	}
}

// A seller restarted while the create's task is pending forgets it and answers
// REFERENCE_NOT_FOUND: the buy is not failed on that answer but waits the lost-task grace, then
// ends with a finding a person can act on.
func TestRealSellerRestartLosesTheTask(t *testing.T) {
	const grace = 4 * time.Second
	r := beginRealSeller(t, map[string]any{"poll_initial_seconds": 1, "poll_max_seconds": 1, "lost_task_grace_seconds": int(grace / time.Second)})
	r.submit(apiclient.Buy{Sim: "async_complete,hold"})
	r.sellerTask()
	r.agents.seller.Restart()
	ex := only(t, r.finish(90*time.Second))
	ends(t, ex, "FAILED", "SellerDidNotComplete", "SellerTaskStatus", "SellerDidNotComplete", "RecordFailure", "FailureKind", "SellerTaskFailed")
	if polls := count(ex.States, "PollSeller"); polls < 2 {
		t.Errorf("the buy polled %d times: failed on the first REFERENCE_NOT_FOUND", polls)
	}
	wantStatus(t, r.operation(), "failed")
	var firstLost, ended time.Time
	for _, e := range r.events(r.op) {
		d := detailOf(e)
		switch {
		case firstLost.IsZero() && e.Type == "poll" && d["error_code"] == "REFERENCE_NOT_FOUND":
			firstLost = at(t, e)
		case e.Type == "lost_task":
			ended = at(t, e)
			if d["finding"] != "lost_task" || d["may_exist"] == nil || d["check"] == nil {
				t.Errorf("the lost-task finding: %s", e.Detail)
			}
		}
	}
	if firstLost.IsZero() || ended.IsZero() {
		t.Fatalf("timeline %v: want a poll answered REFERENCE_NOT_FOUND and then lost_task", r.timeline())
	}
	// A lower bound only: a slow machine waits longer, never shorter.
	if waited := ended.Sub(firstLost); waited < grace {
		t.Errorf("failed %v after the first REFERENCE_NOT_FOUND, within the %v grace", waited, grace)
	}
}

// detailOf is an event's detail as a map (empty when it has none).
func detailOf(e api.Event) map[string]any {
	var m map[string]any
	_ = json.Unmarshal(e.Detail, &m) // no detail: an empty map
	return m
}

// at is when an event was written.
func at(t *testing.T, e api.Event) time.Time {
	t.Helper()
	when, err := time.Parse(time.RFC3339Nano, e.At)
	if err != nil {
		t.Fatalf("event %s at %q: %v", e.Type, e.At, err)
	}
	return when
}
