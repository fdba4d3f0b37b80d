package stagepaths

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/adcp/interop"
	"github.com/buyflow/buyflow/internal/adcptest"
	"github.com/buyflow/buyflow/internal/apiclient"
	"github.com/buyflow/buyflow/internal/devstack"
	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/registry"
)

// AdCP versions on the workflow's paths.
//
// The system's simulated seller and governance agent speak only AdCP 3.2 (adcptest.Version32,
// started so in env_test.go), and so do the agents tests start for themselves (the breaker's,
// the real-seller modes'): they advertise ["3.2"], check every request against the 3.2.3
// schemas and refuse one in an older release. Every path of the suite therefore runs at 3.2.
// Each scenario's cleanup checks the calls its agents heard (checkSpoken), and TestMain checks
// the shared agents' whole record (calls no scenario claims: a campaign's legs, its plan push),
// so a refusal the workflow survives (a report_plan_outcome governance turned down, say) still
// fails the suite. The one exception is TestOrchestratorStoryboard, whose two sellers serve
// the storyboard's fixture, versions included.
//
// 3.1 agents (adcptest's default) stay on the paths whose requests or answers 3.1 shapes
// differently, each a TestAt31 twin of a path of the suite: the intent check and its report
// (3.1 names the plan; 3.2 the target agent, and the report carries the check's
// governance_context), a denial, conditions applied and checked again (3.2 answers conditions
// with a consultation_context, not a governance_context), a create a webhook completes (3.2's
// media_buy_status beside the task status), a failed seller task's report (3.2 requires
// check_id and governance_context), and a budget increase (3.2's proposed_commitment). A 3.0
// seller, the official SDK's, takes a leg of the campaign that mixes the three.

// beginAt starts a scenario whose buy goes to a seller and a governance agent of its own that
// speak AdCP version ("" for 3.1, adcptest.Version30, adcptest.Version32).
func beginAt(t *testing.T, version string, patch map[string]any) *buyRun {
	t.Helper()
	r := begin(t, patch)
	r.agents = startAgents(t, version)
	return r
}

// startAgents starts a seller and a governance agent that speak version, as the local stack's
// simulated ones are started (async by default, one step every 300 ms), and adds them to the
// registry.
func startAgents(t *testing.T, version string) *runAgents {
	t.Helper()
	a := &runAgents{govID: "gov-v" + strings.ReplaceAll(version, ".", "") + "-" + randomHex(4), version: spokenTo(version)}
	a.seller, a.sellerID = startSellerAt(t, version)
	govTok := randomHex(16)
	a.gov = adcptest.NewGovernance(adcptest.GovernanceOptions{Token: govTok, Version: version, StepInterval: 300 * time.Millisecond})
	t.Cleanup(a.gov.Close)
	ticking(t, a.gov.AdvanceDue)
	registerAgent(t, a.govID, adcp.RoleGovernance, httptest.NewServer(a.gov), govTok, nil)
	return a
}

// spokenTo is the adcp_version buyflow sends an agent that speaks version: 3.2 to a 3.2 agent,
// 3.1 to the others (a 3.0 agent reads 3.1 requests; adcp.Negotiate).
func spokenTo(version string) string {
	if version == adcptest.Version32 {
		return adcp.Version32
	}
	return adcp.WireVersion
}

// startSellerAt starts a seller of its own that speaks AdCP version (adcptest.Version30,
// "" for 3.1, adcptest.Version32), as the local stack's are started, in the registry under the
// id it returns.
func startSellerAt(t *testing.T, version string) (*adcptest.Seller, string) {
	t.Helper()
	return startSellerWith(t, "v"+strings.ReplaceAll(version, ".", ""), adcptest.SellerOptions{Version: version})
}

