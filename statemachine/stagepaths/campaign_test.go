package stagepaths

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/adcptest"
	"github.com/buyflow/buyflow/internal/apiclient"
	"github.com/buyflow/buyflow/internal/devstack"
)

// The paths of campaign.asl.json: a campaign's legs run as child executions of the MediaBuy
// state machine at three simulated sellers, then the partial-failure policy settles.

var campaignSellers = append([]string{devstack.SellerID}, devstack.OtherSellerIDs...)

// campaignRun is one campaign scenario: a tenant of its own, three legs.
type campaignRun struct {
	*buyRun
	spec apiclient.CampaignSpec
	sub  apiclient.CampaignSubmitted
}

// beginCampaign prepares a campaign of three legs at the three sellers (budgets 1000, 2000,
// 3000: under the approval threshold), leg i scripted with sims[i].
func beginCampaign(t *testing.T, policy string, sims ...string) *campaignRun {
	r := &campaignRun{buyRun: begin(t, nil), spec: apiclient.CampaignSpec{Policy: policy}}
	tag := fmt.Sprintf("%08X", rand.Uint32())
	for i, seller := range campaignSellers {
		leg := apiclient.LegSpec{SellerID: seller, PO: fmt.Sprintf("PO-CP-%s-%d", tag, i), Budget: float64(1000 * (i + 1))}
		if i < len(sims) {
			leg.Sim = sims[i]
		}
		r.spec.Legs = append(r.spec.Legs, leg)
	}
	return r
}

