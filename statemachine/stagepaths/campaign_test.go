package stagepaths

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/adcptest"
	"github.com/buyflow/buyflow/internal/api"
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
	sub  api.CampaignSubmitted
	// planID, when set, replaces the example's plan id: a campaign that pushes its plan must
	// not hold the parallel campaigns on the shared governance agent to that plan's limits.
	planID string
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
	r.submitCampaignWith(func(req map[string]any) {
		if r.planID != "" {
			req["governance"].(map[string]any)["plan_id"] = r.planID
		}
	})
}

// submitCampaignWith submits r's spec with edit applied to the request's JSON object, under
// the idempotency key of its first leg's PO; the 202 is required.
func (r *campaignRun) submitCampaignWith(edit func(req map[string]any)) {
	r.t.Helper()
	body, err := r.spec.Body(sys.root)
	if err != nil {
		r.t.Fatal(err)
	}
	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil {
		r.t.Fatal(err)
	}
	edit(req)
	if body, err = json.Marshal(req); err != nil {
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

// legBuy is the media_buy of leg i of a campaign request's JSON object.
func legBuy(req map[string]any, i int) map[string]any {
	return req["legs"].([]any)[i].(map[string]any)["media_buy"].(map[string]any)
}

func (r *campaignRun) campaign() api.Campaign {
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

func (r *campaignRun) wantLegs(c api.Campaign, statuses ...string) {
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

var (
	checkStates = []string{"CheckLeg", "LegCheckDecision", "LegChecked"}
	legStates   = []string{"RunLeg", "LegHandedOver", "LegEnded"}
)

// campaignStates are the states of a campaign of legs legs that no approval held: every leg's
// check, the release, every leg's run, the settle, then tail.
func campaignStates(legs int, tail ...string) []string {
	out := []string{"PushPlan", "CheckLegs"}
	for range legs {
		out = append(out, checkStates...)
	}
	out = append(out, "ReleaseLegs", "NeedsCampaignApproval", "PlaceLegs")
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
		if err != nil || !slices.ContainsFunc(tl, func(e api.Event) bool { return e.Type == "outcome_report" }) {
			t.Errorf("leg %d timeline %v, %v", i, tl, err)
		}
	}
	evs, err := r.client.CampaignEvents(context.Background(), r.sub.CampaignID)
	if err != nil || !slices.ContainsFunc(evs, func(e api.CampaignEvent) bool { return e.Type == "campaign_submitted" }) {
		t.Fatalf("campaign events: %v", err)
	}
	for _, leg := range r.sub.Legs {
		if !slices.ContainsFunc(evs, func(e api.CampaignEvent) bool {
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
			for _, i := range []int{0, 2} {
				if !strings.Contains(cp.Legs[i].Reason, "all_or_nothing") || !strings.Contains(cp.Legs[i].Reason, campaignSellers[1]) {
					t.Errorf("leg %d reason %q does not say the campaign's policy canceled it, and which leg failed", i, cp.Legs[i].Reason)
				}
			}
		})
	}
}

// Under all_or_nothing, a leg governance denies calls the others off before any is created:
// every leg's check runs first, so nothing reaches a seller and nothing needs canceling.
func TestCampaignAllOrNothingDeniedLegBuysNothing(t *testing.T) {
	r := beginCampaign(t, "all_or_nothing", "", "denied")
	r.submitCampaign()
	ex := only(t, r.finish(90*time.Second))
	if ex.Status != "FAILED" || ex.Error != "CampaignFailed" || slices.Contains(ex.States, "CompensateLegs") || slices.Contains(ex.States, "RequestCampaignApproval") {
		t.Fatalf("campaign ended %s %s: %v", ex.Status, ex.Error, ex.States)
	}
	cp := r.campaign()
	r.wantLegs(cp, "canceled", "rejected", "canceled")
	if cp.Status != "failed" || cp.Committed != "0.00" {
		t.Errorf("campaign %s committed %s", cp.Status, cp.Committed)
	}
	for i := range 3 {
		if n := len(r.legCalls(i, "")); n != 0 {
			t.Errorf("leg %d: %d calls at %s, want none", i, n, campaignSellers[i])
		}
	}
	for _, i := range []int{0, 2} {
		if !strings.Contains(cp.Legs[i].Reason, "all_or_nothing") || !strings.Contains(cp.Legs[i].Reason, campaignSellers[1]) {
			t.Errorf("leg %d reason %q does not say the campaign's policy called it off, and which leg was denied", i, cp.Legs[i].Reason)
		}
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
	r.planID = "plan-spring-2027-" + r.spec.Legs[0].PO
	r.submitCampaign()
	ex := only(t, r.finish(90*time.Second))
	if ex.Status != "SUCCEEDED" || !slices.Equal(ex.States[:3], []string{"PushPlan", "SyncPlan", "CheckLegs"}) {
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
		args.Plans[0].PlanID != r.planID || args.Plans[0].Budget.Total != 6000 {
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

// overThreshold sets leg i's budget above the approval policy's 10,000 USD threshold.
func (r *campaignRun) overThreshold(legs ...int) {
	for _, i := range legs {
		r.spec.Legs[i].Budget = float64(11000 + 1000*i)
	}
}

// campaignLink waits for the one Slack request of the campaign's approval and returns its link;
// it fails when the campaign or any of its legs asked more than once.
func (r *campaignRun) campaignLink() string {
	r.t.Helper()
	link := r.approvalLink() // messages naming the campaign
	for _, leg := range r.sub.Legs {
		lr := &buyRun{t: r.t, op: leg.OperationID}
		if msgs := lr.slackMessages(); len(msgs) != 0 {
			r.t.Errorf("leg %s got Slack messages of its own: %v", leg.OperationID, msgs)
		}
	}
	if links := apiclient.ApprovalLinks(r.slackMessages(), sys.apiURL); len(links) != 1 {
		r.t.Errorf("%d approval links for the campaign, want 1", len(links))
	}
	return link
}

// legExecution is leg i's one execution.
func (r *campaignRun) legExecution(i int) execution {
	r.t.Helper()
	return only(r.t, (&buyRun{t: r.t, op: r.sub.Legs[i].OperationID}).finish(30*time.Second))
}

// One approval covers every leg of a campaign whose legs each exceed the threshold: one Slack
// request whose page lists every leg and the total, one decision, every leg created, and each
// leg's timeline shows the request and the approver's decision.
func TestCampaignOneApprovalCoversAllLegs(t *testing.T) {
	r := beginCampaign(t, "all_or_nothing")
	r.overThreshold(0, 1, 2)
	r.submitCampaign()
	link := r.campaignLink()
	ctx := context.Background()
	resp, err := http.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("campaign approval page: HTTP %d", resp.StatusCode)
	}
	page := string(body)
	for _, want := range append(slices.Clone(campaignSellers), "Approve a campaign?", "USD 36,000.00", "USD 11,000.00", "USD 13,000.00",
		r.spec.Legs[0].PO, r.spec.Legs[2].PO, "approval threshold") {
		if !strings.Contains(page, strings.ReplaceAll(strings.ReplaceAll(want, "-", "-<wbr>"), "_", "_<wbr>")) && !strings.Contains(page, want) {
			t.Errorf("the approval page lacks %q", want)
		}
	}
	r.waitingForTheDecision()
	cp := r.approvedAndCreated(link, "36000.00")
	for i, leg := range r.sub.Legs {
		tl, err := r.client.Events(ctx, leg.OperationID)
		if err != nil {
			t.Fatal(err)
		}
		asked := slices.ContainsFunc(tl, func(e api.Event) bool { return e.Type == "approval_requested" })
		decided := slices.ContainsFunc(tl, func(e api.Event) bool { return e.Type == "decision" && e.Actor == "approver:"+approver })
		if !asked || !decided {
			t.Errorf("leg %d's timeline: approval requested %v, decided by %s %v", i, asked, approver, decided)
		}
		op, err := r.client.Get(ctx, leg.OperationID)
		if err != nil || op.Approval == nil || op.Approval.ApprovalID != cp.Approval.ApprovalID || op.Approval.DecidedBy != approver {
			t.Errorf("leg %d's approval: %+v %v", i, op.Approval, err)
		}
	}
	// The campaign's own timeline has the request, the view and the decision.
	evs, err := r.client.CampaignEvents(ctx, r.sub.CampaignID)
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{"approval_requested", "approval_viewed", "decision"} {
		if !slices.ContainsFunc(evs, func(e api.CampaignEvent) bool { return e.OperationID == "" && e.Type == typ }) {
			t.Errorf("the campaign's own timeline lacks %s", typ)
		}
	}
}

// The approver rejects: nothing is created at any seller (not even at the legs under the
// threshold, which waited for the same decision), every leg ends rejected in its own execution,
// and the campaign reads canceled with the approver's decision.
func TestCampaignApprovalRejectedBuysNothing(t *testing.T) {
	r := beginCampaign(t, "best_effort")
	r.overThreshold(0)
	r.submitCampaign()
	r.rejectedBuysNothing(r.campaignLink())
}

// rejectedBuysNothing rejects from link and checks that nothing was created at any seller,
// that every leg ended rejected in its own execution, naming the approver, and that the
// campaign reads canceled with the decision.
func (r *campaignRun) rejectedBuysNothing(link string) {
	t := r.t
	t.Helper()
	if code, heading := decideLink(t, link, "reject"); code != 200 {
		t.Fatalf("reject: HTTP %d %q", code, heading)
	}
	ex := only(t, r.finish(90*time.Second))
	if ex.Status != "FAILED" || ex.Error != "CampaignCanceled" || !slices.Contains(ex.States, "ReleaseRejectedLegs") || slices.Contains(ex.States, "CompensateLegs") {
		t.Fatalf("campaign ended %s %s: %v", ex.Status, ex.Error, ex.States)
	}
	cp := r.campaign()
	r.wantLegs(cp, "rejected", "rejected", "rejected")
	if cp.Status != "canceled" || cp.Committed != "0.00" || cp.Approval == nil || cp.Approval.Status != "rejected" || cp.Approval.DecidedBy != approver {
		t.Errorf("campaign %s committed %s, approval %+v", cp.Status, cp.Committed, cp.Approval)
	}
	for i := range 3 {
		if n := len(r.legCalls(i, "create_media_buy")); n != 0 {
			t.Errorf("leg %d: %d create_media_buy calls at %s after the rejection", i, n, campaignSellers[i])
		}
		if lex := r.legExecution(i); lex.Status != "FAILED" || lex.Error != "ApprovalRejected" {
			t.Errorf("leg %d's execution ended %s %s: %v", i, lex.Status, lex.Error, lex.States)
		}
		if !strings.Contains(cp.Legs[i].Reason, approver) {
			t.Errorf("leg %d's reason %q does not name the approver", i, cp.Legs[i].Reason)
		}
	}
}

// waitingForTheDecision checks that nothing is created while the approver decides: every leg
// waits for the one decision, those governance let through too.
func (r *campaignRun) waitingForTheDecision() {
	r.t.Helper()
	for i := range 3 {
		if n := len(r.legCalls(i, "create_media_buy")); n != 0 {
			r.t.Errorf("leg %d created before the decision", i)
		}
	}
	r.wantLegs(r.campaign(), "awaiting_approval", "awaiting_approval", "awaiting_approval")
}

// approvedAndCreated approves from link and checks that the one approval released every leg:
// each created once, at CreateMediaBuy with no approval of its own, the campaign completed
// with committed and the approver's decision.
func (r *campaignRun) approvedAndCreated(link, committed string) api.Campaign {
	t := r.t
	t.Helper()
	if code, heading := decideLink(t, link, "approve"); code != 200 {
		t.Fatalf("approve: HTTP %d %q", code, heading)
	}
	ex := only(t, r.finish(90*time.Second))
	if ex.Status != "SUCCEEDED" || ex.States[len(ex.States)-1] != "CampaignCompleted" || count(ex.States, "RequestCampaignApproval") != 1 ||
		!slices.Contains(ex.States, "ReleaseApprovedLegs") {
		t.Fatalf("campaign ended %s %s: %v", ex.Status, ex.Error, ex.States)
	}
	cp := r.campaign()
	r.wantLegs(cp, "completed", "completed", "completed")
	if cp.Status != "completed" || cp.Committed != committed || cp.Approval == nil || cp.Approval.Status != "approved" || cp.Approval.DecidedBy != approver {
		t.Errorf("campaign %s committed %s, approval %+v", cp.Status, cp.Committed, cp.Approval)
	}
	for i := range r.sub.Legs {
		if n := len(r.legCalls(i, "create_media_buy")); n != 1 {
			t.Errorf("leg %d: %d create_media_buy calls, want 1", i, n)
		}
		lex := r.legExecution(i)
		if slices.Contains(lex.States, "RequestApproval") || !slices.Equal(lex.States[:3], []string{"IsContinuation", "StartCampaignLeg", "CreateMediaBuy"}) {
			t.Errorf("leg %d's execution: %v", i, lex.States)
		}
	}
	return cp
}

// A seller's input-required on one leg asks about that leg alone, in its own execution: the
// campaign needed no approval, and the one request names that leg only.
func TestCampaignLegInputRequiredAsksAboutThatLeg(t *testing.T) {
	r := beginCampaign(t, "best_effort", "", "input_required")
	r.submitCampaign()
	leg := &buyRun{t: t, op: r.sub.Legs[1].OperationID}
	leg.decide("approve")
	ex := only(t, r.finish(90*time.Second))
	if ex.Status != "SUCCEEDED" || slices.Contains(ex.States, "RequestCampaignApproval") || ex.States[len(ex.States)-1] != "CampaignCompleted" {
		t.Fatalf("campaign ended %s %s: %v", ex.Status, ex.Error, ex.States)
	}
	if msgs := r.slackMessages(); len(msgs) != 0 {
		t.Errorf("the campaign itself asked for approval: %v", msgs)
	}
	for i, other := range r.sub.Legs {
		if i == 1 {
			continue
		}
		for _, m := range leg.slackMessages() {
			if strings.Contains(string(m.Body)+m.Text, other.OperationID) {
				t.Errorf("leg 1's approval request names leg %d", i)
			}
		}
		if msgs := (&buyRun{t: t, op: other.OperationID}).slackMessages(); len(msgs) != 0 {
			t.Errorf("leg %d got an approval request: %v", i, msgs)
		}
	}
	if lex := r.legExecution(1); count(lex.States, "RequestApproval") != 1 || !slices.Contains(lex.States, "ApprovalForSellerInput") {
		t.Errorf("leg 1's execution: %v", lex.States)
	}
	r.wantLegs(r.campaign(), "completed", "completed", "completed")
}

// Nobody decides in time: the campaign's approval expires (the local policy does not
// escalate), nothing is created at any seller, every leg ends expired in its own execution and
// the campaign reads canceled.
func TestCampaignApprovalExpiredBuysNothing(t *testing.T) {
	r := beginCampaign(t, "all_or_nothing")
	body, _ := json.Marshal(map[string]any{"approval_timeout_seconds": 2})
	req, _ := http.NewRequest(http.MethodPut, sys.harness+"/_harness/tenants/"+r.tenant, bytes.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	r.overThreshold(0)
	r.submitCampaign()
	// No wait for the Slack link: notify posts none for an approval already past its 2 s
	// deadline, which is what a loaded machine reaches before the post. That the approval was
	// asked for is the execution's RequestCampaignApproval.
	ex := only(t, r.finish(90*time.Second))
	if ex.Status != "FAILED" || ex.Error != "CampaignCanceled" || !slices.Contains(ex.States, "RequestCampaignApproval") ||
		!slices.Contains(ex.States, "ExpireCampaignApproval") || !slices.Contains(ex.States, "ReleaseRejectedLegs") {
		t.Fatalf("campaign ended %s %s: %v", ex.Status, ex.Error, ex.States)
	}
	cp := r.campaign()
	r.wantLegs(cp, "expired", "expired", "expired")
	if cp.Status != "canceled" || cp.Approval == nil || cp.Approval.Status != "expired" {
		t.Errorf("campaign %s, approval %+v", cp.Status, cp.Approval)
	}
	for i := range 3 {
		if n := len(r.legCalls(i, "create_media_buy")); n != 0 {
			t.Errorf("leg %d: %d create_media_buy calls after the expiry", i, n)
		}
		if lex := r.legExecution(i); lex.Status != "FAILED" || lex.Error != "ApprovalExpired" {
			t.Errorf("leg %d's execution ended %s %s: %v", i, lex.Status, lex.Error, lex.States)
		}
	}
}

// addingUpOverThreshold sets every leg's budget under the approval policy's 10,000 USD
// threshold, their total (10,500.25 USD) over it: a buy split so that no leg needs a person.
func (r *campaignRun) addingUpOverThreshold() string {
	for i, budget := range []float64{4000.25, 3500, 3000} {
		r.spec.Legs[i].Budget = budget
	}
	return "the campaign's total 10500.25 USD is at or over the approval threshold 10000.00 USD"
}

// Legs each under the threshold whose total is over it need the campaign's one approval, as a
// single buy of the total would: exactly one Slack request, saying why, nothing created at any
// seller before the decision (every leg waits, though governance let each through), and every
// leg created once after the approval.
func TestCampaignTotalOverTheThresholdNeedsTheOneApproval(t *testing.T) {
	r := beginCampaign(t, "all_or_nothing")
	why := r.addingUpOverThreshold()
	r.submitCampaign()
	link := r.campaignLink()
	msgs := r.slackMessages()
	if len(msgs) != 1 || !strings.Contains(string(msgs[0].Body)+msgs[0].Text, why) {
		t.Errorf("%d Slack requests for the campaign, want one saying %q: %v", len(msgs), why, msgs)
	}
	resp, err := http.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if page := string(body); resp.StatusCode != http.StatusOK || !strings.Contains(page, strings.ReplaceAll(why, "'", "&#39;")) || !strings.Contains(page, "USD 10,500.25") {
		t.Errorf("the approval page (HTTP %d) lacks the total or %q", resp.StatusCode, why)
	}
	r.waitingForTheDecision()
	evs, err := r.client.CampaignEvents(context.Background(), r.sub.CampaignID)
	if err != nil || !slices.ContainsFunc(evs, func(e api.CampaignEvent) bool {
		return e.OperationID == "" && e.Type == "approval_requested" && e.Reason == why
	}) {
		t.Errorf("the campaign's timeline has no request saying %q (%v)", why, err)
	}
	r.approvedAndCreated(link, "10500.25")
}

// best_effort with a leg governance denied: the gate compares the total of the two legs it
// would buy (10,000.25 USD), and the approval item, its page, Slack and the requester's view
// all show that total and those legs, never the 19,000.25 USD every leg adds up to (the old
// request quoted it).
func TestCampaignApprovalShowsTheTotalTheGateUsed(t *testing.T) {
	r := beginCampaign(t, "best_effort", "", "denied")
	for i, budget := range []float64{4000.25, 9000, 6000} {
		r.spec.Legs[i].Budget = budget
	}
	const why = "the campaign's total 10000.25 USD is at or over the approval threshold 10000.00 USD"
	r.submitCampaign()
	link := r.campaignLink()
	msgs := r.slackMessages()
	if len(msgs) != 1 || !strings.Contains(string(msgs[0].Body)+msgs[0].Text, why) || !strings.Contains(string(msgs[0].Body), "USD 10,000.25") ||
		strings.Contains(string(msgs[0].Body), "19,000.25") {
		t.Errorf("the Slack request does not quote the gate's total: %v", msgs)
	}
	resp, err := http.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if page := string(body); resp.StatusCode != http.StatusOK || !strings.Contains(page, "USD 10,000.25") || strings.Contains(page, "19,000.25") ||
		strings.Contains(page, "USD 9,000.00") {
		t.Errorf("the approval page (HTTP %d) shows another total or the denied leg:\n%s", resp.StatusCode, page)
	}
	cp := r.campaign()
	covered := []string{r.sub.Legs[0].OperationID, r.sub.Legs[2].OperationID}
	if a := cp.Approval; a == nil || a.Amount != "10000.25 USD" || !slices.Equal(a.Legs, covered) || a.ReasonText != why {
		t.Errorf("the requester's view of the approval: %+v, want 10000.25 USD of %v", a, covered)
	}
	evs, err := r.client.CampaignEvents(context.Background(), r.sub.CampaignID)
	if err != nil || !slices.ContainsFunc(evs, func(e api.CampaignEvent) bool {
		return e.OperationID == "" && e.Type == "approval_requested" && e.Amount == "10000.25 USD"
	}) {
		t.Errorf("the campaign's timeline has no request of 10000.25 USD (%v)", err)
	}
	if code, heading := decideLink(t, link, "approve"); code != 200 {
		t.Fatalf("approve: HTTP %d %q", code, heading)
	}
	ex := only(t, r.finish(90*time.Second))
	if ex.Status != "SUCCEEDED" || ex.States[len(ex.States)-1] != "CampaignPartiallyCompleted" {
		t.Fatalf("campaign ended %s %s: %v", ex.Status, ex.Error, ex.States)
	}
	cp = r.campaign()
	r.wantLegs(cp, "completed", "rejected", "completed")
	if cp.Committed != "10000.25" {
		t.Errorf("committed %s, want the approved 10000.25", cp.Committed)
	}
}

// The same campaign rejected: nothing is created at any seller, every leg ends rejected in its
// own execution, and the campaign reads canceled.
func TestCampaignTotalOverTheThresholdRejectedBuysNothing(t *testing.T) {
	r := beginCampaign(t, "best_effort")
	r.addingUpOverThreshold()
	r.submitCampaign()
	r.rejectedBuysNothing(r.campaignLink())
}
