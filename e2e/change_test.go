package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/apiclient"
)

// A buy is created, increased, paused, resumed and canceled over HTTP, each change its own run;
// the buy's timeline lists every step with its amounts, a change after the cancellation is
// refused, and its delivery is read on schedule.
func TestBuyIncreasedPausedResumedCanceled(t *testing.T) {
	c := begin(t)
	sub := submit(t, c, buy{PO: po(t), Sim: "sync", Budgets: []float64{3000}})
	finished(t, c, sub.OperationID, "completed")
	steps := []struct {
		body   string
		cancel bool
		state  string
		budget string
	}{
		{`{"budget":{"total":3500},"reason":"strong first week","context":{"sim":"sync"}}`, false, "active", "3500.00"},
		{`{"paused":true,"context":{"sim":"async_complete"}}`, false, "paused", "3500.00"},
		{`{"paused":false,"context":{"sim":"sync"}}`, false, "active", "3500.00"},
		{`{"reason":"campaign withdrawn","context":{"sim":"sync"}}`, true, "canceled", "3500.00"},
	}
	for i, st := range steps {
		acc, err := c.Change(context.Background(), sub.OperationID, fmt.Sprintf("chg-key-%s-%d", randomID(t), i), []byte(st.body), st.cancel)
		if err != nil {
			t.Fatalf("change %s: %v", st.body, err)
		}
		finished(t, c, acc.ChangeID, "completed")
		op := waitFor(t, c, sub.OperationID, 30*time.Second, func(op api.MediaBuy) bool {
			return op.Current != nil && op.Current.LastChangeID == acc.ChangeID
		})
		if cur := op.Current; cur.State != st.state || cur.Budget != st.budget || cur.Revision != i+2 || cur.LastOutcome != "applied" {
			t.Errorf("after %s: current %+v, want %s, %s, revision %d", st.body, cur, st.state, st.budget, i+2)
		}
	}
	_, err := c.Change(context.Background(), sub.OperationID, "chg-key-after-"+randomID(t), []byte(`{"paused":false}`), false)
	if apiclient.StatusOf(err) != 409 {
		t.Errorf("a resume after the cancellation: %v, want 409", err)
	}

	// Each change reports its outcome after it applied it: wait for the last one's report.
	evs := settled(t, c, sub.OperationID)
	for deadline := time.Now().Add(15 * time.Second); countType(evs, "modification_outcome_report") < len(steps) && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
		evs = timeline(t, c, sub.OperationID)
	}
	var applied []string
	for _, e := range evs {
		if e.Type == "modification_applied" {
			applied = append(applied, e.Amount+" "+e.Reason)
		}
	}
	want := []string{"3500.00 USD budget 3000.00 USD → 3500.00 USD", "3500.00 USD delivery paused", "3500.00 USD delivery resumed", "3500.00 USD buy canceled: campaign withdrawn"}
	if !slices.Equal(applied, want) {
		t.Errorf("the timeline's applied changes:\n got  %q\n want %q", applied, want)
	}
	for _, typ := range []string{"modification_requested", "modification_governance_check", "modification_seller_call", "modification_outcome_report"} {
		if n := countType(evs, typ); n < len(steps) {
			t.Errorf("the timeline has %d %s, want one per change (%d): %v", n, typ, len(steps), types(evs))
		}
	}
}

// A buy canceled after placement reads canceled everywhere a reader looks: GET, the ?status=
// list filter, the status events on the bus (completed → canceled, with the committed amount)
// and finance's timeline. A cancel the seller answered with the buy still active reads as
// what it is: the buy stays completed and the change ends contradicted, with a finding.
func TestCanceledBuyReadsCanceledEverywhere(t *testing.T) {
	c := begin(t)
	sub := submit(t, c, buy{PO: po(t), Sim: "sync", Budgets: []float64{3000}})
	finished(t, c, sub.OperationID, "completed")

	// First a cancel the seller answers with success while its answer shows the buy active.
	acc, err := c.Change(context.Background(), sub.OperationID, "chg-key-ignored-"+randomID(t), []byte(`{"reason":"withdrawn","context":{"sim":"sync,unchanged"}}`), true)
	if err != nil {
		t.Fatal(err)
	}
	chg := finished(t, c, acc.ChangeID, "failed")
	if !strings.Contains(chg.Reason, "not recorded as applied") {
		t.Errorf("the contradicted change's reason: %q", chg.Reason)
	}
	op := waitFor(t, c, sub.OperationID, 30*time.Second, func(op api.MediaBuy) bool {
		return op.Current != nil && op.Current.LastChangeID == acc.ChangeID
	})
	if op.Status != "completed" || op.Current.State != "active" || op.Current.LastOutcome != "contradicted" {
		t.Errorf("after a cancel the seller did not apply the buy reads %s, current %+v", op.Status, op.Current)
	}

	// Then a cancel the seller applies.
	acc, err = c.Change(context.Background(), sub.OperationID, "chg-key-cancel-"+randomID(t), []byte(`{"reason":"campaign withdrawn","context":{"sim":"sync"}}`), true)
	if err != nil {
		t.Fatal(err)
	}
	finished(t, c, acc.ChangeID, "completed")
	op = waitFor(t, c, sub.OperationID, 30*time.Second, func(op api.MediaBuy) bool { return op.Status == "canceled" })
	if op.Current == nil || op.Current.State != "canceled" || op.Budget != "3000.00" {
		t.Errorf("the canceled buy reads %s, budget %s, current %+v", op.Status, op.Budget, op.Current)
	}
	if !listedWithStatus(t, c, sub.OperationID, "canceled") {
		t.Error("GET /v1/media-buys?status=canceled does not list the canceled buy")
	}
	if listedWithStatus(t, c, sub.OperationID, "completed") {
		t.Error("GET /v1/media-buys?status=completed still lists the canceled buy")
	}
	var moved bool
	for _, e := range settled(t, c, sub.OperationID) {
		moved = moved || e.From == "completed" && e.To == "canceled" && e.Amount == "3000.00 USD"
	}
	if !moved {
		t.Error("finance's timeline has no completed → canceled with the committed amount")
	}
	if suite.local == nil {
		return // the event sink is the local stack's
	}
	evs := published(t, sub.OperationID, "canceled")
	checkChain(t, evs, "canceled")
	last := evs[len(evs)-1].Detail
	if last.From != "completed" || last.Amount == nil || last.Amount.Value != "3000.00" || last.Amount.Currency != "USD" {
		t.Errorf("the canceled event: %+v", last)
	}
}

