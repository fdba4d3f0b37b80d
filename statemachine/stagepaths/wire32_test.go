package stagepaths

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/adcptest"
	"github.com/buyflow/buyflow/internal/apiclient"
	"github.com/buyflow/buyflow/internal/devstack"
	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/registry"
)

// The main buy paths with a seller and a governance agent that speak only AdCP 3.2: they
// advertise ["3.2"], check every request against the 3.2.3 schemas and refuse one in an older
// release (adcptest.Version32). buyflow negotiates 3.2 from their capabilities and speaks it.

// begin32 starts a scenario whose buy goes to a 3.2 seller and a 3.2 governance agent of its own.
func begin32(t *testing.T, patch map[string]any) *buyRun {
	t.Helper()
	r := begin(t, patch)
	r.agents = start32(t)
	return r
}

// start32 starts a 3.2 seller and a 3.2 governance agent, as the local stack's simulated ones
// are started (async by default, one step every 300 ms), and adds them to the registry.
func start32(t *testing.T) *runAgents {
	t.Helper()
	a := &runAgents{govID: "gov-32-" + randomHex(4)}
	a.seller, a.sellerID = startSellerAt(t, adcptest.Version32)
	govTok := randomHex(16)
	a.gov = adcptest.NewGovernance(adcptest.GovernanceOptions{Token: govTok, Version: adcptest.Version32, StepInterval: 300 * time.Millisecond})
	t.Cleanup(a.gov.Close)
	ticking(t, a.gov.AdvanceDue)
	register32(t, a.govID, adcp.RoleGovernance, httptest.NewServer(a.gov), govTok, nil)
	return a
}

// startSellerAt starts a seller of its own that speaks AdCP version (adcptest.Version30,
// "" for 3.1, adcptest.Version32), as the local stack's are started, in the registry under the
// id it returns.
func startSellerAt(t *testing.T, version string) (*adcptest.Seller, string) {
	t.Helper()
	return startSellerWith(t, "v"+strings.ReplaceAll(version, ".", ""), adcptest.SellerOptions{Version: version})
}

// startSellerWith starts a seller of its own with o (its token, default behaviour, clock and
// webhook key filled in as the local stack's), in the registry under an id made of name.
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
	ticking(t, s.AdvanceDue)
	register32(t, id, adcp.RoleSeller, httptest.NewServer(s), tok, &adcp.WebhookConfig{Mode: adcp.WebhookRFC9421, JWKS: jwks})
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

func register32(t *testing.T, id string, role adcp.Role, srv *httptest.Server, token string, webhook *adcp.WebhookConfig) {
	t.Helper()
	t.Cleanup(srv.Close)
	ctx := context.Background()
	ref := devstack.AgentSecretPrefix + id
	sm := secretsmanager.NewFromConfig(dynamotest.AWSConfig())
	if _, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(ref), SecretString: aws.String(token)}); err != nil {
		t.Fatal(err)
	}
	rec := registry.Record{Agent: adcp.Agent{ID: id, Role: role, MCPURL: srv.URL + "/mcp", CredentialRef: ref, Webhook: webhook}}
	if _, err := registry.NewStore(sys.ddb, sys.table).Add(ctx, rec, devstack.LocalOperator, "add"); err != nil {
		t.Fatal(err)
	}
}

// spoke32 checks that every call of the run reached the 3.2 agents in 3.2 (the capabilities
// read aside, which is how the version is learnt) and that none was refused.
func spoke32(t *testing.T, r *buyRun) {
	t.Helper()
	for _, c := range append(r.sellerCalls(""), r.governanceCalls("")...) {
		if c.Tool == adcp.ToolGetAdCPCapabilities {
			continue
		}
		if v := arg(t, c.Arguments, "adcp_version"); v != adcp.Version32 || c.ValidationError != "" {
			t.Errorf("%s went out as AdCP %v (validation: %q): %s", c.Tool, v, c.ValidationError, c.Result)
		}
	}
}

