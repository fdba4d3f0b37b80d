package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/apiclient"
	"github.com/buyflow/buyflow/internal/devstack"
	"github.com/buyflow/buyflow/internal/statusevent"
)

// A buy whose submit names a Slack id: the requester hears, in that conversation, that it
// waits for approval and who approved or rejected it, that it was placed (with the seller's
// media buy id) or why it failed; a buy that named none posts nothing to its requester.
func TestRequesterIsToldInSlack(t *testing.T) {
	c := begin(t)
	if suite.slackURL == "" {
		t.Skip("no Slack sink to read the requester's messages from (set BUYFLOW_E2E_SLACK_URL)")
	}
	for _, tc := range []struct {
		name   string
		buy    buy
		decide string
		final  string
		want   [][]string // the requester's messages, in order, each with these texts
	}{
		// An async seller takes the buy as a long-running task (submitted): the requester hears
		// that it waits on the seller, once, then how it ended.
		{"placed", buy{Sim: "async_complete"}, "", "completed", [][]string{{"Waiting for the seller", "sim-seller"}, {"Placed", "sim-seller"}}},
		{"failed", buy{Sim: "async_fail"}, "", "failed", [][]string{{"Waiting for the seller"}, {"Failed"}}},
		{"approved", buy{Budgets: []float64{12000, 3000}, Sim: "async_complete"}, "approve", "completed", [][]string{
			{"Waiting for approval", "<@U0LOCALAPPROVER>"}, {"Approved", "by <@U0LOCALAPPROVER>"}, {"Waiting for the seller"}, {"Placed"},
		}},
		{"rejected", buy{RequireApproval: true, Sim: "async_complete"}, "reject", "rejected", [][]string{
			{"Waiting for approval"}, {"Rejected", "by <@U0LOCALAPPROVER>", "e2e: reject"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			requester := "U0REQ" + strings.ToUpper(randomID(t))
			tc.buy.PO, tc.buy.NotifySlack = po(t), requester
			sub := submit(t, c, tc.buy)
			if tc.decide != "" {
				op := waitFor(t, c, sub.OperationID, 30*time.Second, awaitingApproval)
				// As a person would: the requester is told it waits before anyone decides
				// (a request told after its decision is dropped as stale).
				requesterMessages(t, requester, 1)
				decide(t, op, tc.decide)
			}
			finished(t, c, sub.OperationID, tc.final)
			msgs := requesterMessages(t, requester, len(tc.want))
			for i, want := range tc.want {
				body := asSlackReads(t, msgs[i].Body)
				for _, w := range append(want, sub.OperationID, tc.buy.PO) {
					if !strings.Contains(body, w) {
						t.Errorf("message %d lacks %q: %s", i, w, body)
					}
				}
			}
			if tc.final == "completed" && !strings.Contains(asSlackReads(t, msgs[len(msgs)-1].Body), "media buy id is `") {
				t.Errorf("the placed message has no seller media buy id: %s", msgs[len(msgs)-1].Body)
			}
		})
	}
	t.Run("quiet", func(t *testing.T) {
		t.Parallel()
		sub := submit(t, c, buy{PO: po(t), Sim: "async_complete"})
		finished(t, c, sub.OperationID, "completed")
		if suite.local != nil {
			// The bus has taken the buy's last event: were it for the notifier, its rule
			// would have queued it now, before any event of the buy below.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := suite.local.Events.WaitFor(ctx, func(evs []statusevent.Event) bool {
				return slices.ContainsFunc(evs, func(ev statusevent.Event) bool {
					return ev.Detail.OperationID == sub.OperationID && ev.Detail.To == "completed"
				})
			}); err != nil {
				t.Fatalf("the quiet buy's completed event never reached the bus: %v", err)
			}
		}
		// A buy that asks to be told, placed after it: once its requester has heard, the
		// notifier has handled events published after every event of the quiet buy.
		requester := "U0REQ" + strings.ToUpper(randomID(t))
		later := submit(t, c, buy{PO: po(t), Sim: "sync", NotifySlack: requester})
		finished(t, c, later.OperationID, "completed")
		requesterMessages(t, requester, 1)
		msgs, err := apiclient.SlackMessages(context.Background(), nil, suite.slackURL)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			if strings.Contains(string(m.Body), sub.OperationID) {
				t.Errorf("a buy that asked for nothing got a message in %s: %s", m.Channel, m.Body)
			}
		}
	})
}

