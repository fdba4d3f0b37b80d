package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/devstack"
	"github.com/buyflow/buyflow/internal/statusevent"
)

// Every path of the workflow: each transition the ledger records reaches the status event bus
// (the local stack's own rule delivers every buyflow event to its sink) as exactly one event
// id, and the events, in sequence order, chain from the buy's creation to its final status:
// the same transitions the buy's timeline lists, with nothing missing and nothing twice once
// deduplicated on the id, as a consumer does.
func TestEveryTransitionIsPublishedOnceInOrder(t *testing.T) {
	c := begin(t)
	if suite.local == nil {
		t.Skip("the event sink is the local stack's; a deployed stack's bus is observed with its own rules")
	}
	for _, tc := range []struct {
		name   string
		buy    buy
		decide string // approve or reject from the Slack link, when the buy waits for a person
		final  []string
	}{
		{"completed by webhook", buy{Sim: "async_complete"}, "", []string{"completed"}},
		{"completed without webhooks", buy{Sim: "async_complete,wh_drop_all"}, "", []string{"completed"}},
		{"seller task failed", buy{Sim: "async_fail"}, "", []string{"failed"}},
		{"seller refused", buy{Sim: "rejected"}, "", []string{"failed", "rejected"}},
		{"governance denied", buy{Sim: "denied"}, "", []string{"rejected"}},
		{"approved", buy{Budgets: []float64{12000, 3000}, Sim: "async_complete"}, "approve", []string{"completed"}},
		{"rejected by the approver", buy{RequireApproval: true, Sim: "async_complete"}, "reject", []string{"rejected"}},
		{"approval expired", buy{RequireApproval: true, Sim: "async_complete"}, "", []string{"expired"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.buy.PO = po(t)
			sub := submit(t, c, tc.buy)
			if tc.decide != "" {
				op := waitFor(t, c, sub.OperationID, 30*time.Second, awaitingApproval)
				decide(t, op, tc.decide)
			}
			op := waitFor(t, c, sub.OperationID, time.Duration(runConfig.ApprovalTimeoutSeconds)*time.Second+90*time.Second, nil)
			if !contains(tc.final, op.Status) {
				t.Fatalf("final status %s (reason %q), want one of %v", op.Status, op.Reason, tc.final)
			}
			evs := published(t, sub.OperationID, op.Status)
			checkChain(t, evs, op.Status)
			// The timeline's transitions, in order, are the published ones.
			var want []string
			for _, e := range settled(t, c, sub.OperationID) {
				if e.To != "" {
					want = append(want, e.To)
				}
			}
			var got []string
			for _, ev := range evs {
				got = append(got, ev.Detail.To)
			}
			if strings.Join(got, " → ") != strings.Join(want, " → ") {
				t.Errorf("published %s\nthe timeline has %s", strings.Join(got, " → "), strings.Join(want, " → "))
			}
			last := evs[len(evs)-1].Detail
			if last.Amount == nil || last.Amount.Currency != "USD" || last.SellerID == "" || last.Tenant == "" ||
				!strings.HasSuffix(last.Links.Self, "/v1/media-buys/"+sub.OperationID) {
				t.Errorf("the final event lacks the buy's facts: %+v", last)
			}
			if op.Status == "completed" && last.MediaBuyID == "" {
				t.Error("the completed event has no seller media buy id")
			}
			if op.Status != "completed" && last.Reason == "" {
				t.Errorf("the %s event has no reason", op.Status)
			}
		})
	}
	if n := suite.local.StreamFailures(); n > 0 {
		t.Errorf("%d ledger stream records were never published", n)
	}
	if bad := suite.local.Events.Malformed(); len(bad) > 0 {
		t.Errorf("the sink received %d deliveries that are not status events, e.g. %s", len(bad), bad[0])
	}
}

// published waits until the sink holds the operation's event into final and returns the
// operation's events deduplicated on the event id, in sequence order, failing on two
// deliveries of one id that differ.
func published(t *testing.T, id, final string) []statusevent.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := suite.local.Events.WaitFor(ctx, func(evs []statusevent.Event) bool {
		for _, ev := range evs {
			if ev.Detail.OperationID == id && ev.Detail.To == final {
				return true
			}
		}
		return false
	})
	if err != nil {
		t.Fatalf("no %s event for %s: %v", final, id, err)
	}
	// Give a late duplicate the time to show. Delivery is at least once, and only for the
	// reason it is on AWS: the publisher's SDK sends a PutEvents again when it could not read
	// the answer (seen here as "use of closed network connection" on a 200, the AWS SDK's
	// known client-side race), and EventBridge, which has no idempotency token, takes the
	// entries twice. A second delivery must be the same event, id and all, so a consumer
	// deduping on the id sees it once, and its PutEvents must have been resent: a repeat
	// without one is the stack producing an event twice. The wait is bounded, not a condition:
	// the final event is the buy's last, so no later event is ordered after a duplicate of it.
	time.Sleep(1500 * time.Millisecond)
	resent := map[string]int{}
	for _, e := range suite.local.Trace.For(id) {
		if e.Kind == devstack.TraceResend {
			resent[e.EventID]++
		}
	}
	first, repeats := map[string]string{}, map[string]int{}
	for _, ev := range suite.local.Events.Events() {
		if ev.Detail.OperationID != id {
			continue
		}
		b, err := json.Marshal(ev.Detail)
		if err != nil {
			t.Fatal(err)
		}
		prev, seen := first[ev.Detail.EventID]
		switch {
		case !seen:
			first[ev.Detail.EventID] = string(b)
		case prev != string(b):
			t.Errorf("event %s delivered twice with different details:\n%s\n%s", ev.Detail.EventID, prev, b)
		case repeats[ev.Detail.EventID] >= resent[ev.Detail.EventID]:
			t.Errorf("event %s delivered %d times, but its PutEvents was resent %d times: the stack published it twice",
				ev.Detail.EventID, repeats[ev.Detail.EventID]+2, resent[ev.Detail.EventID])
		default:
			t.Logf("event %s delivered again after the SDK resent its PutEvents (the same event)", ev.Detail.EventID)
		}
		if seen {
			repeats[ev.Detail.EventID]++
		}
	}
	return suite.local.Events.Of(id)
}

// checkChain checks that evs start at the buy's creation, each moves from the status the one
// before moved to, and the last reaches final.
func checkChain(t *testing.T, evs []statusevent.Event, final string) {
	t.Helper()
	if len(evs) == 0 {
		t.Fatal("no events")
	}
	prev := ""
	for i, ev := range evs {
		d := ev.Detail
		if d.From != prev {
			t.Errorf("event %d (%s, sequence %d) moves from %q, but the one before moved to %q", i, d.EventID, d.Sequence, d.From, prev)
		}
		if ev.DetailType != statusevent.DetailTypeMediaBuy || d.Kind != statusevent.KindMediaBuy {
			t.Errorf("event %d is a %s of kind %s", i, ev.DetailType, d.Kind)
		}
		prev = d.To
	}
	if prev != final {
		t.Errorf("the last event moves to %s, want %s", prev, final)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
