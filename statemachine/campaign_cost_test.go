package statemachine

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// The campaign row of the cost table: a campaign of campaignLegs legs, each a media buy
// completed by webhook after 24 h (the buy's own row, simulated per leg), plus the Campaign
// execution's own states (walked on campaign.asl.json, its plan pushed), its sync_plans and
// settle invocations, and the submit and reads of the campaign API.
const campaignLegs = 5

// Calls of the campaign API and function (costOf's units).
const (
	callCampaignSubmit = "api:campaign-submit" // POST /v1/campaigns, per campaign (its legs' writes are per leg below)
	callCampaignLeg    = "api:campaign-leg"    // per leg of the submit: AcquireLock, CreateOperation
	callCampaignRead   = "api:campaign-read"   // GET /v1/campaigns/{id}: the campaign and its legs' operations
	callSettle         = "campaign:settle"     // the campaign function's settle: campaign + legs read, outcome write
	callSyncPlans      = "campaign:sync_plans" // the campaign function's sync_plans of the campaign's plan
	callRelease        = "campaign:release"    // the campaign function's release of the checked legs
	callCampaignAsk    = "notify:campaign"     // notify's request of the campaign's one approval
	callCampaignDecide = "approve:campaign"    // the approver's GET and POST of the campaign's page
)

var campaignCostOf = map[string]unitCost{
	callCampaignSubmit: {durationDefault, 0, smallWrite + 2*smallWrite + smallWrite,
		"campaign.Submit: Claim put, campaign put (item + gsi2), CompleteClaim update"},
	callCampaignLeg: {0, 0, smallWrite + createOperation, "per leg: AcquireLock update, CreateOperation txn"},
	callCampaignRead: {durationDefault, consistentRead * (1 + campaignLegs) * 2, 0,
		"GET /v1/campaigns/{id}: the campaign, every leg's operation and its latest approval"},
	callSettle:    {durationDefault, consistentRead * (1 + campaignLegs), 2 * smallWrite, "settle: campaign + legs read, outcome update (item + gsi2)"},
	callSyncPlans: {500 * time.Millisecond, consistentRead, 2 * smallWrite, "sync_plans: campaign read, the plan's claim update (item + gsi2), the governance call (500 ms)"},
	callRelease:   {durationDefault, consistentRead * (1 + campaignLegs), 0, "release: campaign + legs read"},
	callCampaignAsk: {500 * time.Millisecond, consistentRead*(2+campaignLegs*3) + consistentRead*campaignLegs*2,
		smallWrite + smallWrite + smallWrite + campaignLegs*(transition+smallWrite),
		"notify, campaign: campaign + legs + histories read, each leg's verdict read; approval put, campaign update, request event; per leg: move to awaiting_approval (txn), request event"},
	callCampaignDecide: {2 * durationDefault, 2 * (consistentRead*(2+campaignLegs) + consistentRead*campaignLegs), smallWrite + smallWrite + smallWrite + campaignLegs*smallWrite,
		"approve, campaign: GET and POST each read the approval, campaign, legs and verdicts; viewed event, decision update, decision event on the campaign and on each leg"},
}

// walkCampaign returns the states a Campaign execution of legs legs enters when every leg
// completes: each Map item processor once per leg, every Choice by the branch named in pick
// (else its Default).
func walkCampaign(t testing.TB, legs int, pick map[string]string) []string {
	t.Helper()
	var doc struct {
		StartAt string                     `json:"StartAt"`
		States  map[string]json.RawMessage `json:"States"`
	}
	if err := json.Unmarshal([]byte(CampaignDefinition), &doc); err != nil {
		t.Fatal(err)
	}
	var walk func(start string, states map[string]json.RawMessage) []string
	walk = func(start string, states map[string]json.RawMessage) []string {
		var out []string
		for name := start; name != ""; {
			var st struct {
				Type, Next, Default string
				End                 bool
				ItemProcessor       *struct {
					StartAt string                     `json:"StartAt"`
					States  map[string]json.RawMessage `json:"States"`
				}
			}
			if err := json.Unmarshal(states[name], &st); err != nil || st.Type == "" {
				t.Fatalf("campaign state %s: %v", name, err)
			}
			out = append(out, name)
			switch {
			case st.Type == "Map":
				for range legs {
					out = append(out, walk(st.ItemProcessor.StartAt, st.ItemProcessor.States)...)
				}
				name = st.Next
			case st.Type == "Choice":
				if next, ok := pick[name]; ok {
					name = next
				} else {
					name = st.Default
				}
			case st.Type == "Succeed" || st.Type == "Fail" || st.End:
				name = ""
			default:
				name = st.Next
			}
			if len(out) > 10_000 {
				t.Fatal("campaign walk does not end")
			}
		}
		return out
	}
	return walk(doc.StartAt, doc.States)
}