// Slack refuses the requester's message once: the notifier releases its receipt, so the
// retry of the status event tells the requester, once.
func TestRequesterIsToldAfterSlackRefusedOnce(t *testing.T) {
	c := begin(t)
	if suite.local == nil {
		t.Skip("a refusal is scripted in the local stack's fake Slack")
	}
	requester := "U0REQ" + strings.ToUpper(randomID(t))
	refused := suite.local.Slack.Refuse(requester, "internal_error", 1)
	sub := submit(t, c, buy{PO: po(t), Sim: "sync", NotifySlack: requester})
	finished(t, c, sub.OperationID, "completed")
	msgs := requesterMessages(t, requester, 1)
	if body := asSlackReads(t, msgs[0].Body); !strings.Contains(body, "Placed") || !strings.Contains(body, sub.OperationID) {
		t.Errorf("the requester's message does not say the buy was placed: %s", body)
	}
	if n := refused(); n != 1 {
		t.Errorf("Slack refused %d posts to the requester, want 1 (the message came without the refusal)", n)
	}
}

// asSlackReads is a posted message's JSON with Slack's markup as Slack reads it (json.Marshal
// writes < and > as \u003c and \u003e).
func asSlackReads(t *testing.T, body json.RawMessage) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// requesterMessages waits for n messages to the requester's Slack id and returns them in
// arrival order; more than n (a message told twice) fails.
func requesterMessages(t *testing.T, requester string, n int) []apiclient.SlackMessage {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		msgs, err := apiclient.SlackMessages(context.Background(), nil, suite.slackURL)
		if err != nil {
			t.Fatal(err)
		}
		var mine []apiclient.SlackMessage
		for _, m := range msgs {
			if m.Channel == requester {
				mine = append(mine, m)
			}
		}
		if len(mine) >= n || time.Now().After(deadline) {
			if len(mine) != n {
				var texts []string
				for _, m := range mine {
					texts = append(texts, m.Text)
				}
				t.Fatalf("%d messages to the requester, want %d: %q", len(mine), n, texts)
			}
			// A message told twice comes from a second delivery of one status event (at least
			// once, on AWS as here), which no later event of the test is ordered after: a bounded
			// wait, longer than the notifier's retries of a failed event, is the honest check.
			time.Sleep(2 * time.Second)
			return requesterMessagesNow(t, requester, n)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func requesterMessagesNow(t *testing.T, requester string, n int) []apiclient.SlackMessage {
	t.Helper()
	msgs, err := apiclient.SlackMessages(context.Background(), nil, suite.slackURL)
	if err != nil {
		t.Fatal(err)
	}
	var mine []apiclient.SlackMessage
	for _, m := range msgs {
		if m.Channel == requester {
			mine = append(mine, m)
		}
	}
	if len(mine) != n {
		t.Fatalf("%d messages to the requester, want %d", len(mine), n)
	}
	return mine
}

// A campaign whose submit names a Slack id: the requester hears that it was submitted, that it
// waits for its one approval of the two legs governance let through (and their total, the one
// the threshold was compared with), and how it ended: two of three legs placed, what they
// committed. A change to a buy that asked to be told is told there too: waiting for approval
// and applied, each with the budget before and after.
func TestRequesterIsToldAboutTheirCampaignAndChanges(t *testing.T) {
	c := begin(t)
	if suite.slackURL == "" {
		t.Skip("no Slack sink to read the requester's messages from (set BUYFLOW_E2E_SLACK_URL)")
	}
	t.Run("campaign", func(t *testing.T) {
		t.Parallel()
		requester := "U0REQ" + strings.ToUpper(randomID(t))
		root, err := devstack.FindRepoRoot(".")
		if err != nil {
			t.Fatal(err)
		}
		spec := apiclient.CampaignSpec{Policy: "best_effort", NotifySlack: requester}
		tag := po(t)
		for i, budget := range []float64{4000.25, 9000, 6000} {
			leg := apiclient.LegSpec{SellerID: campaignSellers[i], PO: fmt.Sprintf("%s-%d", tag, i), Budget: budget, Sim: "async_complete"}
			if i == 1 {
				leg.Sim = "denied"
			}
			spec.Legs = append(spec.Legs, leg)
		}
		body, err := spec.Body(root)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		sub, code, err := c.SubmitCampaign(ctx, "key-"+randomID(t), body)
		if err != nil || code != 202 {
			t.Fatalf("submit campaign: HTTP %d: %v", code, err)
		}
		// As a person would: the requester hears it waits before anyone decides.
		waiting := requesterMessages(t, requester, 2)
		toldOnce(t, waiting, sub.CampaignID, [][]string{
			{"Submitted: your campaign", "3 legs (USD 19,000.25)"},
			{"Waiting for approval: your campaign", "approve 2 legs (USD 10,000.25) in one decision", "<@U0LOCALAPPROVER>"},
		})
		decide(t, api.MediaBuy{OperationID: sub.CampaignID, PONumber: sub.CampaignID}, "approve")
		if cp := finishedCampaign(t, c, sub.CampaignID); cp.Status != "partially_completed" {
			t.Fatalf("campaign %s", cp.Status)
		}
		toldOnce(t, requesterMessages(t, requester, 3)[2:], sub.CampaignID, [][]string{
			{"Partially completed: your campaign", "2 of 3 legs placed", "committing USD 10,000.25"},
		})
	})
	t.Run("change", func(t *testing.T) {
		t.Parallel()
		requester := "U0REQ" + strings.ToUpper(randomID(t))
		sub := submit(t, c, buy{PO: po(t), Sim: "sync", Budgets: []float64{3000}, NotifySlack: requester})
		finished(t, c, sub.OperationID, "completed")
		requesterMessages(t, requester, 1) // placed
		acc, err := c.Change(context.Background(), sub.OperationID, "chg-key-told-"+randomID(t),
			[]byte(`{"budget":{"total":14000.25},"context":{"sim":"sync"}}`), false)
		if err != nil {
			t.Fatal(err)
		}
		chg := waitFor(t, c, acc.ChangeID, 30*time.Second, awaitingApproval)
		toldOnce(t, requesterMessages(t, requester, 2)[1:], acc.ChangeID, [][]string{
			{"Waiting for approval: your change", "USD 3,000.00 → USD 14,000.25", "<@U0LOCALAPPROVER>", sub.OperationID},
		})
		decide(t, chg, "approve")
		finished(t, c, acc.ChangeID, "completed")
		toldOnce(t, requesterMessages(t, requester, 4)[2:], acc.ChangeID, [][]string{
			{"Approved: your change", "by <@U0LOCALAPPROVER>"},
			{"Applied: your change", "the budget is now USD 3,000.00 → USD 14,000.25"},
		})
	})
}

// toldOnce checks that msgs are the wanted messages about id, each exactly once, in any order
// (the bus keeps none between events).
func toldOnce(t *testing.T, msgs []apiclient.SlackMessage, id string, want [][]string) {
	t.Helper()
	if len(msgs) != len(want) {
		t.Fatalf("%d messages, want %d", len(msgs), len(want))
	}
	used := make([]bool, len(msgs))
	for _, w := range want {
		found := false
		for i, m := range msgs {
			body := asSlackReads(t, m.Body)
			matches := !used[i] && strings.Contains(body, id)
			for _, s := range w {
				matches = matches && strings.Contains(body, s)
			}
			if matches {
				used[i], found = true, true
				break
			}
		}
		if !found {
			var bodies []string
			for _, m := range msgs {
				bodies = append(bodies, asSlackReads(t, m.Body))
			}
			t.Errorf("no message about %s says %q; got:\n%s", id, w, strings.Join(bodies, "\n"))
		}
	}
}