func (r *campaignRun) submitCampaign() {
	r.t.Helper()
	body, err := r.spec.Body(sys.root)
	if err != nil {
		r.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sub, code, err := r.client.SubmitCampaign(ctx, "key-"+r.spec.Legs[0].PO, body)
	if err != nil || code != 202 {
		r.t.Fatalf("submit campaign: HTTP %d: %v", code, err)
	}
	r.sub, r.op = sub, sub.CampaignID
}

func (r *campaignRun) campaign() apiclient.Campaign {
	r.t.Helper()
	c, err := r.client.GetCampaign(context.Background(), r.sub.CampaignID)
	if err != nil {
		r.t.Fatal(err)
	}
	return c
}

// legCalls are the calls of tool that the seller of leg i recorded for that leg.
func (r *campaignRun) legCalls(i int, tool string) []adcptest.Call {
	seller := sys.agents.Seller
	if i > 0 {
		seller = sys.agents.Others[campaignSellers[i]]
	}
	leg := &buyRun{po: r.spec.Legs[i].PO}
	if i < len(r.sub.Legs) {
		leg.op = r.sub.Legs[i].OperationID
	}
	return mine(seller.Calls(), tool, leg.keys(seller.Calls()))
}

// canceled reports whether leg i's seller recorded an update_media_buy that canceled the leg.
func (r *campaignRun) canceled(i int) bool {
	for _, c := range r.legCalls(i, "update_media_buy") {
		var args struct {
			Canceled bool `json:"canceled"`
		}
		if json.Unmarshal(c.Arguments, &args) == nil && args.Canceled {
			return true
		}
	}
	return false
}

func (r *campaignRun) wantLegs(c apiclient.Campaign, statuses ...string) {
	r.t.Helper()
	if len(c.Legs) != len(statuses) {
		r.t.Fatalf("%d legs, want %d", len(c.Legs), len(statuses))
	}
	for i, want := range statuses {
		if c.Legs[i].Status != want || c.Legs[i].SellerID != campaignSellers[i] {
			r.t.Errorf("leg %d at %s is %s (%s), want %s at %s", i, c.Legs[i].SellerID, c.Legs[i].Status, c.Legs[i].Reason, want, campaignSellers[i])
		}
	}
}

var legStates = []string{"RunLeg", "LegHandedOver", "LegEnded"}

func campaignStates(legs int, tail ...string) []string {
	out := []string{"PushPlan", "PlaceLegs"}
	for range legs {
		out = append(out, legStates...)
	}
	return append(append(out, "Settle", "NeedsCompensation"), tail...)
}

// sorted ignores the interleaving of the legs' states (they run in parallel).
func sorted(ss []string) []string {
	out := slices.Clone(ss)
	slices.Sort(out)
	return out
}

func TestCampaignAllLegsComplete(t *testing.T) {
	r := beginCampaign(t, "best_effort")
	r.submitCampaign()
	ex := only(t, r.finish(90*time.Second))
	if ex.Status != "SUCCEEDED" || !slices.Equal(sorted(ex.States), sorted(campaignStates(3, "CampaignOutcome", "CampaignCompleted"))) {
		t.Fatalf("campaign ended %s %s: %v", ex.Status, ex.Error, ex.States)
	}
	c := r.campaign()
	r.wantLegs(c, "completed", "completed", "completed")
	if c.Status != "completed" || c.Committed != "6000.00" || c.Planned != "6000.00" || c.TotalBudget != "6000.00" {
		t.Errorf("campaign = %s, committed %s of %s planned, total %s", c.Status, c.Committed, c.Planned, c.TotalBudget)
	}
	for i, sa := range c.BySeller {
		if want := fmt.Sprintf("%d.00", 1000*(i+1)); sa.SellerID != campaignSellers[i] || sa.Committed != want {
			t.Errorf("seller %s committed %s, want %s at %s", sa.SellerID, sa.Committed, want, campaignSellers[i])
		}
	}
	// Each leg is a full media buy: its own check with its exact create arguments, its create at
	// its own seller, its own timeline.
	for i, leg := range r.sub.Legs {
		creates := r.legCalls(i, "create_media_buy")
		if len(creates) != 1 {
			t.Fatalf("leg %d: %d create_media_buy calls at %s", i, len(creates), campaignSellers[i])
		}
		var checked []string
		for _, gc := range r.governanceCallsOf(leg.OperationID, r.spec.Legs[i].PO, "check_governance") {
			var args struct {
				Payload struct {
					PONumber string `json:"po_number"`
				} `json:"payload"`
			}
			_ = json.Unmarshal(gc.Arguments, &args)
			checked = append(checked, args.Payload.PONumber)
		}
		if !slices.Equal(checked, []string{r.spec.Legs[i].PO}) {
			t.Errorf("leg %d: governance checked %v, want its own PO once", i, checked)
		}
		tl, err := r.client.Events(context.Background(), leg.OperationID)
		if err != nil || !slices.ContainsFunc(tl, func(e apiclient.Event) bool { return e.Type == "outcome_report" }) {
			t.Errorf("leg %d timeline %v, %v", i, tl, err)
		}
	}
	evs, err := r.client.CampaignEvents(context.Background(), r.sub.CampaignID)
	if err != nil || !slices.ContainsFunc(evs, func(e apiclient.CampaignEvent) bool { return e.Type == "campaign_submitted" }) {
		t.Fatalf("campaign events: %v", err)
	}
	for _, leg := range r.sub.Legs {
		if !slices.ContainsFunc(evs, func(e apiclient.CampaignEvent) bool {
			return e.OperationID == leg.OperationID && e.Type == "seller_call"
		}) {
			t.Errorf("the campaign timeline lacks leg %s's seller call", leg.OperationID)
		}
	}
}

func (r *campaignRun) governanceCallsOf(op, po, tool string) []adcptest.Call {
	leg := &buyRun{po: po, op: op}
	return mine(sys.agents.Governance.Calls(), tool, leg.keys(sys.agents.Governance.Calls()))
}

func TestCampaignBestEffortKeepsTheLegsThatCompleted(t *testing.T) {
	for _, c := range []struct{ name, sim, leg1 string }{
		{"seller fails", "async_fail", "failed"},
		{"governance denies", "denied", "rejected"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := beginCampaign(t, "best_effort", "", c.sim)
			r.submitCampaign()
			ex := only(t, r.finish(90*time.Second))
			if ex.Status != "SUCCEEDED" || ex.States[len(ex.States)-1] != "CampaignPartiallyCompleted" || slices.Contains(ex.States, "CompensateLegs") {
				t.Fatalf("campaign ended %s %s: %v", ex.Status, ex.Error, ex.States)
			}
			cp := r.campaign()
			r.wantLegs(cp, "completed", c.leg1, "completed")
			if cp.Status != "partially_completed" || cp.Committed != "4000.00" || cp.BySeller[1].Committed != "0.00" {
				t.Errorf("campaign %s committed %s (%+v)", cp.Status, cp.Committed, cp.BySeller)
			}
			for i := range 3 {
				if r.canceled(i) {
					t.Errorf("leg %d was canceled under best_effort", i)
				}
			}
		})
	}
}

