package approve_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/buyflow/buyflow/internal/approval"
	"github.com/buyflow/buyflow/internal/slack"
)

func TestWebhookDeliveryPostsOneSharedMessageAndAFollowUp(t *testing.T) {
	e := newEnv(t, "")
	srv := httptest.NewServer(e.sink)
	t.Cleanup(srv.Close)
	hook, err := slack.NewWebhookClient(srv.URL+"/hooks/approvals", slack.WithHTTPClient(srv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	e.build(approval.Config{Ledger: e.store, Slack: hook, Delivery: slack.Shared,
		Signer: e.signer, Policy: e.policy, BaseURL: baseURL, Now: e.clk.Now, Logger: e.logger})
	id := e.request(token(1))
	msgs := e.sink.Messages()
	if len(msgs) != 1 || msgs[0].Kind != "webhook" {
		t.Fatalf("slack got %+v, want one shared message", msgs)
	}
	for _, who := range []string{alice, bob} {
		if !strings.Contains(string(msgs[0].Body), "approver="+who) {
			t.Errorf("shared message lacks %s's link", who)
		}
	}
	e.post(e.link2(msgs[0].Body, id, alice), "approve", "")
	msgs = e.sink.Messages()
	if len(msgs) != 2 || !strings.Contains(msgs[1].Text, "Approved by") {
		t.Errorf("follow-up = %+v", msgs)
	}
}
