package adcptest

import (
	"strings"
	"testing"
	"time"
)

const sellerAgentURL = "https://seller.example/mcp"

func checkArgs(sim string, budget float64) map[string]any {
	payload := createArgs("")
	payload["packages"].([]any)[0].(map[string]any)["budget"] = budget
	a := map[string]any{
		"plan_id": "plan_q3", "caller": sellerAgentURL, "tool": "create_media_buy",
		"payload": payload, "purchase_type": "media_buy", "adcp_version": "3.1",
		"idempotency_key": key(),
	}
	if sim != "" {
		a["context"] = map[string]any{"sim": sim}
	}
	return a
}

func TestGovernanceVerdicts(t *testing.T) {
	tests := []struct {
		name    string
		sim     string
		def     GovernanceBehavior
		verdict string
		check   func(t *testing.T, r result)
	}{
		{name: "approved by default", verdict: "approved", check: func(t *testing.T, r result) {
			if r.str("check_id") == "" || r.str("governance_context") == "" || r.str("expires_at") == "" {
				t.Errorf("approval lacks check_id/governance_context/expires_at: %s", r.Raw)
			}
			exp, err := time.Parse(time.RFC3339, r.str("expires_at"))
			if err != nil || time.Until(exp) > 16*time.Minute {
				t.Errorf("expires_at = %s", r.str("expires_at"))
			}
			if strings.Count(r.str("governance_context"), ".") != 2 {
				t.Errorf("governance_context is not compact-JWS shaped: %s", r.str("governance_context"))
			}
		}},
		{name: "short-lived approval", sim: "short_ttl", verdict: "approved", check: func(t *testing.T, r result) {
			exp, err := time.Parse(time.RFC3339, r.str("expires_at"))
			if err != nil || time.Until(exp) > 2*time.Second {
				t.Errorf("expires_at = %s, want within 1 s", r.str("expires_at"))
			}
		}},
		{name: "denied by token", sim: "denied", verdict: "denied", check: func(t *testing.T, r result) {
			if f, _ := r.get("findings").([]any); len(f) == 0 || r.get("governance_context") != nil {
				t.Errorf("denial: %s", r.Raw)
			}
		}},
		{name: "denied by default", def: GovDenied, verdict: "denied"},
		{name: "conditions machine-actionable", sim: "conditions", verdict: "conditions", check: func(t *testing.T, r result) {
			c := r.get("conditions").([]any)[0].(map[string]any)
			if c["field"] != "packages[0].budget" || c["required_value"] != float64(24000) {
				t.Errorf("condition: %v", c)
			}
		}},
		{name: "conditions advisory", sim: "conditions_advisory", verdict: "conditions", check: func(t *testing.T, r result) {
			c := r.get("conditions").([]any)[0].(map[string]any)
			if _, ok := c["required_value"]; ok {
				t.Errorf("advisory condition carries required_value: %v", c)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, cs := startGov(t, GovernanceOptions{Behavior: tt.def})
			r := callT(t, cs, "check_governance", checkArgs(tt.sim, 30000))
			if r.IsError || r.str("verdict") != tt.verdict || r.str("status") != "completed" || r.str("plan_id") != "plan_q3" {
				t.Fatalf("%s", r.Raw)
			}
			mustValidate(t, "governance/check-governance-response.json", r.Raw)
			if tt.check != nil {
				tt.check(t, r)
			}
		})
	}
}

func TestGovernanceConditionsRoundTrip(t *testing.T) {
	_, cs := startGov(t, GovernanceOptions{Behavior: GovConditions})
	first := callT(t, cs, "check_governance", checkArgs("", 30000))
	want := first.get("conditions").([]any)[0].(map[string]any)["required_value"].(float64)
	if r := callT(t, cs, "check_governance", checkArgs("", 29000)); r.str("verdict") != "conditions" {
		t.Errorf("unsatisfied re-check: %s", r.Raw)
	}
	r := callT(t, cs, "check_governance", checkArgs("", want))
	if r.str("verdict") != "approved" || r.str("governance_context") == "" {
		t.Errorf("satisfied re-check: %s", r.Raw)
	}
}

func TestGovernanceAdvisoryDeniesAfterThreeRounds(t *testing.T) {
	_, cs := startGov(t, GovernanceOptions{Behavior: GovConditionsAdvisory})
	var got []string
	for range 4 {
		got = append(got, callT(t, cs, "check_governance", checkArgs("", 30000)).str("verdict"))
	}
	if strings.Join(got, ",") != "conditions,conditions,conditions,denied" {
		t.Errorf("verdicts = %v", got)
	}
}

func TestGovernanceAsyncReview(t *testing.T) {
	tests := []struct {
		sim, verdict string
	}{
		{"async_review", "approved"},
		{"async_review_denied", "denied"},
	}
	for _, tt := range tests {
		t.Run(tt.sim, func(t *testing.T) {
			g, cs := startGov(t, GovernanceOptions{})
			r := callT(t, cs, "check_governance", checkArgs(tt.sim, 30000))
			if r.str("status") != "submitted" || r.str("task_id") == "" || r.get("verdict") != nil {
				t.Fatalf("%s", r.Raw)
			}
			p := poll(t, cs, "get_task_status", r.str("task_id"))
			if p.str("status") != "completed" || p.str("result.verdict") != tt.verdict || p.str("protocol") != "governance" {
				t.Errorf("poll: %s", p.Raw)
			}
			if len(g.CallsTo("get_task_status")) != 1 {
				t.Errorf("calls: %+v", g.Calls())
			}
		})
	}
	t.Run("manual", func(t *testing.T) {
		g, cs := startGov(t, GovernanceOptions{PollsPerStep: -1})
		id := callT(t, cs, "check_governance", checkArgs("async_review", 30000)).str("task_id")
		if p := poll(t, cs, "tasks/get", id); p.str("status") != "submitted" {
			t.Fatalf("%s", p.Raw)
		}
		if st, err := g.Advance(id); err != nil || st != "completed" {
			t.Fatalf("Advance = %s, %v", st, err)
		}
		if p := poll(t, cs, "tasks/get", id); p.str("result.verdict") != "approved" {
			t.Errorf("%s", p.Raw)
		}
	})
}

func TestGovernanceSyncPlansAndOutcome(t *testing.T) {
	g, cs := startGov(t, GovernanceOptions{RequireSyncedPlans: true})
	caps := callT(t, cs, "get_adcp_capabilities", map[string]any{})
	mustValidate(t, "protocol/get-adcp-capabilities-response.json", caps.Raw)
	if r := callT(t, cs, "check_governance", checkArgs("", 1000)); r.code() != "PLAN_NOT_FOUND" {
		t.Errorf("unknown plan: %s", r.Raw)
	}
	plans := map[string]any{"idempotency_key": key(), "plans": []any{map[string]any{
		"plan_id": "plan_q3", "brand": map[string]any{"domain": "acmeoutdoor.example"},
		"objectives": "Q3 awareness", "budget": map[string]any{"total": 100000, "currency": "USD", "reallocation_threshold": 5000},
		"flight": map[string]any{"start": "2026-07-01T00:00:00Z", "end": "2026-09-30T23:59:59Z"},
	}}}
	sp := callT(t, cs, "sync_plans", plans)
	if sp.IsError {
		t.Fatalf("sync_plans: %s", sp.Raw)
	}
	mustValidate(t, "governance/sync-plans-response.json", sp.Raw)
	chk := callT(t, cs, "check_governance", checkArgs("", 1000))
	if chk.str("verdict") != "approved" {
		t.Fatalf("%s", chk.Raw)
	}
	out := func(sim string) result {
		a := map[string]any{
			"idempotency_key": key(), "plan_id": "plan_q3", "check_id": chk.str("check_id"),
			"governance_context": chk.str("governance_context"), "outcome": "completed",
			"seller_response": map[string]any{"seller_reference": "mb_1", "committed_budget": 1000},
		}
		if sim != "" {
			a["context"] = map[string]any{"sim": sim}
		}
		return callT(t, cs, "report_plan_outcome", a)
	}
	r := out("")
	if r.str("outcome_state") != "accepted" || r.str("outcome_id") == "" {
		t.Errorf("outcome: %s", r.Raw)
	}
	mustValidate(t, "governance/report-plan-outcome-response.json", r.Raw)
	if r := out("outcome_findings"); r.str("outcome_state") != "findings" || len(r.get("findings").([]any)) == 0 {
		t.Errorf("findings: %s", r.Raw)
	}
	if _, ok := g.Check(chk.str("check_id")); !ok {
		t.Error("check not recorded")
	}
	// The audit log holds what the plan saw: one approved check, two outcomes committing
	// 1,000 each, the findings of the second, per governance context.
	al := callT(t, cs, "get_plan_audit_logs", map[string]any{"plan_ids": []any{"plan_q3"}, "include_entries": true})
	mustValidate(t, "governance/get-plan-audit-logs-response.json", al.Raw)
	pl, _ := al.get("plans").([]any)
	if al.IsError || len(pl) != 1 {
		t.Fatalf("audit: %s", al.Raw)
	}
	p := result{Body: pl[0].(map[string]any)}
	if p.get("budget.committed") != float64(2000) || p.get("budget.remaining") != float64(98000) ||
		p.get("summary.checks_performed") != float64(1) || p.get("summary.outcomes_reported") != float64(2) ||
		p.get("summary.statuses.approved") != float64(1) || p.get("summary.findings_count") != float64(1) ||
		len(p.get("entries").([]any)) != 3 {
		t.Errorf("audit plan: %s", al.Raw)
	}
	if ga, _ := p.get("governed_actions").([]any); len(ga) != 1 || ga[0].(map[string]any)["check_count"] != float64(1) || ga[0].(map[string]any)["committed"] != float64(2000) {
		t.Errorf("governed actions: %s", al.Raw)
	}
	if r := callT(t, cs, "get_plan_audit_logs", map[string]any{"plan_ids": []any{"plan_nope"}}); r.code() != "PLAN_NOT_FOUND" {
		t.Errorf("audit of an unknown plan: %s", r.Raw)
	}
	bad := checkArgs("", 1000)
	bad["account"] = map[string]any{"account_id": "acc_1"}
	if r := callT(t, cs, "check_governance", bad); r.code() != "INVALID_REQUEST" {
		t.Errorf("account on check_governance: %s", r.Raw)
	}
}

func TestGovernanceVersion30(t *testing.T) {
	_, cs := startGov(t, GovernanceOptions{Version: Version30})
	r := callT(t, cs, "check_governance", checkArgs("", 1000))
	if r.str("status") != "approved" || r.get("verdict") != nil || r.get("adcp_version") != nil {
		t.Errorf("3.0 check: %s", r.Raw)
	}
}

func TestGovernanceSchemaRejection(t *testing.T) {
	g, cs := startGov(t, GovernanceOptions{})
	a := checkArgs("", 1000)
	delete(a, "caller")
	r := callT(t, cs, "check_governance", a)
	if r.code() != "INVALID_REQUEST" || r.str("adcp_error.field") != "caller" {
		t.Errorf("%s", r.Raw)
	}
	if c := g.CallsTo("check_governance"); len(c) != 1 || c[0].ValidationError == "" {
		t.Errorf("recorded: %+v", c)
	}
}

func TestGovernanceScriptFromPayloadPO(t *testing.T) {
	g, cs := startGov(t, GovernanceOptions{})
	g.Script("PO-1001", "denied")
	if r := callT(t, cs, "check_governance", checkArgs("", 1000)); r.str("verdict") != "denied" {
		t.Errorf("payload po_number script ignored: %s", r.Raw)
	}
}

// plan_refused on sync_plans is an AdCP error the buyer cannot retry its way out of, and no plan
// is registered: a later check against it finds none.
func TestGovernancePlanRefused(t *testing.T) {
	_, cs := startGov(t, GovernanceOptions{RequireSyncedPlans: true})
	r := callT(t, cs, "sync_plans", map[string]any{"idempotency_key": key(), "context": map[string]any{"sim": "plan_refused"},
		"plans": []any{map[string]any{"plan_id": "plan_q3", "brand": map[string]any{"domain": "acmeoutdoor.example"},
			"objectives": "Q3 awareness", "budget": map[string]any{"total": 100000, "currency": "USD", "reallocation_threshold": 5000},
			"flight": map[string]any{"start": "2026-07-01T00:00:00Z", "end": "2026-09-30T23:59:59Z"}}}})
	if !r.IsError || r.code() != "POLICY_VIOLATION" {
		t.Fatalf("sync_plans with plan_refused: %s", r.Raw)
	}
	if c := callT(t, cs, "check_governance", checkArgs("", 1000)); c.code() != "PLAN_NOT_FOUND" {
		t.Errorf("a refused plan was registered: %s", c.Raw)
	}
}
