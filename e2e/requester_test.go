package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/apiclient"
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
		{"placed", buy{Sim: "async_complete"}, "", "completed", [][]string{{"Placed", "sim-seller"}}},
		{"failed", buy{Sim: "async_fail"}, "", "failed", [][]string{{"Failed"}}},
		{"approved", buy{Budgets: []float64{12000, 3000}, Sim: "async_complete"}, "approve", "completed", [][]string{
			{"Waiting for approval", "<@U0LOCALAPPROVER>"}, {"Approved", "by <@U0LOCALAPPROVER>"}, {"Placed"},
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
		time.Sleep(3 * time.Second) // as long as a requester's message takes to arrive
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
			time.Sleep(2 * time.Second) // a message told twice would show now
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
