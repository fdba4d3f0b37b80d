package approvals_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/approvals"
	"github.com/buyflow/buyflow/internal/slack"
)

// secretsFunc is a function-typed fake of approvals.SecretGetter.
type secretsFunc func(name string) ([]byte, error)

func (f secretsFunc) Get(_ context.Context, name string) ([]byte, error) { return f(name) }

func TestLoadSecrets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := secretsFunc(func(name string) ([]byte, error) {
		switch name {
		case "keys":
			return []byte(testKeys), nil
		case "bad-keys":
			return []byte(`{"current":"k1","keys":{"k1":"c2hvcnQ"}}`), nil
		case "bot":
			return []byte(`{"bot_token":"xoxb-secret-value"}`), nil
		case "hook":
			return []byte("https://hooks.slack.com/services/T/B/secret-value"), nil
		}
		return nil, errors.New("secrets: " + name + ": no such secret")
	})
	if _, err := approvals.LoadSigner(ctx, store, "keys", time.Now); err != nil {
		t.Errorf("LoadSigner: %v", err)
	}
	if _, err := approvals.LoadSigner(ctx, store, "bad-keys", time.Now); err == nil || strings.Contains(err.Error(), "c2hvcnQ") {
		t.Errorf("LoadSigner(bad) = %v", err)
	}
	if _, d, err := approvals.LoadSlack(ctx, store, "bot"); err != nil || d != slack.Direct {
		t.Errorf("LoadSlack(bot) = %v, %v", d, err)
	}
	if _, d, err := approvals.LoadSlack(ctx, store, "hook"); err != nil || d != slack.Shared {
		t.Errorf("LoadSlack(hook) = %v, %v", d, err)
	}
	if _, _, err := approvals.LoadSlack(ctx, store, "missing"); err == nil {
		t.Error("LoadSlack(missing) succeeded")
	}
}

func TestWebhookDeliveryPostsOneSharedMessageAndAFollowUp(t *testing.T) {
	e := newEnv(t, "")
	srv := httptest.NewServer(e.sink)
	t.Cleanup(srv.Close)
	hook, err := slack.NewWebhookClient(srv.URL+"/hooks/approvals", slack.WithHTTPClient(srv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	e.build(approvals.Config{Ledger: e.store, Slack: hook, Delivery: slack.Shared,
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

func TestNewRefusesIncompleteConfig(t *testing.T) {
	t.Parallel()
	_, err := approvals.NewNotifier(approvals.Config{})
	for _, want := range []string{"no ledger", "no link signer", "no clock", "no Slack client", "no public base URL", "no approvers"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("NewNotifier(empty) = %v, want %q named", err, want)
		}
	}
	_, err = approvals.NewApprover(approvals.Config{}, nil, "")
	for _, want := range []string{"no ledger", "no link signer", "no clock", "no task completer"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("NewApprover(empty) = %v, want %q named", err, want)
		}
	}
}
