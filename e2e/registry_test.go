package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/agents"
	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/apiclient"
	"github.com/buyflow/buyflow/internal/devstack"
	"github.com/buyflow/buyflow/internal/registry"
)

// addSeller adds, through the operator API, a seller of its own for the test: the local
// stack's simulated seller under a new id (same URL, credential and webhook keys), as an
// operator would add a real one. Nothing is deployed.
func addSeller(t *testing.T) string {
	t.Helper()
	return addSellerWith(t, nil)
}

// addSellerWith is addSeller with change applied to the agent before it is added.
func addSellerWith(t *testing.T, change func(*adcp.Agent)) string {
	t.Helper()
	id, added, err := tryAddSeller(t, change)
	if err != nil {
		t.Fatalf("add %s: %v", id, err)
	}
	if added.Capabilities == nil || added.Capabilities.Error != "" || added.Capabilities.ReplayTTLSeconds <= 0 {
		t.Fatalf("added %s without its capabilities: %+v", id, added.Capabilities)
	}
	return id
}

// operator is a client of the local stack's operator.
func operator(t *testing.T) *apiclient.Client {
	t.Helper()
	if suite.local == nil {
		t.Skip("the registry tests add agents as the local stack's operator")
	}
	op := client(t, "ops")
	op.Principal = devstack.LocalOperator
	return op
}

// tryAddSeller asks the operator API to add a copy of the simulated seller under a new id,
// changed by change, and returns the id and what the API answered.
func tryAddSeller(t *testing.T, change func(*adcp.Agent)) (string, registry.Record, error) {
	t.Helper()
	op := operator(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sim, err := op.Agent(ctx, devstack.SellerID)
	if err != nil {
		t.Fatalf("show %s: %v", devstack.SellerID, err)
	}
	a := sim.Agent
	a.ID = "e2e-seller-" + randomID(t)
	if change != nil {
		change(&a)
	}
	body, _ := json.Marshal(a)
	added, err := op.ChangeAgent(ctx, http.MethodPost, agents.Prefix, body)
	return a.ID, added, err
}

// agentSecret creates a secret under the agents' prefix in the local stack's Secrets Manager
// and returns its name.
func agentSecret(t *testing.T, name, value string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	secret := devstack.AgentSecretPrefix + name + "-" + randomID(t)
	sm := secretsmanager.New(secretsmanager.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(suite.local.EmulatorURL),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "local", SecretAccessKey: "local"}, nil
		}),
	})
	if _, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(secret), SecretString: aws.String(value)}); err != nil {
		t.Fatalf("create the secret %s: %v", secret, err)
	}
	return secret
}

// A seller added through the API takes the very next buy: no deploy, no restart, the warm
// functions find it on their first miss.
func TestAgentAddedThroughTheAPIIsUsedByTheNextBuy(t *testing.T) {
	c := begin(t)
	seller := addSeller(t)
	sub := submit(t, c, buy{PO: po(t), Sim: "async_complete", Seller: seller})
	op := finished(t, c, sub.OperationID, "completed")
	if op.SellerID != seller || op.MediaBuyID == "" {
		t.Fatalf("completed %+v, want seller %s and a media buy id", op, seller)
	}
	// Its webhooks were verified with the keys the registry gave it.
	if evs := webhookTimeline(t, c, sub.OperationID); !completedByWebhook(evs) {
		t.Errorf("no completed webhook from the new seller recorded (timeline %v)", types(evs))
	}
	// An update goes through the same route table (PATCH), and the trail says who did what.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ops := client(t, "ops")
	ops.Principal = devstack.LocalOperator
	if _, err := ops.ChangeAgent(ctx, http.MethodPatch, agents.Prefix+"/"+seller, []byte(`{"settings":{"sweep_reads_per_second":3}}`)); err != nil {
		t.Fatalf("update: %v", err)
	}
	shown, err := ops.Agent(ctx, seller)
	if err != nil {
		t.Fatal(err)
	}
	var trail []string
	for _, h := range shown.History {
		if h.Actor != devstack.LocalOperator {
			t.Errorf("event %s by %q, want %s", h.Action, h.Actor, devstack.LocalOperator)
		}
		trail = append(trail, h.Action)
	}
	if string(shown.Settings) != `{"sweep_reads_per_second":3}` || !slices.Contains(trail, "added") || !slices.Contains(trail, "updated") {
		t.Errorf("after the update: settings %s, trail %v", shown.Settings, trail)
	}
}

