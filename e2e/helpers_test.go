package e2e

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/e2e/e2etest"
	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/apiclient"
	"github.com/buyflow/buyflow/internal/devstack"
)

// buy describes one request built from examples/media-buy.json.
type buy apiclient.Buy

// body renders b as a submit body.
func (b buy) body(t testing.TB) []byte {
	t.Helper()
	root, err := devstack.FindRepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	out, err := apiclient.Buy(b).Body(root)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func po(t *testing.T) string { return "PO-E2E-" + strings.ToUpper(randomID(t)) }

// submit posts b and fails the test unless it is accepted.
func submit(t *testing.T, c *apiclient.Client, b buy) api.Submitted {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sub, _, err := c.Submit(ctx, "key-"+randomID(t), b.body(t))
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	if sub.OperationID == "" {
		t.Fatalf("submit: no operation id in %+v", sub)
	}
	return sub
}

// waitFor polls the operation until until is true (nil: a terminal status) and returns it.
func waitFor(t *testing.T, c *apiclient.Client, id string, timeout time.Duration, until func(api.MediaBuy) bool) api.MediaBuy {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var seen []string
	op, err := c.Wait(ctx, id, 200*time.Millisecond, until, func(op api.MediaBuy) { seen = append(seen, op.Status) })
	if err != nil {
		t.Fatalf("operation %s: %v (statuses seen: %s)", id, err, strings.Join(seen, " → "))
	}
	t.Logf("operation %s: %s", id, strings.Join(seen, " → "))
	return op
}

// finished waits for a terminal status and checks it.
func finished(t *testing.T, c *apiclient.Client, id, want string) api.MediaBuy {
	t.Helper()
	op := waitFor(t, c, id, 90*time.Second, nil)
	if op.Status != want {
		t.Errorf("final status %s (reason %q), want %s", op.Status, op.Reason, want)
		logTimeline(t, c, id)
	}
	return op
}

func types(evs []api.Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Type)
	}
	return out
}

// reached returns the event that moved the operation to status, if any.
func reached(evs []api.Event, status string) (api.Event, bool) {
	i := slices.IndexFunc(evs, func(e api.Event) bool { return e.To == status })
	if i < 0 {
		return api.Event{}, false
	}
	return evs[i], true
}

// webhookTimeline returns the buy's timeline once the seller's completed webhook is on it
// (completedByWebhook), or after 15 s. A buy the sweep or the poll completed first gets the
// seller's webhook a moment later, recorded stale; a test that reads the timeline at the final
// status would race it.
func webhookTimeline(t testing.TB, c *apiclient.Client, id string) []api.Event {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		evs := timeline(t, c, id)
		if completedByWebhook(evs) || time.Now().After(deadline) {
			return evs
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// completedByWebhook reports whether the seller's signed completed webhook reached the buy
// and was recorded: it moved the buy to completed, or it found that move already made by the
// buy's poll or the reconciliation sweep and was recorded stale. The local stack sweeps every
// 10 s, and on a loaded machine the sweep or the poll can read the finished task at the seller
// before the seller's webhook arrives; both are the product working. A webhook refused (bad
// signature, unknown seller) leaves no such event, so the check still fails when webhooks do.
func completedByWebhook(evs []api.Event) bool {
	done, ok := reached(evs, "completed")
	if !ok {
		return false
	}
	if done.Type == "webhook" {
		return true
	}
	for _, e := range evs {
		var d struct {
			SellerStatus string `json:"seller_status"`
		}
		if e.Type == "webhook" && json.Unmarshal(e.Detail, &d) == nil && d.SellerStatus == "completed" && strings.HasPrefix(e.Reason, "stale") {
			return true
		}
	}
	return false
}

// approvalLink waits for the Slack message of the operation's approval and returns its link.
func approvalLink(t *testing.T, op api.MediaBuy) string {
	t.Helper()
	if suite.slackURL == "" {
		t.Skip("no Slack sink to read approval links from (set BUYFLOW_E2E_SLACK_URL)")
	}
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		msgs, err := apiclient.SlackMessages(context.Background(), nil, suite.slackURL)
		if err != nil {
			t.Fatal(err)
		}
		var mine []apiclient.SlackMessage
		for _, m := range msgs {
			s := string(m.Body) + m.Text
			// A change carries no PO number of its own: an empty one would match every message,
			// and the newest link would be another test's.
			if strings.Contains(s, op.OperationID) || op.PONumber != "" && strings.Contains(s, op.PONumber) {
				mine = append(mine, m)
			}
		}
		if links := apiclient.ApprovalLinks(mine, suite.api); len(links) > 0 {
			return links[len(links)-1]
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("no approval link for %s (PO %s) in Slack after 20 s", op.OperationID, op.PONumber)
	return ""
}

// settled returns the timeline once the workflow has finished its work after the final status
// (the outcome report and the PO lock release follow a webhook's status change by a few
// milliseconds), or after 15 s.
func settled(t testing.TB, c *apiclient.Client, id string) []api.Event {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		evs := timeline(t, c, id)
		if slices.Contains(types(evs), "lock_released") || time.Now().After(deadline) {
			return evs
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// The helpers both end-to-end suites use.
var (
	randomID    = e2etest.RandomID
	timeline    = e2etest.Timeline
	logTimeline = e2etest.LogTimeline
)
