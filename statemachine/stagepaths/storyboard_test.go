package stagepaths

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/adcptest"
	"github.com/buyflow/buyflow/internal/apiclient"
	"github.com/buyflow/buyflow/internal/buyerstoryboards"
	"github.com/buyflow/buyflow/internal/money"
)

// TestOrchestratorStoryboard runs the partial-failure steps of the buyer storyboard
// orchestrator_multi_agent (internal/buyerstoryboards grades the rest; these need the Campaign
// state machine): a best_effort campaign with one leg at seller alpha and one at seller beta,
// each a simulated seller of its own serving the storyboard's fixture, beta offline (HTTP 503 on
// every create of its step). It grades buyflow's calls and its campaign view with the
// storyboard's checks and holds the README's rows for those steps to the results.
func TestOrchestratorStoryboard(t *testing.T) {
	r := &campaignRun{buyRun: begin(t, nil)}
	raw, err := os.ReadFile(filepath.Join(sys.root, "internal/buyerstoryboards/testdata/specialisms/orchestrator-multi-agent/index.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	sb, err := buyerstoryboards.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	opts, err := buyerstoryboards.Seller(sb)
	if err != nil {
		t.Fatal(err)
	}
	// Each persona is an agent of its own, whose breaker may count beta's failures without
	// touching the shared sellers': 20 failures, more than the create's retries.
	sellers := map[string]*adcptest.Seller{}
	ids := map[string]string{}
	for _, persona := range []string{"alpha", "beta"} {
		signer, jwks, err := adcptest.NewWebhookKey("sb-"+persona, nil)
		if err != nil {
			t.Fatal(err)
		}
		o := opts
		o.Token, o.WebhookSigner, o.JWKS = randomHex(16), signer, jwks
		s := adcptest.NewSeller(o)
		t.Cleanup(s.Close)
		d := startDownAgent(t, "sb-"+persona+"-"+randomHex(4), adcp.RoleSeller, s, o.Token,
			&adcp.WebhookConfig{Mode: adcp.WebhookRFC9421, JWKS: jwks}, `{"circuit_breaker":{"failures":20}}`)
		sellers[persona], ids[persona] = s, d.id
	}
	// The storyboard's amounts (100,000 budget; 50,000 at alpha, 25,000 at beta) over ten, so
	// that the campaign stays under the local approval threshold: no person is asked.
	tag := fmt.Sprintf("%08X", rand.Uint32())
	r.spec = apiclient.CampaignSpec{Policy: "best_effort", Total: sb.Fixtures.Publisher.CampaignBudget / 10, Legs: []apiclient.LegSpec{
		{SellerID: ids["alpha"], PO: "PO-SB-" + tag + "-A", Budget: 5000},
		{SellerID: ids["beta"], PO: "PO-SB-" + tag + "-B", Budget: 2500},
	}}
	r.submitCampaignWith(func(req map[string]any) {
		for i, step := range []string{"activate_alpha", "activate_beta_fails"} {
			legBuy(req, i)["context"] = map[string]any{"correlation_id": sb.ID + "--" + step}
		}
	})
	ex := only(t, r.finish(120*time.Second))
	c := r.campaign()
	t.Logf("campaign ended %s (%s); legs %+v", ex.Status, c.Status, c.Legs)

	alpha := buyerstoryboards.Calls(sellers["alpha"].Calls())
	beta := buyerstoryboards.Calls(sellers["beta"].Calls())
	canceled := false
	for _, call := range alpha {
		if call.Tool == "update_media_buy" && call.Args["canceled"] == true {
			canceled = true
		}
	}
	// What buyflow reports of the campaign (GET /v1/campaigns/{id}), in the storyboard's words:
	// the committed spend, and what the legs that did not complete leave unallocated.
	unallocated := money.Amount{Currency: c.Currency}
	for _, leg := range c.Legs {
		if leg.Status != "completed" {
			a, err := money.ParseDecimal(leg.Amount, c.Currency)
			if err != nil {
				t.Fatal(err)
			}
			unallocated = unallocated.Add(a)
		}
	}
	out := map[string]any{}
	if c.Committed != "" {
		out["budget_reconciliation"] = map[string]any{"committed_spend": c.Committed, "unallocated": unallocated.Decimal()}
	}

	type graded struct {
		calls []buyerstoryboards.Call
		call  string
		via   string
	}
	plan := map[string]graded{
		"activate_alpha":      {calls: alpha, call: "create_media_buy"},
		"activate_beta_fails": {calls: beta, call: "create_media_buy", via: "a best_effort campaign; and alpha's buy is never canceled"},
		"reconcile_budget": {via: "buyflow's campaign view: committed, and each leg's amount and status (unallocated: the legs that did not complete); " +
			"amounts a tenth of the storyboard's, under the local approval threshold"},
	}
	readme := readmeTable(t)
	aliases := map[string]string{}
	for _, p := range sb.Phases {
		for _, st := range p.Steps {
			g, ok := plan[st.ID]
			if !ok {
				continue // graded by internal/buyerstoryboards
			}
			obs := buyerstoryboards.Observation{Calls: g.calls, Index: -1, Output: out}
			for i, call := range g.calls {
				if call.Tool == g.call {
					obs.Index = i
					break
				}
			}
			res, checks := buyerstoryboards.GradeStep(st, obs, g.via, aliases)
			if st.ID == "activate_beta_fails" && canceled {
				res = buyerstoryboards.Fail + ": alpha's buy was canceled (update_media_buy canceled) after beta failed (" + g.via + ")"
			}
			for _, ch := range checks {
				t.Logf("%s %s: %s (%s)", st.ID, ch.Check, ch.Result, ch.Detail)
			}
			row := buyerstoryboards.Row{Storyboard: sb.ID, Step: st.ID, Result: res}
			if readme[row.Key()] != res {
				t.Errorf("README.md's row for %s differs from the result; it should read:\n%s", row.Key(),
					buyerstoryboards.RenderTable([]buyerstoryboards.Row{row}))
			}
		}
	}
}

// readmeTable reads the README's conformance table.
func readmeTable(t *testing.T) map[string]string {
	raw, err := os.ReadFile(filepath.Join(sys.root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, _, rows, err := buyerstoryboards.Table(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	return rows
}