func TestCampaignAllOrNothingCancelsThePlacedLegs(t *testing.T) {
	for _, c := range []struct{ name, sim, leg1 string }{
		{"seller fails", "async_fail", "failed"},
		{"governance denies", "denied", "rejected"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := beginCampaign(t, "all_or_nothing", "", c.sim)
			r.submitCampaign()
			ex := only(t, r.finish(90*time.Second))
			if ex.Status != "FAILED" || ex.Error != "CampaignFailed" || !slices.Contains(ex.States, "CompensateLegs") ||
				count(ex.States, "CancelLeg") != 2 || count(ex.States, "LegCanceled") != 2 {
				t.Fatalf("campaign ended %s %s: %v", ex.Status, ex.Error, ex.States)
			}
			cp := r.campaign()
			r.wantLegs(cp, "canceled", c.leg1, "canceled")
			if cp.Status != "failed" || cp.Committed != "0.00" {
				t.Errorf("campaign %s committed %s", cp.Status, cp.Committed)
			}
			// The simulated sellers recorded the cancels of the two placed legs, and nothing at
			// the failed leg's seller.
			if !r.canceled(0) || !r.canceled(2) || r.canceled(1) {
				t.Errorf("cancels recorded: leg 0 %v, leg 1 %v, leg 2 %v; want legs 0 and 2", r.canceled(0), r.canceled(1), r.canceled(2))
			}
			if c.sim == "denied" && len(r.legCalls(1, "create_media_buy")) != 0 {
				t.Error("the denied leg was created at its seller")
			}
			for _, i := range []int{0, 2} {
				if !strings.Contains(cp.Legs[i].Reason, "all_or_nothing") || !strings.Contains(cp.Legs[i].Reason, campaignSellers[1]) {
					t.Errorf("leg %d reason %q does not say the campaign's policy canceled it, and which leg failed", i, cp.Legs[i].Reason)
				}
			}
		})
	}
}

// A campaign whose legs add up to more than its total is refused with the field named, and
// nothing is stored or started.
func TestCampaignOverItsTotalIsRefused(t *testing.T) {
	r := beginCampaign(t, "all_or_nothing")
	r.spec.Total = 5999.99
	body, err := r.spec.Body(sys.root)
	if err != nil {
		t.Fatal(err)
	}
	_, code, err := r.client.SubmitCampaign(context.Background(), "key-over-"+r.spec.Legs[0].PO, body)
	var se *apiclient.StatusError
	if code != 422 || !errors.As(err, &se) || se.Code != "budget_over_total" {
		t.Fatalf("HTTP %d %v, want 422 budget_over_total", code, err)
	}
	if cps, err := r.client.ListCampaigns(context.Background(), 10); err != nil || len(cps) != 0 {
		t.Errorf("campaigns stored: %v %v", cps, err)
	}
	if page, err := r.client.List(context.Background(), 10, ""); err != nil || len(page.Items) != 0 {
		t.Errorf("media buys stored: %v %v", page.Items, err)
	}
	for i := range 3 {
		if n := len(r.legCalls(i, "")); n != 0 {
			t.Errorf("seller %s got %d calls", campaignSellers[i], n)
		}
	}
}

