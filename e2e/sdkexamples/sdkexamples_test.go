package sdkexamples

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/e2e/e2etest"
	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/apiclient"
)

// begin skips when the suite cannot run and returns a client for a fresh tenant.
func begin(t *testing.T) *apiclient.Client {
	t.Helper()
	if skip != "" {
		t.Skip(skip)
	}
	return suite.Client(t)
}

// guaranteedBuy is a submit for a guaranteed example seller, of its DOOH product at its one
// pricing option. The seller takes an account by brand (acmeoutdoor.example is a network of
// its upstream); the buy's own brand domain names its order upstream, which is how the IO desk
// finds its review. 500 USD stays under the approval threshold (the example checks no minimum
// spend); notify asks for the requester's Slack messages.
func guaranteedBuy(t testing.TB, seller, domain, notify string) []byte {
	t.Helper()
	return buyBody(t, seller, notify, map[string]any{
		"account":  map[string]any{"brand": map[string]any{"domain": "acmeoutdoor.example"}, "operator": "buyflow.example"},
		"brand":    map[string]any{"domain": domain},
		"packages": []any{map[string]any{"product_id": "acme_dooh_billboards_q2", "pricing_option_id": "cpm_guaranteed_fixed", "budget": 500}},
	})
}

// broadcastBuy is a submit for the broadcast example seller: its primetime product, 6,000 USD
// (its minimum is 5,000 per IO; under the approval threshold).
func broadcastBuy(t testing.TB) []byte {
	t.Helper()
	return buyBody(t, broadcastID, "", map[string]any{
		"account":      map[string]any{"account_id": "broadcast_acc_1"},
		"brand":        map[string]any{"domain": "acme.example"},
		"total_budget": map[string]any{"amount": 6000, "currency": "USD"},
		"packages":     []any{map[string]any{"product_id": "prod_primetime_30s", "pricing_option_id": "cpm_42_00", "budget": 6000}},
	})
}

