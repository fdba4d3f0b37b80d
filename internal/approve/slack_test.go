package approve_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/buyflow/buyflow/internal/approval"
	"github.com/buyflow/buyflow/internal/approvaltest"
	"github.com/buyflow/buyflow/internal/slack"
)

func TestWebhookDeliveryPostsOneSharedMessageAndAFollowUp(t *testing.T) {
	e := approvaltest.NewEnv(t, "")
	srv := httptest.NewServer(e.Slack)
	t.Cleanup(srv.Close)
	hook, err := slack.NewWebhookClient(srv.URL+"/hooks/approvals", slack.WithHTTPClient(srv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	e.Build(approval.Config{Ledger: e.Store, Slack: hook, Delivery: slack.Shared,
		Signer: e.Signer, Policy: e.Policy, BaseURL: approvaltest.BaseURL, Now: e.Clock.Now, Logger: e.Logger})
	id := e.Request(approvaltest.Token(1))
	msgs := e.Slack.Messages()
	if len(msgs) != 1 || msgs[0].Kind != "webhook" {
		t.Fatalf("slack got %+v, want one shared message", msgs)
	}
	for _, who := range []string{approvaltest.Alice, approvaltest.Bob} {
		if !strings.Contains(string(msgs[0].Body), "approver="+who) {
			t.Errorf("shared message lacks %s's link", who)
		}
	}
	e.Post(e.LinkIn(msgs[0].Body, id, approvaltest.Alice), "approve", "")
	msgs = e.Slack.Messages()
	if len(msgs) != 2 || !strings.Contains(msgs[1].Text, "Approved by") {
		t.Errorf("follow-up = %+v", msgs)
	}
}