// syncPlansCalls are the governance agent's sync_plans calls for this campaign (by the
// idempotency key its submit fixed).
func (r *campaignRun) syncPlansCalls() []adcptest.Call {
	var out []adcptest.Call
	for _, c := range sys.agents.Governance.CallsTo("sync_plans") {
		if strings.Contains(string(c.Arguments), `"sync-plans-`+r.sub.CampaignID+`"`) {
			out = append(out, c)
		}
	}
	return out
}

// A campaign that carries its plan pushes it (sync_plans, under the campaign's plan id) before
// the first leg's check_governance.
func TestCampaignPushesItsPlanBeforeTheFirstCheck(t *testing.T) {
	r := beginCampaign(t, "best_effort")
	r.spec.Plan = true
	r.submitCampaign()
	ex := only(t, r.finish(90*time.Second))
	if ex.Status != "SUCCEEDED" || !slices.Equal(ex.States[:3], []string{"PushPlan", "SyncPlan", "PlaceLegs"}) {
		t.Fatalf("campaign ended %s %s: %v", ex.Status, ex.Error, ex.States)
	}
	syncs := r.syncPlansCalls()
	if len(syncs) != 1 {
		t.Fatalf("%d sync_plans calls, want 1", len(syncs))
	}
	var args struct {
		Plans []struct {
			PlanID string `json:"plan_id"`
			Budget struct {
				Total float64 `json:"total"`
			} `json:"budget"`
		} `json:"plans"`
	}
	if err := json.Unmarshal(syncs[0].Arguments, &args); err != nil || len(args.Plans) != 1 ||
		args.Plans[0].PlanID != "plan-spring-2027" || args.Plans[0].Budget.Total != 6000 {
		t.Errorf("sync_plans arguments %s (%v)", syncs[0].Arguments, err)
	}
	for i, leg := range r.sub.Legs {
		checks := r.governanceCallsOf(leg.OperationID, r.spec.Legs[i].PO, "check_governance")
		if len(checks) == 0 || !checks[0].Time.After(syncs[0].Time) {
			t.Errorf("leg %d: check_governance before the plan was pushed (%d checks)", i, len(checks))
		}
	}
	r.wantLegs(r.campaign(), "completed", "completed", "completed")
}

// A plan the governance agent cannot take stops the campaign before any check or spend: every
// leg fails with the reason, and its PO number is free again.
func TestCampaignStopsWhenItsPlanCannotBePushed(t *testing.T) {
	r := beginCampaign(t, "best_effort")
	r.spec.Plan, r.spec.Sim = true, "http_500*100"
	r.submitCampaign()
	ex := only(t, r.finish(120*time.Second))
	if ex.Status != "FAILED" || ex.Error != "CampaignFailed" || !slices.Contains(ex.States, "CloseLegs") || slices.Contains(ex.States, "PlaceLegs") {
		t.Fatalf("campaign ended %s %s: %v", ex.Status, ex.Error, ex.States)
	}
	cp := r.campaign()
	r.wantLegs(cp, "failed", "failed", "failed")
	if cp.Status != "failed" || !strings.Contains(cp.Legs[0].Reason, "plan could not be pushed") {
		t.Errorf("campaign %s, leg 0 reason %q", cp.Status, cp.Legs[0].Reason)
	}
	for i, leg := range r.sub.Legs {
		if n := len(r.governanceCallsOf(leg.OperationID, r.spec.Legs[i].PO, "check_governance")) + len(r.legCalls(i, "")); n != 0 {
			t.Errorf("leg %d: %d calls at governance or its seller", i, n)
		}
	}
	// The PO numbers are free: a buy with leg 0's PO is accepted.
	body, err := apiclient.Buy{PO: r.spec.Legs[0].PO}.Body(sys.root)
	if err != nil {
		t.Fatal(err)
	}
	if _, code, err := r.client.Submit(context.Background(), "key-single-"+r.spec.Legs[0].PO, body); err != nil || code != 202 {
		t.Errorf("a buy with a closed leg's PO number: HTTP %d %v", code, err)
	}
}