func buyBody(t testing.TB, seller, notify string, mb map[string]any) []byte {
	t.Helper()
	mb["po_number"] = "PO-EX-" + strings.ToUpper(randomID(t))
	mb["start_time"] = "2030-04-01T00:00:00Z"
	mb["end_time"] = "2030-06-30T23:59:59Z"
	mb["context"] = map[string]any{"sim": "approved"}
	doc := map[string]any{
		"seller_id":  seller,
		"governance": map[string]any{"agent_id": governanceID, "plan_id": "plan-sdk-examples"},
		"currency":   "USD",
		"media_buy":  mb,
	}
	if notify != "" {
		doc["notify"] = map[string]any{"slack": notify}
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// brandDomain is a brand domain of the test's own.
func brandDomain(t testing.TB) string { return "b" + randomID(t) + ".example" }

// slackUser is a Slack user id of the test's own.
func slackUser(t testing.TB) string { return "U" + strings.ToUpper(randomID(t)) }

// requesterTold waits (up to 30 s) for a Slack message to channel whose text contains want.
func requesterTold(t testing.TB, channel, want string) apiclient.SlackMessage {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		msgs, err := apiclient.SlackMessages(context.Background(), nil, suite.SlackURL)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(msgs, func(m apiclient.SlackMessage) bool {
			return m.Channel == channel && (strings.Contains(m.Text, want) || strings.Contains(string(m.Body), want))
		})
		if i >= 0 {
			return msgs[i]
		}
		if time.Now().After(deadline) {
			t.Fatalf("no Slack message to %s says %q; it got %+v", channel, want, msgs)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// eventually waits (up to limit) until the buy's timeline holds an event that ok accepts.
func eventually(t testing.TB, c *apiclient.Client, id string, limit time.Duration, what string, ok func(api.Event) bool) api.Event {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		evs := timeline(t, c, id)
		if i := slices.IndexFunc(evs, ok); i >= 0 {
			return evs[i]
		}
		if time.Now().After(deadline) {
			logTimeline(t, c, id)
			t.Fatalf("%s: no such event in %v", what, limit)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// An IO review by the seller's people: the buy waits in submitted while it lasts (the requester
// is told it waits on the seller's people), and the seller's approval completes it with the
// order the seller created upstream.
func TestIOReviewApproved(t *testing.T) {
	c := begin(t)
	// The sweep held: a run in the moment between the seller's approval and its webhook would
	// finish the buy first, and this test asserts the seller's own word (or the buy's poll).
	t.Cleanup(suite.HoldSweep())
	domain, user := brandDomain(t), slackUser(t)
	id := place(t, c, "key-"+randomID(t), guaranteedBuy(t, guaranteedID, domain, user))
	r := suite.desk.underReview(t, domain)

	// The review is held: the buy waits, and says on what.
	requesterTold(t, user, "took your buy for review by its people")
	eventually(t, c, id, 30*time.Second, "a poll while the review lasts", func(e api.Event) bool { return e.Type == "poll" })
	if op := get(t, c, id); op.Status != "submitted" || op.SellerTaskID == "" || op.MediaBuyID != "" {
		t.Fatalf("during the IO review: %+v", op)
	}

	suite.desk.approve(domain)
	op := finished(t, c, id, "completed")
	if op.MediaBuyID != r.orderID {
		t.Errorf("media buy %q, want the upstream order %s", op.MediaBuyID, r.orderID)
	}
	if len(op.Packages) != 1 || !strings.HasPrefix(op.Packages[0].PackageID, "li_") {
		t.Errorf("packages %+v, want the upstream line item", op.Packages)
	}
	evs := timeline(t, c, id)
	if e := reached(t, evs, "completed"); (e.Type != "webhook" && e.Type != "poll") || e.Actor != "seller:"+guaranteedID {
		t.Errorf("completed by %s (%s), want the seller's webhook or a poll", e.Type, e.Actor)
	}
	if status, _ := suite.ExecutionEnd(t, id); status != "SUCCEEDED" {
		t.Errorf("execution %s", status)
	}
	requesterTold(t, user, op.MediaBuyID)
}

// The seller's people refuse the IO: the buy fails with their words, and governance hears it.
func TestIOReviewRefused(t *testing.T) {
	c := begin(t)
	domain := brandDomain(t)
	id := place(t, c, "key-"+randomID(t), guaranteedBuy(t, guaranteedID, domain, ""))
	suite.desk.underReview(t, domain)
	const note = "IO declined: the flight overlaps a sold-out tentpole " // the seller's people's words
	suite.desk.refuse(domain, note+domain)
	op := finished(t, c, id, "failed")
	if !strings.Contains(op.Reason, note+domain) {
		t.Errorf("reason %q lacks the reviewer's note", op.Reason)
	}
	evs := timeline(t, c, id)
	if e := reached(t, evs, "failed"); e.Actor != "seller:"+guaranteedID || detailOf(e)["error_code"] != "INVALID_REQUEST" {
		logTimeline(t, c, id)
		t.Errorf("failed by %s %s with detail %s", e.Type, e.Actor, e.Detail)
	}
	if op.MediaBuyID != "" {
		t.Errorf("a refused IO left media buy %s", op.MediaBuyID)
	}
}

// A seller that lists nothing (get_media_buys answers []): the cancellation still reaches it,
// planned from buyflow's own record, and buyflow records what the seller answered. This seller
// takes canceled: true and keeps the buy running (the example's updateMediaBuy handles pause
// and resume only, and answers its buy's status): the change ends failed (seller_contradicted)
// with the seller's answer in its finding, and the buy is not recorded canceled while it is
// live at the seller.
func TestCancelAtASellerThatListsNothing(t *testing.T) {
	c := begin(t)
	id := place(t, c, "key-"+randomID(t), broadcastBuy(t))
	op := finished(t, c, id, "completed")
	if op.MediaBuyID == "" || len(op.Packages) != 0 {
		t.Fatalf("placed %+v, want a media buy with packages: []", op)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ch, err := c.Change(ctx, id, "key-"+randomID(t), []byte(`{"reason":"the campaign was withdrawn"}`), true)
	if err != nil {
		t.Fatalf("cancel: %v", err)
	}
	changed := finished(t, c, ch.ChangeID, "failed")
	var seen []sellerUpdate
	for _, u := range recordedUpdates(t, suite.broadcast.Base) {
		if u.MediaBuyID == op.MediaBuyID {
			seen = append(seen, u)
		}
	}
	if len(seen) != 1 || !seen[0].Canceled || seen[0].ErrorCode != "" || seen[0].Status == "canceled" {
		t.Fatalf("the seller ran %+v for %s, want one cancellation it answered without canceling", seen, op.MediaBuyID)
	}
	answered := `media buy status "` + seen[0].Status + `"`
	if !strings.Contains(changed.Reason, answered) || !strings.Contains(changed.Reason, "not recorded as applied") {
		t.Errorf("the change's reason %q does not say the seller answered %s", changed.Reason, answered)
	}
	// The change's end is recorded on the buy after the change's own status.
	after := get(t, c, id)
	for deadline := time.Now().Add(30 * time.Second); after.Current != nil && after.Current.ChangeInFlight != "" && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
		after = get(t, c, id)
	}
	if after.Current == nil || after.Current.State == "canceled" || after.Current.LastOutcome != "contradicted" || !strings.Contains(after.Current.LastReason, answered) {
		logTimeline(t, c, id)
		t.Fatalf("after the cancellation the seller did not do: %+v", after.Current)
	}
	evs := timeline(t, c, id)
	if !slices.ContainsFunc(evs, func(e api.Event) bool {
		return e.Type == "modification_governance_check" && detailOf(e)["unlisted"] == true
	}) {
		logTimeline(t, c, id)
		t.Errorf("the change was not marked planned from buyflow's record (unlisted)")
	}
}

// A guaranteed seller restarted during the IO review forgets the buy's task (it keeps tasks in
// memory) and answers REFERENCE_NOT_FOUND, though it already created the order upstream. The
// buy is not failed on that answer: it keeps waiting through the lost-task grace, with the
// reason on its timeline, and only then fails with a finding a person can act on.
func TestSellerRestartedMidReview(t *testing.T) {
	c := begin(t)
	domain := brandDomain(t)
	id := place(t, c, "key-"+randomID(t), guaranteedBuy(t, restartedID, domain, ""))
	r := suite.desk.underReview(t, domain)
	// The review starts before the seller answers the create: restart it once buyflow holds the
	// task it answered.
	eventually(t, c, id, 60*time.Second, "the create's submitted answer", func(e api.Event) bool { return e.To == "submitted" })
	task := get(t, c, id).SellerTaskID
	if err := suite.restarted.Restart(); err != nil {
		t.Fatalf("restart the seller: %v", err)
	}

	// Polls that found the seller down while it restarted (a Node start takes seconds on a busy
	// machine) may open its circuit breaker: the first poll of the restarted seller then waits
	// out the breaker's 60 s cool-down, so the wait covers it and a poll interval.
	first := eventually(t, c, id, 2*time.Minute, "the first REFERENCE_NOT_FOUND", func(e api.Event) bool {
		return e.Type == "poll" && detailOf(e)["error_code"] == "REFERENCE_NOT_FOUND"
	})
	if !strings.Contains(first.Reason, "records may lag") || !strings.Contains(first.Reason, task) {
		t.Errorf("the first lost answer says %q", first.Reason)
	}
	since, err := time.Parse(time.RFC3339, fmt.Sprint(detailOf(first)["lost_since"]))
	if err != nil {
		t.Fatalf("lost_since of %s: %v", first.Detail, err)
	}
	// Not failed at once: the buy still waits, though the seller answered REFERENCE_NOT_FOUND
	// (read while the grace surely lasts; the timeline below proves it for a slower reader).
	if op := get(t, c, id); time.Since(since) < lostTaskGrace-2*time.Second && op.Status != "submitted" {
		logTimeline(t, c, id)
		t.Fatalf("right after the seller lost the task: %s (%q)", op.Status, op.Reason)
	}

	op := finished(t, c, id, "failed")
	evs := timeline(t, c, id)
	lost := reached(t, evs, "failed")
	d := detailOf(lost)
	if lost.Type != "lost_task" || d["finding"] != "lost_task" || d["seller"] != restartedID || d["task_id"] != task || d["may_exist"] == "" || d["check"] == "" {
		logTimeline(t, c, id)
		t.Fatalf("failed by %s %s, want the lost-task finding", lost.Type, lost.Detail)
	}
	at, err := time.Parse(time.RFC3339Nano, lost.At)
	if err != nil {
		t.Fatal(err)
	}
	if waited := at.Sub(since); waited < lostTaskGrace-time.Second { // lost_since is kept to the second
		t.Errorf("failed %v after the first lost answer, within the %v grace", waited, lostTaskGrace)
	}
	po, _ := d["po_number"].(string)
	for _, want := range []string{"lost seller task", restartedID, task, po, "may hold"} {
		if want == "" || !strings.Contains(op.Reason, want) {
			t.Errorf("reason %q lacks %q", op.Reason, want)
		}
	}
	// What the finding warns of is there: the seller created the order before it restarted.
	if r.orderID == "" {
		t.Errorf("the seller created no order upstream for %s", domain)
	}
	suite.desk.approve(domain) // let nothing hold the upstream task
}

// The helpers the end-to-end suites share.
var (
	randomID    = e2etest.RandomID
	timeline    = e2etest.Timeline
	logTimeline = e2etest.LogTimeline
	place       = e2etest.Place
	finished    = e2etest.Finished
	get         = e2etest.Get
	reached     = e2etest.Reached
	detailOf    = e2etest.DetailOf
)