// startSellerWith starts a seller of its own with o (its token, default behaviour, clock and
// webhook key filled in as the local stack's), in the registry under an id made of name. A 3.2
// seller's whole record is checked when the test ends (refusesNothing).
func startSellerWith(t *testing.T, name string, o adcptest.SellerOptions) (*adcptest.Seller, string) {
	t.Helper()
	signer, jwks, err := adcptest.NewWebhookKey("seller-"+name, nil)
	if err != nil {
		t.Fatal(err)
	}
	id, tok := "seller-"+name+"-"+randomHex(4), randomHex(16)
	o.Token, o.Behavior, o.StepInterval, o.WebhookSigner, o.JWKS = tok, adcptest.SellerAsyncComplete, 300*time.Millisecond, signer, jwks
	s := adcptest.NewSeller(o)
	t.Cleanup(s.Close)
	if o.Version == adcptest.Version32 {
		refusesNothing(t, id, s.Calls)
	}
	ticking(t, s.AdvanceDue)
	registerAgent(t, id, adcp.RoleSeller, httptest.NewServer(s), tok, &adcp.WebhookConfig{Mode: adcp.WebhookRFC9421, JWKS: jwks})
	return s, id
}

// ticking runs advance every 100 ms until the test ends: the simulated agents' clock, as
// devstack's.
func ticking(t *testing.T, advance func() int) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				_ = advance() // how many tasks moved does not matter here
			case <-ctx.Done():
				return
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// registerAgent adds the agent srv serves to the registry under id.
func registerAgent(t *testing.T, id string, role adcp.Role, srv *httptest.Server, token string, webhook *adcp.WebhookConfig) {
	t.Helper()
	t.Cleanup(srv.Close)
	registerAt(t, registry.Record{Agent: adcp.Agent{ID: id, Role: role, MCPURL: srv.URL + "/mcp", Webhook: webhook}}, token)
}

// registerAt adds rec to the registry, as an operator adds an agent, its bearer token in
// Secrets Manager under the credential reference it is given.
func registerAt(t *testing.T, rec registry.Record, token string) {
	t.Helper()
	ctx := context.Background()
	rec.CredentialRef = devstack.AgentSecretPrefix + rec.ID
	sm := secretsmanager.NewFromConfig(dynamotest.AWSConfig())
	if _, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(rec.CredentialRef), SecretString: aws.String(token)}); err != nil {
		t.Fatal(err)
	}
	if err := registry.Validate(rec, devstack.AgentSecretPrefix); err != nil {
		t.Fatal(err)
	}
	if _, err := registry.NewStore(sys.ddb, sys.table).Add(ctx, rec, devstack.LocalOperator, "add"); err != nil {
		t.Fatal(err)
	}
}

// refusal says why call, made to an agent buyflow speaks version to, was not heard as that
// version's request ("" when it was): it went out in another version, failed the agent's
// schemas, or was refused as a request that version does not accept. The capabilities read is
// how buyflow learns the version, so it is sent before one is chosen and is not held to it.
func refusal(c adcptest.Call, version string) string {
	if c.Tool == adcp.ToolGetAdCPCapabilities {
		return ""
	}
	var args struct {
		Version any `json:"adcp_version"`
	}
	_ = json.Unmarshal(c.Arguments, &args) // arguments that are no object fail the schemas below
	switch {
	case c.ValidationError != "":
		return "refused on the schemas: " + c.ValidationError
	case c.ErrorCode == "VERSION_UNSUPPORTED", c.ErrorCode == "INVALID_REQUEST":
		var res struct {
			Error struct {
				Message string `json:"message"`
				Field   string `json:"field"`
			} `json:"adcp_error"`
		}
		_ = json.Unmarshal(c.Result, &res) // the code alone still says it was refused
		return fmt.Sprintf("refused %s at %s: %s", c.ErrorCode, res.Error.Field, res.Error.Message)
	case args.Version != version:
		return fmt.Sprintf("sent as AdCP %v", args.Version)
	}
	return ""
}

