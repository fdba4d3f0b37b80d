package stagepaths

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"slices"
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
	signer, jwks, err := adcptest.NewWebhookKey("seller-32", nil)
	if err != nil {
		t.Fatal(err)
	}
	a := &runAgents{sellerID: "seller-32-" + randomHex(4), govID: "gov-32-" + randomHex(4)}
	sellerTok, govTok := randomHex(16), randomHex(16)
	a.seller = adcptest.NewSeller(adcptest.SellerOptions{Token: sellerTok, Version: adcptest.Version32, Behavior: adcptest.SellerAsyncComplete,
		StepInterval: 300 * time.Millisecond, WebhookSigner: signer, JWKS: jwks})
	a.gov = adcptest.NewGovernance(adcptest.GovernanceOptions{Token: govTok, Version: adcptest.Version32, StepInterval: 300 * time.Millisecond})
	t.Cleanup(a.seller.Close)
	t.Cleanup(a.gov.Close)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { // the simulated agents' clock, as devstack's
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				a.seller.AdvanceDue()
				a.gov.AdvanceDue()
			case <-ctx.Done():
				return
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	register32(t, a.sellerID, adcp.RoleSeller, httptest.NewServer(a.seller), sellerTok, &adcp.WebhookConfig{Mode: adcp.WebhookRFC9421, JWKS: jwks})
	register32(t, a.govID, adcp.RoleGovernance, httptest.NewServer(a.gov), govTok, nil)
	return a
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
