package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/apiclient"
	"github.com/buyflow/buyflow/internal/devstack"
)

// campaignSellers are the local stack's three simulated sellers.
var campaignSellers = append([]string{devstack.SellerID}, devstack.OtherSellerIDs...)

// runCampaign posts a three-leg campaign (budgets 1000, 2000, 3000), leg i scripted with
// sims[i], and waits for its final status.
func runCampaign(t *testing.T, c *apiclient.Client, policy string, sims ...string) (api.CampaignSubmitted, api.Campaign) {
	t.Helper()
	sub := submitCampaign(t, c, policy, []float64{1000, 2000, 3000}, sims...)
	return sub, finishedCampaign(t, c, sub.CampaignID)
}

// submitCampaign posts a three-leg campaign with these budgets, leg i scripted with sims[i].
func submitCampaign(t *testing.T, c *apiclient.Client, policy string, budgets []float64, sims ...string) api.CampaignSubmitted {
	t.Helper()
	return submitCampaignSpec(t, c, apiclient.CampaignSpec{Policy: policy}, budgets, sims...)
}

// submitCampaignSpec posts spec with one leg per seller and these budgets, leg i scripted with
// sims[i].
func submitCampaignSpec(t *testing.T, c *apiclient.Client, spec apiclient.CampaignSpec, budgets []float64, sims ...string) api.CampaignSubmitted {
	t.Helper()
	root, err := devstack.FindRepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	tag := po(t)
	for i, seller := range campaignSellers {
		leg := apiclient.LegSpec{SellerID: seller, PO: fmt.Sprintf("%s-%d", tag, i), Budget: budgets[i], Sim: "async_complete"}
		if i < len(sims) && sims[i] != "" {
			leg.Sim = sims[i]
		}
		spec.Legs = append(spec.Legs, leg)
	}
	body, err := spec.Body(root)
	if err != nil {
		t.Fatal(err)
	}
	if spec.Plan {
		// A pushed plan is the governance agent's for every buy that names its id: the test's
		// own id keeps its budget from the other tests', which name the example's.
		body = regexp.MustCompile(`"plan_id":"[^"]*"`).ReplaceAll(body, []byte(`"plan_id":"plan-e2e-`+randomID(t)+`"`))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	sub, code, err := c.SubmitCampaign(ctx, "key-"+randomID(t), body)
	if err != nil || code != 202 || len(sub.Legs) != 3 {
		t.Fatalf("submit campaign: HTTP %d %+v: %v", code, sub, err)
	}
	return sub
}

// finishedCampaign waits for the campaign's final status (two minutes at most).
func finishedCampaign(t *testing.T, c *apiclient.Client, id string) api.Campaign {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		cp, err := c.GetCampaign(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if apiclient.CampaignTerminal(cp.Status) {
			return cp
		}
		select {
		case <-ctx.Done():
			t.Fatalf("campaign %s still %s: %+v", id, cp.Status, cp.Legs)
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// A campaign across three sellers over HTTP: every leg's seller works asynchronously and says
// so by a signed webhook, which completes the leg (or finds it completed by the sweep, see
// completedByWebhook); the campaign completes with every seller's
// committed amount.
func TestCampaignAcrossThreeSellersCompletedByWebhooks(t *testing.T) {
	c := begin(t)
	sub, cp := runCampaign(t, c, "all_or_nothing")
	if cp.Status != "completed" || cp.Committed != "6000.00" || len(cp.BySeller) != 3 {
		t.Fatalf("campaign %s, committed %s: %+v", cp.Status, cp.Committed, cp.Legs)
	}
	for i, leg := range sub.Legs {
		if cp.Legs[i].Status != "completed" || cp.Legs[i].SellerID != campaignSellers[i] || cp.Legs[i].MediaBuyID == "" {
			t.Errorf("leg %d: %+v", i, cp.Legs[i])
		}
		if evs := webhookTimeline(t, c, leg.OperationID); !completedByWebhook(evs) {
			t.Errorf("leg %d at %s: no completed webhook from the seller recorded (timeline %v)", i, campaignSellers[i], types(evs))
		}
	}
	evs, err := c.CampaignEvents(context.Background(), sub.CampaignID)
	if err != nil || len(evs) == 0 || evs[0].At > evs[len(evs)-1].At {
		t.Fatalf("campaign timeline: %d events, %v", len(evs), err)
	}
	// The list reads the campaign's recorded outcome, which the settle writes right after the
	// last leg ends.
	var list []api.Campaign
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		list, err = c.ListCampaigns(context.Background(), 10)
		if err != nil || len(list) != 1 || list[0].Status == "completed" || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || len(list) != 1 || list[0].CampaignID != sub.CampaignID || list[0].Status != "completed" || list[0].Committed != "6000.00" {
		t.Errorf("list = %+v, %v", list, err)
	}
	// Another tenant does not see it.
	if _, err := client(t, "t"+randomID(t)).GetCampaign(context.Background(), sub.CampaignID); apiclient.StatusOf(err) != 404 {
		t.Errorf("another tenant's read: %v, want 404", err)
	}
}

// The same campaign with one seller failing its task: all_or_nothing cancels the two placed
// legs at their sellers, and the campaign fails with nothing committed.
func TestCampaignWithAFailingSellerCancelsTheOthers(t *testing.T) {
	c := begin(t)
	_, cp := runCampaign(t, c, "all_or_nothing", "", "", "async_fail")
	if cp.Status != "failed" || cp.Committed != "0.00" {
		t.Fatalf("campaign %s, committed %s: %+v", cp.Status, cp.Committed, cp.Legs)
	}
	for i, want := range []string{"canceled", "canceled", "failed"} {
		if cp.Legs[i].Status != want {
			t.Errorf("leg %d at %s is %s (%s), want %s", i, cp.Legs[i].SellerID, cp.Legs[i].Status, cp.Legs[i].Reason, want)
		}
	}
	if suite.local == nil {
		return // a deployed stack's sellers are not ours to inspect
	}
	for i, seller := range campaignSellers[:2] {
		s := suite.local.Seller
		if i > 0 {
			s = suite.local.OtherSellers[seller]
		}
		found := false
		for _, call := range s.CallsTo("update_media_buy") {
			var args struct {
				MediaBuyID string `json:"media_buy_id"`
				Canceled   bool   `json:"canceled"`
			}
			if json.Unmarshal(call.Arguments, &args) == nil && args.Canceled && args.MediaBuyID == cp.Legs[i].MediaBuyID {
				found = true
			}
		}
		if !found {
			t.Errorf("seller %s recorded no cancel of leg %d's media buy %s", seller, i, cp.Legs[i].MediaBuyID)
		}
	}
	if !strings.Contains(cp.Legs[0].Reason, "all_or_nothing") {
		t.Errorf("leg 0's reason %q does not say the campaign's policy canceled it", cp.Legs[0].Reason)
	}
}

// A campaign whose first leg is over the approval threshold waits, every leg of it, for one
// approval; the approver approves from the signed link in Slack, and every leg is created and
// completed, each leg's timeline holding the decision.
func TestCampaignWithOneApprovalApprovedFromTheLink(t *testing.T) {
	c := begin(t)
	sub := submitCampaign(t, c, "all_or_nothing", []float64{12000, 2000, 3000})
	// The campaign's Slack request names the campaign (its id stands in for the PO number).
	decide(t, api.MediaBuy{OperationID: sub.CampaignID, PONumber: sub.CampaignID}, "approve")
	cp := finishedCampaign(t, c, sub.CampaignID)
	if cp.Status != "completed" || cp.Committed != "17000.00" || cp.Approval == nil || cp.Approval.Status != "approved" {
		t.Fatalf("campaign %s, committed %s, approval %+v: %+v", cp.Status, cp.Committed, cp.Approval, cp.Legs)
	}
	for i, leg := range sub.Legs {
		evs := timeline(t, c, leg.OperationID)
		if !slices.Contains(types(evs), "approval_requested") || !slices.Contains(types(evs), "decision") || cp.Legs[i].Status != "completed" {
			t.Errorf("leg %d (%s): timeline %v", i, cp.Legs[i].Status, types(evs))
		}
	}
}

// A campaign with a governance plan pushes it to the governance agent (sync_plans, from the
// campaign function with the agent's credential) before any leg is placed, and completes.
func TestCampaignWithAPlanPushesItToGovernance(t *testing.T) {
	c := begin(t)
	sub := submitCampaignSpec(t, c, apiclient.CampaignSpec{Policy: "all_or_nothing", Plan: true}, []float64{1000, 2000, 3000})
	cp := finishedCampaign(t, c, sub.CampaignID)
	if cp.Status != "completed" || cp.PlanID == "" || cp.GovernanceID == "" {
		t.Fatalf("campaign %s, plan %q at %q: %+v", cp.Status, cp.PlanID, cp.GovernanceID, cp.Legs)
	}
	if suite.local == nil {
		return // a deployed stack's governance agent is not ours to inspect
	}
	pushed := false
	for _, call := range suite.local.Governance.CallsTo("sync_plans") {
		pushed = pushed || strings.Contains(string(call.Arguments), cp.PlanID)
	}
	if !pushed {
		t.Errorf("the governance agent recorded no sync_plans of plan %s", cp.PlanID)
	}
}

// The governance agent refuses a campaign's plan: no leg is checked or sent to a seller, and
// every leg fails with the reason (the campaign function moves each, under its role).
func TestCampaignWhosePlanIsRefusedFailsItsLegs(t *testing.T) {
	c := begin(t)
	sub := submitCampaignSpec(t, c, apiclient.CampaignSpec{Policy: "all_or_nothing", Plan: true, Sim: "plan_refused"}, []float64{1000, 2000, 3000})
	cp := finishedCampaign(t, c, sub.CampaignID)
	if cp.Status != "failed" {
		t.Errorf("campaign %s (%q), want failed", cp.Status, cp.Reason)
	}
	for _, leg := range cp.Legs {
		op, err := c.Get(context.Background(), leg.OperationID)
		if err != nil {
			t.Fatal(err)
		}
		if op.Status != "failed" || !strings.Contains(op.Reason, "plan could not be pushed") {
			t.Errorf("leg %s at %s is %s (%q), want failed because the plan was refused", leg.OperationID, leg.SellerID, op.Status, op.Reason)
		}
		if slices.Contains(types(timeline(t, c, leg.OperationID)), "seller_call") {
			t.Errorf("leg %s reached its seller", leg.OperationID)
		}
	}
}