func TestWire32ApprovedSyncCreateSucceeds(t *testing.T) {
	r := begin32(t, nil)
	r.submit(apiclient.Buy{Sim: "sync"})
	ex := only(t, r.finish(60*time.Second))
	path(t, ex, "SUCCEEDED", "", seq(prelude, []string{"CreateMediaBuy", "SellerAvailable", "AwaitSeller"}, completes)...)
	wantCalls(t, "seller", tools(r.sellerCalls("")), "create_media_buy")
	wantCalls(t, "governance", tools(r.governanceCalls("")), "check_governance", "report_plan_outcome")
	spoke32(t, r)
	check := r.governanceCalls("check_governance")[0]
	if arg(t, check.Arguments, "target_agent") == nil || arg(t, check.Arguments, "governance_context") != nil {
		t.Errorf("the 3.2 intent check %s: want target_agent and no governance_context", check.Arguments)
	}
	var verdict struct {
		CheckID string `json:"check_id"`
		Context string `json:"governance_context"`
	}
	_ = json.Unmarshal(check.Result, &verdict)
	report := r.governanceCalls("report_plan_outcome")[0]
	if arg(t, report.Arguments, "check_id") != verdict.CheckID || arg(t, report.Arguments, "governance_context") != verdict.Context || verdict.Context == "" {
		t.Errorf("report_plan_outcome %s: want check %s and its governance_context", report.Arguments, verdict.CheckID)
	}
	op := r.operation()
	wantStatus(t, op, "completed")
	if op.MediaBuyID == "" {
		t.Error("completed without the seller's media_buy_id")
	}
}

func TestWire32GovernanceDeniedCreatesNothing(t *testing.T) {
	r := begin32(t, nil)
	r.submit(apiclient.Buy{Sim: "denied"})
	ex := only(t, r.finish(60*time.Second))
	path(t, ex, "FAILED", "GovernanceDenied", seq(prelude, []string{"GovernanceDenied", "RecordFailure", "FailureKind", "DeniedByGovernance"})...)
	wantCalls(t, "seller", tools(r.sellerCalls("")))
	wantCalls(t, "governance", tools(r.governanceCalls("")), "check_governance")
	spoke32(t, r)
	wantStatus(t, r.operation(), "rejected")
}

func TestWire32SubmittedThenWebhookWakes(t *testing.T) {
	r := begin32(t, map[string]any{"poll_initial_seconds": 10, "poll_max_seconds": 10})
	r.submit(apiclient.Buy{Sim: "async_complete"})
	ex := only(t, r.finish(60*time.Second))
	path(t, ex, "SUCCEEDED", "", seq(prelude, []string{"CreateMediaBuy", "SellerAvailable", "AwaitSeller"}, completes)...)
	wantCalls(t, "seller", tools(r.sellerCalls("")), "create_media_buy") // no poll
	spoke32(t, r)
	wantStatus(t, r.operation(), "completed")
	if tl := r.timeline(); !slices.Contains(tl, "webhook") || slices.Contains(tl, "poll") {
		t.Errorf("timeline %v: want the seller's webhook and no poll", tl)
	}
}

func TestWire32ChangeBudgetIncreaseApplied(t *testing.T) {
	r := begin32(t, nil)
	r.submit(apiclient.Buy{Sim: "sync", Budgets: []float64{3000}})
	path(t, only(t, r.finish(60*time.Second)), "SUCCEEDED", "", seq(prelude, []string{"CreateMediaBuy", "SellerAvailable", "AwaitSeller"}, completes)...)
	id := r.change(`{"budget":{"total":3500},"reason":"strong first week","context":{"sim":"sync"}}`, false)
	ex := only(t, r.finishNamed(id, 60*time.Second))
	path(t, ex, "SUCCEEDED", "", seq(changePrelude, changeApplied)...)
	spoke32(t, r)
	checks := r.governanceCalls("check_governance")
	if len(checks) != 2 {
		t.Fatalf("governance heard %d checks, want the buy's and the change's", len(checks))
	}
	// 3.2: the positive increment the change commits, not the new total.
	if pc, _ := arg(t, checks[1].Arguments, "proposed_commitment").(map[string]any); pc == nil || pc["amount"] != 500.0 || pc["currency"] != "USD" {
		t.Errorf("the change's check %s: want proposed_commitment 500 USD", checks[1].Arguments)
	}
	wantCurrent(t, r.current(), 2, "active", "3500.00", "applied")
	if reports := r.governanceCalls("report_plan_outcome"); len(reports) != 2 {
		t.Errorf("governance heard %v, want the change reported", tools(reports))
	}
}

