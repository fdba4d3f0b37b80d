package adcptest

import (
	"strings"
	"testing"
)

// syncPlan registers plan_q3 with budget (the plan's budget object) and fails the test if the
// agent refuses it.
func syncPlan(t *testing.T, g *Governance, budget map[string]any) {
	t.Helper()
	cs := connect(t, g.URL(), g.opts.Token, 0)
	r := callT(t, cs, "sync_plans", map[string]any{"idempotency_key": key(), "plans": []any{map[string]any{
		"plan_id": "plan_q3", "brand": map[string]any{"domain": "acmeoutdoor.example"},
		"objectives": "Q3 awareness", "budget": budget,
		"flight": map[string]any{"start": "2026-07-01T00:00:00Z", "end": "2026-09-30T23:59:59Z"},
	}}})
	if r.IsError {
		t.Fatalf("sync_plans: %s", r.Raw)
	}
}

// The plan pushed with sync_plans binds check_governance: a buy over the plan's total or over
// its per-transaction limit (reallocation_threshold, as the official storyboards use it) is
// denied with a finding that names the limit, in the version the caller speaks; a buy within
// both is approved.
func TestGovernanceAppliesTheSyncedPlan(t *testing.T) {
	tests := []struct {
		name    string
		version string
		budget  map[string]any
		amount  float64
		verdict string
		finding string
	}{
		// governance_spend_authority/denied: a 50,000 buy against a 10,000 plan.
		{"over the total", "", map[string]any{"total": 10000, "currency": "USD", "reallocation_threshold": 0}, 50000, "denied", "exceeds the plan's total budget"},
		{"over the total, 3.0", Version30, map[string]any{"total": 10000, "currency": "USD", "reallocation_threshold": 0}, 50000, "denied", "exceeds the plan's total budget"},
		// media_buy_governance_escalation: 50,000 within a 50,000 plan, over its 20,000 limit.
		{"over the per-transaction limit", "", map[string]any{"total": 50000, "currency": "USD", "reallocation_threshold": 20000}, 50000, "denied", "per-transaction limit"},
		{"within both", "", map[string]any{"total": 50000, "currency": "USD", "reallocation_threshold": 20000}, 20000, "approved", ""},
		{"unlimited reallocation", "", map[string]any{"total": 100000, "currency": "USD", "reallocation_unlimited": true}, 40000, "approved", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, cs := startGov(t, GovernanceOptions{Version: tt.version})
			syncPlan(t, g, tt.budget)
			a := checkArgs("", tt.amount)
			if tt.version == Version30 {
				a["adcp_version"] = "3.0"
			}
			r := callT(t, cs, "check_governance", a)
			verdict := r.str("verdict")
			if tt.version == Version30 {
				verdict = r.str("status")
			}
			if r.IsError || verdict != tt.verdict {
				t.Fatalf("verdict %q, want %q: %s", verdict, tt.verdict, r.Raw)
			}
			if tt.version != Version30 {
				mustValidate(t, "governance/check-governance-response.json", r.Raw)
			}
			findings, _ := r.get("findings").([]any)
			if tt.finding == "" {
				if len(findings) != 0 || r.str("governance_context") == "" {
					t.Errorf("approval: %s", r.Raw)
				}
				return
			}
			if len(findings) == 0 || r.get("governance_context") != nil {
				t.Fatalf("denial without findings or with a token: %s", r.Raw)
			}
			f, _ := findings[0].(map[string]any)
			if f["severity"] != "critical" || !strings.Contains(f["explanation"].(string), tt.finding) {
				t.Errorf("finding %v, want critical naming %q", f, tt.finding)
			}
		})
	}
}

// What was committed to a plan (report_plan_outcome) counts against its total: the next buy
// that would take the plan over it is denied, and the outcome's plan_summary reports the
// plan's own numbers.
func TestGovernanceCountsCommittedSpendAgainstThePlan(t *testing.T) {
	g, cs := startGov(t, GovernanceOptions{})
	syncPlan(t, g, map[string]any{"total": 10000, "currency": "USD", "reallocation_unlimited": true})
	chk := callT(t, cs, "check_governance", checkArgs("", 8000))
	if chk.str("verdict") != "approved" {
		t.Fatalf("first buy: %s", chk.Raw)
	}
	out := callT(t, cs, "report_plan_outcome", map[string]any{
		"idempotency_key": key(), "plan_id": "plan_q3", "check_id": chk.str("check_id"),
		"governance_context": chk.str("governance_context"), "outcome": "completed",
		"seller_response": map[string]any{"seller_reference": "mb_1", "committed_budget": 8000},
	})
	if out.get("plan_summary.total_committed") != float64(8000) || out.get("plan_summary.budget_remaining") != float64(2000) {
		t.Errorf("plan_summary: %s", out.Raw)
	}
	if r := callT(t, cs, "check_governance", checkArgs("", 3000)); r.str("verdict") != "denied" {
		t.Errorf("3,000 more on 8,000 of 10,000: %s", r.Raw)
	}
	if r := callT(t, cs, "check_governance", checkArgs("", 2000)); r.str("verdict") != "approved" {
		t.Errorf("2,000 more on 8,000 of 10,000: %s", r.Raw)
	}
}

// A caller that sends adcp_major_version without adcp_version speaks 3.0 (the SDK's 3.0
// clients send only the integer, the field adcp_version arrived in 3.1): the agents answer it
// in 3.0's shape, as governance_spend_authority/denied grades it.
func TestAgentsAnswerAThreeZeroCallerInThreeZero(t *testing.T) {
	g, cs := startGov(t, GovernanceOptions{})
	syncPlan(t, g, map[string]any{"total": 10000, "currency": "USD", "reallocation_threshold": 0})
	a := checkArgs("", 50000)
	delete(a, "adcp_version")
	a["adcp_major_version"] = 3
	r := callT(t, cs, "check_governance", a)
	if r.str("status") != "denied" || r.get("verdict") != nil || r.get("adcp_version") != nil {
		t.Errorf("3.0 caller's check: %s", r.Raw)
	}
	_, ss := startSeller(t, SellerOptions{})
	c := createArgs("")
	delete(c, "adcp_version")
	c["adcp_major_version"] = 3
	if r := callT(t, ss, "create_media_buy", c); r.str("status") != "pending_creatives" || r.get("adcp_version") != nil {
		t.Errorf("3.0 caller's create: %s", r.Raw)
	}
	// A 3.1 caller sends both and gets 3.1.
	c = createArgs("")
	c["adcp_major_version"] = 3
	if r := callT(t, ss, "create_media_buy", c); r.str("status") != "completed" || r.str("adcp_version") != "3.1" {
		t.Errorf("3.1 caller's create: %s", r.Raw)
	}
}
