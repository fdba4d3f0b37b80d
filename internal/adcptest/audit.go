package adcptest

import (
	"context"
	"math"
	"time"
)

// auditEntry is one check or outcome the governance double keeps for get_plan_audit_logs.
type auditEntry struct {
	owner   string
	planID  string
	at      time.Time
	body    map[string]any // the entries[] item
	context string         // governance_context: what groups governed actions
	checkID string         // the check an outcome reports on (for check_count)
	commit  float64        // committed_budget of a completed outcome
	seller  string         // seller_reference of an outcome
}

// audit records an entry (under g.mu).
func (g *Governance) audit(e auditEntry) {
	e.body["timestamp"] = e.at.Format(time.RFC3339)
	e.body["plan_id"] = e.planID
	g.auditLog = append(g.auditLog, e)
}

// getPlanAuditLogs answers the synced plans named in plan_ids: budget authorised, committed
// and remaining, the checks and outcomes recorded against each (entries on request), and
// the governed actions grouped by governance context. Portfolio plans are not offered.
func (g *Governance) getPlanAuditLogs(_ context.Context, c *call) reply {
	ids, _ := c.args["plan_ids"].([]any)
	if len(ids) == 0 {
		return reply{err: invalid("plan_ids", "plan_ids must name at least one plan (portfolio plans are not offered)")}
	}
	withEntries, _ := c.args["include_entries"].(bool)
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]any, 0, len(ids))
	for _, v := range ids {
		id, _ := v.(string)
		plan, ok := g.plans[id]
		if !ok {
			return reply{err: &AdcpError{Code: "PLAN_NOT_FOUND", Message: "no plan " + id + ": sync it with sync_plans", Field: "plan_ids", Recovery: "correctable"}}
		}
		out = append(out, g.planAudit(c.owner, id, plan, withEntries))
	}
	return reply{body: map[string]any{"plans": out}}
}

// planAudit summarises one plan's audit log (under g.mu).
func (g *Governance) planAudit(owner, id string, plan map[string]any, withEntries bool) map[string]any {
	l := g.limits[id]
	statuses := map[string]any{"approved": 0, "denied": 0, "conditions": 0}
	checks, outcomes, findings := 0, 0, 0
	var entries []any
	actions := map[string]map[string]any{}
	var order []string
	action := func(ctx string) map[string]any {
		a, ok := actions[ctx]
		if !ok {
			a = map[string]any{"governance_context": ctx, "purchase_type": "media_buy", "status": "active", "committed": 0.0, "check_count": 0}
			actions[ctx] = a
			order = append(order, ctx)
		}
		return a
	}
	for _, e := range g.auditLog {
		if e.owner != owner || e.planID != id {
			continue
		}
		if f, ok := e.body["findings"].([]any); ok {
			findings += len(f)
		}
		switch e.body["type"] {
		case "check":
			checks++
			if v, ok := e.body["verdict"].(string); ok {
				statuses[v] = statuses[v].(int) + 1
			}
			if e.context != "" {
				a := action(e.context)
				a["check_count"] = a["check_count"].(int) + 1
			}
		case "outcome":
			outcomes++
			a := action(e.context)
			a["committed"] = a["committed"].(float64) + e.commit
			if e.seller != "" {
				a["seller_reference"] = e.seller
			}
		}
		if withEntries {
			entries = append(entries, cloneJSON(e.body))
		}
	}
	committed := 0.0
	budget := map[string]any{}
	if l != nil {
		committed = l.committed
		if l.hasTotal {
			budget["authorized"] = l.total
			budget["remaining"] = math.Max(0, l.total-committed)
			if l.total > 0 {
				budget["utilization_pct"] = math.Round(committed/l.total*10000) / 100
			}
		}
	}
	budget["committed"] = committed
	governed := make([]any, 0, len(order))
	for _, ctx := range order {
		governed = append(governed, actions[ctx])
	}
	out := map[string]any{
		"plan_id": id, "plan_version": plan["_version"], "status": "active", "budget": budget,
		"governed_actions": governed,
		"summary": map[string]any{"checks_performed": checks, "outcomes_reported": outcomes,
			"statuses": statuses, "findings_count": findings},
	}
	if withEntries {
		if entries == nil {
			entries = []any{}
		}
		out["entries"] = entries
	}
	return out
}