// A campaign whose legs go to a 3.0 seller, a 3.1 seller and a 3.2 seller: each leg is placed,
// each seller hearing its create in the version it speaks (3.1 for the 3.0 seller, which reads
// it). The 3.0 seller is the simulated one in its 3.0 mode: the official SDK seller runs only in
// the end-to-end suite (e2e/sdkseller), not in this package's system.
func TestWire32CampaignMixesVersions(t *testing.T) {
	r := &campaignRun{buyRun: begin(t, nil), spec: apiclient.CampaignSpec{Policy: "best_effort"}}
	s30, id30 := startSellerAt(t, adcptest.Version30)
	s32, id32 := startSellerAt(t, adcptest.Version32)
	legs := []struct {
		id      string
		seller  *adcptest.Seller
		version string
	}{{id30, s30, "3.1"}, {devstack.SellerID, sys.agents.Seller, "3.1"}, {id32, s32, "3.2"}}
	tag := fmt.Sprintf("%08X", rand.Uint32())
	for i, l := range legs {
		r.spec.Legs = append(r.spec.Legs, apiclient.LegSpec{SellerID: l.id, PO: fmt.Sprintf("PO-CV-%s-%d", tag, i), Budget: float64(1000 * (i + 1)), Sim: "sync"})
	}
	r.submitCampaign()
	ex := only(t, r.finish(90*time.Second))
	if ex.Status != "SUCCEEDED" {
		t.Fatalf("campaign ended %s %s: %v", ex.Status, ex.Error, ex.States)
	}
	c := r.campaign()
	if c.Status != "completed" || c.Committed != "6000.00" {
		t.Errorf("campaign %s, committed %s", c.Status, c.Committed)
	}
	for i, l := range legs {
		if c.Legs[i].Status != "completed" || c.Legs[i].SellerID != l.id {
			t.Errorf("leg %d at %s is %s (%s)", i, c.Legs[i].SellerID, c.Legs[i].Status, c.Legs[i].Reason)
		}
		leg := &buyRun{po: r.spec.Legs[i].PO, op: r.sub.Legs[i].OperationID}
		creates := mine(l.seller.Calls(), "create_media_buy", leg.keys(l.seller.Calls()))
		var versions []any
		for _, cr := range creates {
			versions = append(versions, arg(t, cr.Arguments, "adcp_version"))
		}
		if len(versions) != 1 || versions[0] != l.version {
			t.Errorf("leg %d: creates at %s in AdCP %v, want one in %s", i, l.id, versions, l.version)
		}
	}
}

// A seller task that fails is reported to governance as failed, in 3.2's shape: check_id,
// governance_context and the error (the 3.2 governance agent refuses it otherwise).
func TestWire32SellerFailedIsReported(t *testing.T) {
	r := begin32(t, nil)
	r.submit(apiclient.Buy{Sim: "async_fail"})
	ex := only(t, r.finish(60*time.Second))
	ends(t, ex, "FAILED", "SellerDidNotComplete", "SellerDidNotComplete", "RecordFailure", "FailureKind", "SellerTaskFailed")
	wantStatus(t, r.operation(), "failed")
	r.wantReport("failed")
	spoke32(t, r)
	if reports := r.governanceCalls("report_plan_outcome"); len(reports) == 1 {
		if res := string(reports[0].Result); strings.Contains(res, "adcp_error") {
			t.Errorf("governance refused the failed report: %s", res)
		}
	}
}
