package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/agents"
	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/apiclient"
	"github.com/buyflow/buyflow/internal/devstack"
)

// addSeller adds, through the operator API, a seller of its own for the test: the local
// stack's simulated seller under a new id (same URL, credential and webhook keys), as an
// operator would add a real one. Nothing is deployed.
func addSeller(t *testing.T) string {
	t.Helper()
	if suite.local == nil {
		t.Skip("the registry tests add agents as the local stack's operator")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	op := client(t, "ops")
	op.Principal = devstack.LocalOperator
	sim, err := op.Agent(ctx, devstack.SellerID)
	if err != nil {
		t.Fatalf("show %s: %v", devstack.SellerID, err)
	}
	a := sim.Agent
	a.ID = "e2e-seller-" + randomID(t)
	body, _ := json.Marshal(a)
	added, err := op.ChangeAgent(ctx, http.MethodPost, agents.Prefix, body)
	if err != nil {
		t.Fatalf("add %s: %v", a.ID, err)
	}
	if added.Capabilities == nil || added.Capabilities.Error != "" || added.Capabilities.ReplayTTLSeconds <= 0 {
		t.Fatalf("added %s without its capabilities: %+v", a.ID, added.Capabilities)
	}
	return a.ID
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