// callRef names a call by the ids its arguments carry (the arguments themselves hold webhook
// tokens and governance contexts, which stay out of test logs).
func callRef(c adcptest.Call) string {
	var args struct {
		PO      string `json:"po_number"`
		BuyID   string `json:"media_buy_id"`
		CheckID string `json:"check_id"`
		TaskID  string `json:"task_id"`
		Context struct {
			OperationID string `json:"operation_id"`
		} `json:"context"`
	}
	_ = json.Unmarshal(c.Arguments, &args) // a call without these ids is named by its tool alone
	ref := c.Tool
	for _, kv := range [][2]string{{"po_number", args.PO}, {"operation", args.Context.OperationID}, {"media_buy_id", args.BuyID}, {"check_id", args.CheckID}, {"task_id", args.TaskID}} {
		if kv[1] != "" {
			ref += " " + kv[0] + "=" + kv[1]
		}
	}
	return ref
}

// checkSpoken fails t for each of calls, heard by who, that refusal finds fault with.
func checkSpoken(t *testing.T, who string, calls []adcptest.Call, version string) {
	t.Helper()
	for _, c := range calls {
		if why := refusal(c, version); why != "" {
			t.Errorf("%s, which buyflow speaks AdCP %s to, heard %s: %s", who, version, callRef(c), why)
		}
	}
}

// refusesNothing checks, when t ends, every call a 3.2 agent of t's own heard.
func refusesNothing(t *testing.T, who string, calls func() []adcptest.Call) {
	t.Cleanup(func() { checkSpoken(t, who, calls(), adcp.Version32) })
}

// version is the AdCP version buyflow speaks to r's agents.
func (r *buyRun) version() string {
	if r.agents != nil {
		return r.agents.version
	}
	return adcp.Version32 // the system's agents
}

// spoken checks the calls of r's buy at its seller and its governance agent: each went out in
// the version buyflow speaks to them and none was refused.
func (r *buyRun) spoken() {
	r.t.Helper()
	checkSpoken(r.t, "the seller", r.sellerCalls(""), r.version())
	checkSpoken(r.t, "the governance agent", r.governanceCalls(""), r.version())
}

// unclaimedRefusals lists the calls the system's 3.2 agents heard that refusal finds fault
// with, for TestMain: scenarios check their own buys' calls, this every call.
func unclaimedRefusals(a *devstack.SimulatedAgents) []string {
	var out []string
	add := func(who string, calls []adcptest.Call) {
		for _, c := range calls {
			if why := refusal(c, adcp.Version32); why != "" {
				out = append(out, fmt.Sprintf("%s heard %s: %s", who, callRef(c), why))
			}
		}
	}
	add(devstack.SellerID, a.Seller.Calls())
	for id, s := range a.Others {
		add(id, s.Calls())
	}
	add(devstack.GovernanceID, a.Governance.Calls())
	return out
}

// heardByTool counts the calls the system's agents heard, by tool: which requests the suite's
// paths sent at 3.2 (go test -v prints it).
func heardByTool(a *devstack.SimulatedAgents) map[string]int {
	n := map[string]int{}
	all := append(a.Seller.Calls(), a.Governance.Calls()...)
	for _, s := range a.Others {
		all = append(all, s.Calls()...)
	}
	for _, c := range all {
		n[c.Tool]++
	}
	return n
}

func TestAt31ApprovedSyncCreateSucceeds(t *testing.T) { approvedSyncCreate(beginAt(t, "", nil)) }

func TestAt31GovernanceDeniedCreatesNothing(t *testing.T) { governanceDenied(beginAt(t, "", nil)) }

func TestAt31GovernanceConditionsRecheck(t *testing.T) { conditionsRecheck(beginAt(t, "", nil)) }

func TestAt31SubmittedThenWebhookWakes(t *testing.T) { webhookWakes(beginAt(t, "", webhookFirst)) }