// campaignRow prices campaignLegs-leg campaigns completed by webhook after 24 h (runs seeded
// legs each), with the campaign's one approval when approved says so, and returns the table's
// line: transitions per campaign and $ per 1,000 campaigns.
func campaignRow(tb testing.TB, runs int, approved bool) string {
	asl := load(tb)
	pick := map[string]string{"PushPlan": "SyncPlan", "CampaignOutcome": "CampaignCompleted"}
	name := fmt.Sprintf("%d-leg campaign, plan, webhooks, 24 h", campaignLegs)
	if approved {
		pick["NeedsCampaignApproval"], name = "RequestCampaignApproval", fmt.Sprintf("%d-leg campaign, one approval", campaignLegs)
	}
	states := walkCampaign(tb, campaignLegs, pick)
	if states[len(states)-1] != "CampaignCompleted" {
		tb.Fatalf("the happy path ends in %s", states[len(states)-1])
	}
	var sum buyCost
	for seed := range uint64(runs) {
		r := rand.New(rand.NewPCG(seed, 42)).Float64
		var c buyCost
		for range campaignLegs {
			res := simulate(tb, asl, wakeWebhook, simulatedDay, r)
			if res.end != "MediaBuyCompleted" {
				tb.Fatalf("campaign leg ended in %s", res.end)
			}
			leg := costOfBuy(tb, res)
			// A leg is submitted and read through the campaign, not on its own. Its check runs in
			// the campaign's CheckLegs (counted in the campaign's own states below, with the
			// same governance invocation), and its execution enters StartCampaignLeg where a
			// buy enters CheckGovernance and GovernanceDecision: one transition fewer.
			leg = leg.add(unitOf(tb, callSubmit, -1)).add(unitOf(tb, callRead, -readsPerBuy)).add(unitOf(tb, callCampaignLeg, 1))
			leg.transitions--
			leg.sfn -= usdPerTransition
			leg.events -= 5 // a lambda:invoke Task's five history events
			leg.sweep = fleet1kUnlisted.cost().usdPerBuyDay
			c = c.add(leg)
		}
		own := buyCost{transitions: float64(len(states)), apiRequests: 1 + readsPerBuy}
		own.sfn = own.transitions * usdPerTransition
		own.api = own.apiRequests * usdPerAPIRequest
		c = c.add(own).add(unitOf(tb, callCampaignSubmit, 1)).add(unitOf(tb, callCampaignRead, readsPerBuy)).add(unitOf(tb, callSettle, 1)).
			add(unitOf(tb, callSyncPlans, 1)).add(unitOf(tb, callRelease, 1))
		if approved {
			c = c.add(unitOf(tb, callCampaignAsk, 1)).add(unitOf(tb, callCampaignDecide, 1)).add(unitOf(tb, callRelease, 1))
		}
		sum = sum.add(c)
	}
	mean := sum.scale(1 / float64(runs))
	per := mean.scale(buysPerBatch)
	return fmt.Sprintf("%-34s %5s/%5.0f %6s %7.0f %8s %5d %6.0f %6.0f %6.0f %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f",
		name, "-", mean.transitions, "-", mean.events, "-", campaignLegs+1,
		mean.invocations, mean.rru, mean.wru, per.sfn, per.lambda, per.dynamo, per.api, per.sweep, per.total())
}

// unitOf prices n calls of kind (negative n takes them out) outside the state machine.
func unitOf(tb testing.TB, kind string, n float64) buyCost {
	tb.Helper()
	u, ok := costOf[kind]
	if !ok {
		u, ok = campaignCostOf[kind]
	}
	if !ok {
		tb.Fatalf("no cost assumption for %q", kind)
	}
	c := buyCost{rru: n * u.rru, wru: n * u.wru}
	if u.lambda > 0 {
		c.invocations = n
		c.gbSeconds = n * u.lambda.Seconds() * lambdaGB
	}
	if kind == callSubmit || kind == callRead {
		c.apiRequests = n
	}
	c.lambda = c.invocations*usdPerRequest + c.gbSeconds*usdPerGBSecond
	c.dynamo = c.rru*usdPerRRU + c.wru*usdPerWRU
	c.api = c.apiRequests * usdPerAPIRequest
	return c
}

func TestCampaignCostRow(t *testing.T) {
	states := walkCampaign(t, campaignLegs, map[string]string{"CampaignOutcome": "CampaignCompleted"})
	// PushPlan, CheckLegs, three states per leg (CheckLeg, LegCheckDecision, LegChecked),
	// ReleaseLegs, NeedsCampaignApproval, PlaceLegs, three states per leg (RunLeg,
	// LegHandedOver, LegEnded), then Settle, NeedsCompensation, CampaignOutcome,
	// CampaignCompleted.
	if want := 2 + 3*campaignLegs + 3 + 3*campaignLegs + 4; len(states) != want {
		t.Errorf("the campaign's own happy path enters %d states, want %d: %v", len(states), want, states)
	}
	// The campaign's one approval adds two states, whatever the number of legs: the request and
	// the release of the approved legs.
	asked := walkCampaign(t, campaignLegs, map[string]string{"NeedsCampaignApproval": "RequestCampaignApproval", "CampaignOutcome": "CampaignCompleted"})
	if len(asked) != len(states)+2 || !slices.Contains(asked, "RequestCampaignApproval") || !slices.Contains(asked, "ReleaseApprovedLegs") {
		t.Errorf("the approved path enters %d states: %v", len(asked), asked)
	}
	// all_or_nothing after a failed leg: the cancels add a Map of two states per placed leg and
	// a second settle.
	comp := walkCampaign(t, 2, map[string]string{"NeedsCompensation": "CompensateLegs"})
	if n := len(comp); n != 2+3*2+3+3*2+2+1+2*2+1+2 {
		t.Errorf("compensation path: %d states: %v", n, comp)
	}
	t.Log(campaignRow(t, 2, false))
	t.Log(campaignRow(t, 2, true))
}