// listedWithStatus reports whether GET /v1/media-buys?status=status lists buy id.
func listedWithStatus(t *testing.T, c *apiclient.Client, id, status string) bool {
	t.Helper()
	cursor := ""
	for range 20 {
		path := "/v1/media-buys?limit=100&status=" + url.QueryEscape(status)
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		code, _, body, err := c.Do(context.Background(), http.MethodGet, path, nil, nil)
		if err != nil || code != http.StatusOK {
			t.Fatalf("GET %s: %d %v: %s", path, code, err, body)
		}
		var page api.Page[api.MediaBuy]
		if err := json.Unmarshal(body, &page); err != nil {
			t.Fatal(err)
		}
		for _, op := range page.Items {
			if op.Status != status {
				t.Errorf("?status=%s lists %s in %s", status, op.OperationID, op.Status)
			}
			if op.OperationID == id {
				return true
			}
		}
		if cursor = page.NextCursor; cursor == "" {
			return false
		}
	}
	return false
}

// A budget increase over the approval threshold waits for a person, who approves it from the
// Slack link as for a buy; then the seller hears update_media_buy and the buy shows its new
// budget, and the change's timeline holds the request and the decision.
func TestChangeApprovedFromTheSlackLink(t *testing.T) {
	c := begin(t)
	sub := submit(t, c, buy{PO: po(t), Sim: "sync", Budgets: []float64{3000}})
	// Sent the moment the buy reads completed, while its own run still reports the outcome.
	finished(t, c, sub.OperationID, "completed")
	acc, err := c.Change(context.Background(), sub.OperationID, "chg-key-approve-"+randomID(t),
		[]byte(`{"budget":{"total":14000.25},"context":{"sim":"sync"}}`), false)
	if err != nil {
		t.Fatal(err)
	}
	chg := waitFor(t, c, acc.ChangeID, 30*time.Second, awaitingApproval)
	if chg.Status != "awaiting_approval" {
		t.Fatalf("the change is %s (reason %q), want awaiting_approval", chg.Status, chg.Reason)
	}
	if op, err := c.Get(context.Background(), sub.OperationID); err != nil || (op.Current != nil && op.Current.Budget != "3000.00") {
		t.Fatalf("before the approval the buy reads %+v (%v)", op.Current, err)
	}
	decide(t, chg, "approve")
	finished(t, c, acc.ChangeID, "completed")
	op := waitFor(t, c, sub.OperationID, 30*time.Second, func(op api.MediaBuy) bool {
		return op.Current != nil && op.Current.LastChangeID == acc.ChangeID
	})
	if cur := op.Current; cur.Budget != "14000.25" || cur.LastOutcome != "applied" || cur.Revision != 2 {
		t.Errorf("after the approved change: current %+v, want 14000.25, applied, revision 2", cur)
	}
	tl := types(timeline(t, c, acc.ChangeID))
	for _, want := range []string{"approval_requested", "decision", "modification_seller_call"} {
		if !slices.Contains(tl, want) {
			t.Errorf("the change's timeline %v lacks %s", tl, want)
		}
	}
}

// The delivery read runs after each sweep: a live buy gets a snapshot soon after it completes.
func TestDeliverySnapshotOfALiveBuy(t *testing.T) {
	c := begin(t)
	if suite.local == nil {
		t.Skip("the simulated seller's delivery is the local stack's")
	}
	sub := submit(t, c, buy{PO: po(t), Sim: "sync", Budgets: []float64{3000}})
	finished(t, c, sub.OperationID, "completed")
	var d api.Delivery
	deadline := time.Now().Add(60 * time.Second)
	for {
		var err error
		if d, err = c.Delivery(context.Background(), sub.OperationID); err != nil {
			t.Fatal(err)
		}
		if len(d.Snapshots) > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if len(d.Snapshots) == 0 || d.Approved != "3000.00" || d.Spend != "0" || d.OverBudget {
		t.Fatalf("delivery %+v: want a snapshot of the simulated seller's report (nothing spent yet) against 3000.00", d)
	}
	// The reader writes the snapshot, then its timeline entry: a read between the two sees
	// only the snapshot, so the entry is waited for.
	for countType(settled(t, c, sub.OperationID), "delivery") == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the timeline has no delivery entry")
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func countType(evs []api.Event, typ string) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}