func TestAt31SellerFailed(t *testing.T) { sellerFailed(beginAt(t, "", nil)) }

func TestAt31ChangeBudgetIncreaseApplied(t *testing.T) {
	r := beginAt(t, "", nil)
	r.place()
	budgetIncrease(r)
}

// A campaign whose legs go to the official SDK's seller (AdCP 3.0.6, internal/adcp/interop), a
// 3.1 seller and a 3.2 seller: each leg is placed, the simulated sellers hearing their create in
// the version they speak and the SDK's in 3.1, which a 3.0 seller reads.
func TestCampaignMixesVersions(t *testing.T) {
	r := &campaignRun{buyRun: begin(t, nil), spec: apiclient.CampaignSpec{Policy: "best_effort"}}
	tok := randomHex(16)
	sdk, err := interop.Start(interop.Options{Token: tok, Webhooks: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sdk.Stop)
	idSDK := "sdk-seller-" + randomHex(4)
	registerAt(t, registry.Record{Agent: adcp.Agent{ID: idSDK, Role: adcp.RoleSeller, MCPURL: sdk.MCPURL(),
		Webhook: &adcp.WebhookConfig{Mode: adcp.WebhookRFC9421, JWKSURI: sdk.Base + "/.well-known/jwks.json"}}}, tok)
	s31, id31 := startSellerAt(t, "")
	s32, id32 := startSellerAt(t, adcptest.Version32)
	legs := []struct {
		id      string
		seller  *adcptest.Seller // nil: the SDK's, which records its own
		version string
	}{{idSDK, nil, adcp.WireVersion}, {id31, s31, adcp.WireVersion}, {id32, s32, adcp.Version32}}
	tag := fmt.Sprintf("%08X", rand.Uint32())
	for i, l := range legs {
		r.spec.Legs = append(r.spec.Legs, apiclient.LegSpec{SellerID: l.id, PO: fmt.Sprintf("PO-CV-%s-%d", tag, i), Budget: float64(1000 * (i + 1)), Sim: "sync"})
	}
	// The SDK seller's leg buys from its catalog, in its one account (seller.mjs).
	r.submitCampaignWith(func(req map[string]any) {
		mb := legBuy(req, 0)
		mb["account"] = map[string]any{"account_id": "acc_interop"}
		mb["packages"] = []any{map[string]any{"product_id": "prod_display", "pricing_option_id": "cpm_5", "budget": 1000}}
		mb["context"] = map[string]any{"sdk": "sync"}
	})
	ex := only(t, r.finish(90*time.Second))
	if ex.Status != "SUCCEEDED" {
		t.Fatalf("campaign ended %s %s: %v\nSDK seller: %s", ex.Status, ex.Error, ex.States, sdk.Stderr())
	}
	c := r.campaign()
	if c.Status != "completed" || c.Committed != "6000.00" {
		t.Errorf("campaign %s, committed %s", c.Status, c.Committed)
	}
	for i, l := range legs {
		if c.Legs[i].Status != "completed" || c.Legs[i].SellerID != l.id {
			t.Errorf("leg %d at %s is %s (%s)", i, c.Legs[i].SellerID, c.Legs[i].Status, c.Legs[i].Reason)
		}
		if l.seller == nil {
			continue
		}
		leg := &buyRun{po: r.spec.Legs[i].PO, op: r.sub.Legs[i].OperationID}
		creates := mine(l.seller.Calls(), "create_media_buy", leg.keys(l.seller.Calls()))
		if len(creates) != 1 {
			t.Errorf("leg %d: %d creates at %s, want one", i, len(creates), l.id)
		}
		checkSpoken(t, l.id, creates, l.version)
	}
	if op, err := r.client.Get(context.Background(), r.sub.Legs[0].OperationID); err != nil || op.MediaBuyID == "" {
		t.Errorf("the SDK seller's leg: %+v, %v: want its media_buy_id", op, err)
	}
}