// A disabled seller gets no new buy (a 422 that says so, nothing started) while the buy it
// was already working on finishes.
func TestDisabledSellerRefusesNewBuysAndFinishesOpenOnes(t *testing.T) {
	c := begin(t)
	seller := addSeller(t)
	open := submit(t, c, buy{PO: po(t), Sim: "async_complete", Seller: seller})
	waitFor(t, c, open.OperationID, time.Minute, func(op api.MediaBuy) bool {
		return op.SellerTaskID != "" || apiclient.Terminal(op.Status)
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ops := client(t, "ops")
	ops.Principal = devstack.LocalOperator
	if _, err := ops.ChangeAgent(ctx, http.MethodPost, agents.Prefix+"/"+seller+"/disable", []byte(`{"reason":"e2e: paused"}`)); err != nil {
		t.Fatalf("disable: %v", err)
	}
	_, _, err := c.Submit(ctx, "key-"+randomID(t), buy{PO: po(t), Sim: "async_complete", Seller: seller}.body(t))
	var se *apiclient.StatusError
	if !errors.As(err, &se) || se.Status != 422 || se.Code != "seller_disabled" {
		t.Fatalf("a new buy at the disabled seller: %v", err)
	}
	finished(t, c, open.OperationID, "completed")
	page, err := c.List(ctx, 50, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Items) != 1 {
		t.Errorf("the tenant has %d buys, want the one accepted before the disable", len(page.Items))
	}
}

// An HMAC webhook secret under 32 bytes (one the webhook function could never verify with) is
// refused when an operator adds the agent that names it: 422 invalid_agent naming the secret
// and its length, the agent not stored. The agents function reads the secret with its own role.
func TestAgentWithAShortHMACSecretIsRefusedAtAdd(t *testing.T) {
	op := operator(t)
	const short = "e2e-16-byte-hmac"
	secret := agentSecret(t, "e2e-short-webhook", short)
	id, _, err := tryAddSeller(t, func(a *adcp.Agent) {
		a.Webhook = &adcp.WebhookConfig{Mode: adcp.WebhookHMAC, HMACSecretRef: secret}
	})
	var se *apiclient.StatusError
	if !errors.As(err, &se) || se.Status != 422 || se.Code != "invalid_agent" ||
		!strings.Contains(se.Error(), secret) || !strings.Contains(se.Error(), "16 bytes") || strings.Contains(se.Error(), short) {
		t.Fatalf("add with a 16-byte HMAC secret: %v, want 422 invalid_agent naming %s and its length, not its value", err, secret)
	}
	if _, err := op.Agent(context.Background(), id); err == nil {
		t.Errorf("%s was refused, yet stored", id)
	}
}

// A seller registered for legacy HMAC webhooks has each webhook verified with the shared secret
// its registry entry names (read by the webhook function from Secrets Manager): the simulated
// seller's RFC 9421-signed webhooks carry no such signature and are refused with 401, and the
// buy completes all the same through the sweep and the poll.
func TestHMACSellerWebhooksAreVerifiedWithItsSecret(t *testing.T) {
	c := begin(t)
	// HMAC secrets are at least 32 bytes (webhookauth refuses shorter ones).
	secret := agentSecret(t, "e2e-webhook", "e2e-shared-"+randomID(t)+strings.Repeat("k", 32))
	seller := addSellerWith(t, func(a *adcp.Agent) {
		a.Webhook = &adcp.WebhookConfig{Mode: adcp.WebhookHMAC, HMACSecretRef: secret}
	})
	sub := submit(t, c, buy{PO: po(t), Sim: "async_complete", Seller: seller})
	finished(t, c, sub.OperationID, "completed")
	// The buy's poll may read the finished task before the seller's completed webhook was
	// answered: wait until the seller recorded that attempt (a 401 is not retried).
	var refused, accepted int
	for deadline, done := time.Now().Add(15*time.Second), false; !done && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		refused, accepted = 0, 0
		for _, d := range suite.local.Seller.Deliveries() {
			if !strings.Contains(d.URL, sub.OperationID) {
				continue
			}
			done = done || d.Status == "completed"
			switch d.StatusCode {
			case http.StatusUnauthorized:
				refused++
			case 0:
			default:
				accepted++
			}
		}
	}
	if refused == 0 || accepted != 0 {
		t.Errorf("the seller's webhooks for %s: %d refused with 401, %d answered otherwise; want every one refused", sub.OperationID, refused, accepted)
	}
}
