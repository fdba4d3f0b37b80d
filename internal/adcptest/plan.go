package adcptest

import (
	"fmt"
	"strconv"
)

// planLimits is what check_governance enforces of a plan pushed with sync_plans: its total
// budget, less what outcomes reported as committed, and the largest single transaction the
// plan lets an agent make on its own.
type planLimits struct {
	currency  string
	total     float64
	hasTotal  bool
	perTxn    float64 // budget.reallocation_threshold; meaningful when hasPerTxn
	hasPerTxn bool
	committed float64 // report_plan_outcome committed_budget since the plan's last sync
}

// limitsOf reads a synced plan's budget. reallocation_threshold is read as the per-transaction
// limit because the official storyboards (media_buy_governance_escalation,
// governance_spend_authority/denied) use it so: "a per-transaction threshold of $20K via
// reallocation_threshold"). A threshold of 0 ("every reallocation needs a person") is not read
// as a limit of 0 on every buy: governance_spend_authority/denied pairs it with a 10,000 total
// it calls the per-transaction limit, so the total is then the only limit, as with
// reallocation_unlimited.
func limitsOf(plan map[string]any) planLimits {
	var l planLimits
	b, _ := plan["budget"].(map[string]any)
	l.currency, _ = b["currency"].(string)
	l.total, l.hasTotal = b["total"].(float64)
	l.perTxn, l.hasPerTxn = b["reallocation_threshold"].(float64)
	if u, _ := b["reallocation_unlimited"].(bool); u || l.perTxn <= 0 {
		l.hasPerTxn = false
	}
	return l
}

// transactionAmount is what a proposed create_media_buy would commit: its total_budget (a
// number or {amount}), a budget.total (the SDK's governance scenarios send that shape), or the
// sum of its package budgets. ok is false when the payload names no amount at all.
func transactionAmount(payload map[string]any) (float64, bool) {
	amount := func(v any) (float64, bool) {
		switch x := v.(type) {
		case float64:
			return x, true
		case map[string]any:
			a, ok := x["amount"].(float64)
			if !ok {
				a, ok = x["total"].(float64)
			}
			return a, ok
		}
		return 0, false
	}
	if a, ok := amount(payload["total_budget"]); ok {
		return a, true
	}
	if a, ok := amount(payload["budget"]); ok {
		return a, true
	}
	pk, _ := payload["packages"].([]any)
	sum, found := 0.0, false
	for _, p := range pk {
		pm, _ := p.(map[string]any)
		if a, ok := amount(pm["budget"]); ok {
			sum, found = sum+a, true
		}
	}
	return sum, found
}

// findings are the plan's objections to a transaction of amount, in the shape
// check-governance-response.json gives findings; none means the plan allows it.
func (l planLimits) findings(amount float64) []any {
	money := func(v float64) string {
		s := strconv.FormatFloat(v, 'f', 2, 64)
		if l.currency != "" {
			s = l.currency + " " + s
		}
		return s
	}
	var out []any
	if l.hasTotal && l.committed+amount > l.total {
		out = append(out, map[string]any{
			"category_id": "budget_compliance", "severity": "critical",
			"explanation": fmt.Sprintf("the transaction of %s with %s already committed exceeds the plan's total budget of %s",
				money(amount), money(l.committed), money(l.total)),
			"details": map[string]any{"limit": "total", "amount": amount, "committed": l.committed, "total": l.total},
		})
	}
	if l.hasPerTxn && amount > l.perTxn {
		out = append(out, map[string]any{
			"category_id": "spending_authority", "severity": "critical",
			"explanation": fmt.Sprintf("the transaction of %s exceeds the plan's per-transaction limit of %s by %s; a person must approve it",
				money(amount), money(l.perTxn), money(amount-l.perTxn)),
			"details": map[string]any{"limit": "per_transaction", "amount": amount, "threshold": l.perTxn},
		})
	}
	return out
}
