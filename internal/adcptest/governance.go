package adcptest

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"math"
	"time"
)

// GovernanceBehavior is a scripted check_governance outcome. The per-request
// tokens are the same strings (see doc.go).
type GovernanceBehavior string

// Governance behaviours.
const (
	// govApproved approves with check_id, governance_context and expires_at.
	govApproved GovernanceBehavior = "approved"
	// GovDenied denies with a critical finding.
	GovDenied GovernanceBehavior = "denied"
	// GovConditions answers conditions with one machine-actionable
	// condition (required_value = 80 % of the first package budget); a
	// re-check whose payload satisfies it is approved.
	GovConditions GovernanceBehavior = "conditions"
	// GovConditionsAdvisory answers conditions without required_value (a
	// person must decide); after three such rounds for a plan it denies.
	GovConditionsAdvisory GovernanceBehavior = "conditions_advisory"
	// govAsyncReview answers submitted (human review); the task completes
	// approved on the next step (poll, Advance, StepInterval).
	govAsyncReview GovernanceBehavior = "async_review"
	// govAsyncDenied is GovAsyncReview that resolves denied.
	govAsyncDenied GovernanceBehavior = "async_review_denied"
)

var govBehaviors = []string{string(govApproved), string(GovDenied), string(GovConditions), string(GovConditionsAdvisory), string(govAsyncReview), string(govAsyncDenied)}

// GovernanceOptions configures a simulated campaign-governance agent.
type GovernanceOptions struct {
	// Token is the bearer credential callers must send.
	Token string
	// Tokens are further accepted bearer credentials (separate principals).
	Tokens []string
	// Behavior is the default check_governance outcome (default approved).
	Behavior GovernanceBehavior
	// Version is Version31 (default), Version30 or Version32.
	Version string
	// Now is the agent clock (default time.Now).
	Now func() time.Time
	// SchemaDir is an AdCP schema folder ("" = the schemas the functions use).
	SchemaDir string
	// Validator overrides SchemaDir with a ready validator.
	Validator *Validator
	// PollsPerStep resolves an async review after N polls (default 1; a
	// negative value means only Advance/Finish/StepInterval resolve it).
	PollsPerStep int
	// StepInterval resolves reviews after this much agent-clock time.
	StepInterval time.Duration
	// TokenTTL is the life of an approval (expires_at; default 15 min).
	TokenTTL time.Duration
	// RequireSyncedPlans makes check_governance fail with PLAN_NOT_FOUND for
	// plans not registered by sync_plans.
	RequireSyncedPlans bool
	// PollTools selects the polling tool names.
	PollTools PollTools
	// SSE answers MCP POSTs as text/event-stream (as @adcp/sdk does)
	// instead of application/json.
	SSE bool
	// RetryAfter is the retry_after (seconds) on RATE_LIMITED (default 1).
	RetryAfter int
	// SlowDelay is how long the "slow" token holds a request (default 2 s).
	SlowDelay time.Duration
	// ReplayTTL is the declared and enforced replay window (default 24 h).
	ReplayTTL time.Duration
}

// DefaultGovernanceToken is the bearer the governance agent accepts when
// none is configured.
const DefaultGovernanceToken = "governance-test-token"

// Governance is a simulated campaign-governance agent served over MCP at /mcp.
type Governance struct {
	*agent
	opts     GovernanceOptions
	plans    map[string]map[string]any
	limits   map[string]*planLimits // per plan, from its last sync_plans
	rounds   map[string]int         // advisory condition rounds per plan
	required map[string]float64     // machine-actionable required value per plan|tool
	checks   map[string]map[string]any
	auditLog []auditEntry // checks and outcomes, in order, for get_plan_audit_logs
}

// NewGovernance returns a governance agent; serve it with Start or as an
// http.Handler.
func NewGovernance(opts GovernanceOptions) *Governance {
	if opts.Token == "" {
		opts.Token = DefaultGovernanceToken
	}
	if opts.Behavior == "" {
		opts.Behavior = govApproved
	}
	if opts.TokenTTL == 0 {
		opts.TokenTTL = 15 * time.Minute
	}
	polls := opts.PollsPerStep
	if polls == 0 {
		polls = 1
	} else if polls < 0 {
		polls = 0
	}
	g := &Governance{
		agent: newAgent(commonOptions{
			Name: "adcptest-governance", Token: opts.Token, Tokens: opts.Tokens, Version: opts.Version, Now: opts.Now,
			SchemaDir: opts.SchemaDir, Validator: opts.Validator, PollsPerStep: polls,
			StepInterval: opts.StepInterval, SlowDelay: opts.SlowDelay, RetryAfter: opts.RetryAfter,
			ReplayTTL: opts.ReplayTTL, SSE: opts.SSE, IdempotencyOK: true,
		}),
		opts:     opts,
		plans:    map[string]map[string]any{},
		limits:   map[string]*planLimits{},
		rounds:   map[string]int{},
		required: map[string]float64{},
		checks:   map[string]map[string]any{},
	}
	g.addTool("get_adcp_capabilities", "AdCP capabilities of this governance agent.", g.capabilities)
	g.addTool("sync_plans", "Register campaign plans.", g.syncPlans)
	g.addTool("check_governance", "Check an action against a plan.", g.checkGovernance)
	g.addTool("report_plan_outcome", "Report the outcome of a governed action.", g.reportOutcome)
	g.addTool("get_plan_audit_logs", "Read a plan's checks, outcomes and budget.", g.getPlanAuditLogs)
	if opts.PollTools != PollLegacyOnly {
		g.addTool("get_task_status", "Read an AdCP task.", g.poll)
	}
	if opts.PollTools != PollAliasOnly {
		g.addTool("tasks/get", "Read an AdCP task (legacy name).", g.poll)
	}
	return g
}

// Start serves the agent on 127.0.0.1 on a free port and returns its MCP
// endpoint URL (…/mcp).
func (g *Governance) Start() string { return g.start(g) + "/mcp" }

// URL returns the MCP endpoint of a started agent.
func (g *Governance) URL() string { return g.ts.URL + "/mcp" }

// Close stops the server started by Start.
func (g *Governance) Close() { g.close() }

func (g *Governance) capabilities(_ context.Context, _ *call) reply {
	ttl := g.opts.ReplayTTL
	if ttl == 0 {
		ttl = 24 * time.Hour
	}
	return reply{body: map[string]any{
		"adcp": map[string]any{
			"major_versions": []int{3}, "supported_versions": supportedVersions(g.opts.Version),
			"idempotency": map[string]any{"supported": true, "replay_ttl_seconds": int(ttl / time.Second)},
		},
		"supported_protocols":   []string{"governance"},
		"experimental_features": []string{"governance.campaign"},
	}}
}

func (g *Governance) syncPlans(_ context.Context, c *call) reply {
	if c.script.has("plan_refused") {
		return reply{err: &AdcpError{Code: "POLICY_VIOLATION", Message: "the plan is refused: its budget authority is not on file (sim plan_refused)",
			Field: "plans", Recovery: "correctable"}}
	}
	plans, _ := c.args["plans"].([]any)
	out := make([]any, 0, len(plans))
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, p := range plans {
		pm, _ := p.(map[string]any)
		id, _ := pm["plan_id"].(string)
		version := 1
		if old, ok := g.plans[id]; ok {
			version = old["_version"].(int) + 1
		}
		cp := cloneMap(pm)
		cp["_version"] = version
		g.plans[id] = cp
		l := limitsOf(pm)
		g.limits[id] = &l
		out = append(out, map[string]any{
			"plan_id": id, "status": "active", "version": version,
			"categories": []any{map[string]any{"category_id": "budget_compliance", "status": "active"}},
		})
	}
	return reply{body: map[string]any{"plans": out}}
}

func (g *Governance) behavior(c *call) GovernanceBehavior {
	if b := c.script.first(govBehaviors...); b != "" {
		return GovernanceBehavior(b)
	}
	return g.opts.Behavior
}

func (g *Governance) checkGovernance(_ context.Context, c *call) reply {
	planID := c.str("plan_id")
	_, hasTool := c.args["tool"]
	_, hasPayload := c.args["payload"]
	_, hasPD := c.args["planned_delivery"]
	_, hasDM := c.args["delivery_metrics"]
	if (hasTool || hasPayload) && (hasPD || hasDM) {
		return reply{err: &AdcpError{Code: "INVALID_REQUEST", Message: "send either intent fields (tool, payload) or execution fields (planned_delivery, delivery_metrics), not both", Field: "payload", Recovery: "correctable"}}
	}
	if _, ok := c.args["account"]; ok {
		return reply{err: &AdcpError{Code: "INVALID_REQUEST", Message: "check_governance must not carry account: the plan scopes it", Field: "account", Recovery: "correctable"}}
	}
	g.mu.Lock()
	_, known := g.plans[planID]
	g.mu.Unlock()
	if g.opts.RequireSyncedPlans && !known {
		return reply{err: &AdcpError{Code: "PLAN_NOT_FOUND", Message: "no plan " + planID, Field: "plan_id", Recovery: "correctable"}}
	}
	if f := g.planFindings(c); len(f) > 0 {
		// The plan binds before any scripted outcome: a real agent never lets a script
		// (or a person's review) approve what its plan forbids outright.
		return reply{body: g.verdict(c, GovDenied, f)}
	}
	b := g.behavior(c)
	switch b {
	case govAsyncReview, govAsyncDenied:
		final := govApproved
		if b == govAsyncDenied {
			final = GovDenied
		}
		t := g.newTask(c, "check_governance", "governance", "submitted", []string{"completed"},
			func(status string) (map[string]any, *AdcpError) {
				if status != "completed" {
					return nil, nil
				}
				return g.verdict(c, final, nil), nil
			})
		g.mu.Lock()
		t.Message = "plan requires human review"
		g.mu.Unlock()
		return reply{body: map[string]any{"status": "submitted", "task_id": t.ID, "message": "plan requires human review"}}
	}
	return reply{body: g.verdict(c, b, nil)}
}

// planFindings are the synced plan's objections to the create_media_buy a check proposes; nil
// when the plan is unknown, the tool is another or the payload names no amount.
func (g *Governance) planFindings(c *call) []any {
	if c.str("tool") != "create_media_buy" {
		return nil
	}
	payload, _ := c.args["payload"].(map[string]any)
	amount, ok := transactionAmount(payload)
	if !ok {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	l := g.limits[c.str("plan_id")]
	if l == nil {
		return nil
	}
	return l.findings(amount)
}

// verdict builds a check_governance body for a synchronous behaviour; findings, when given,
// replace a denial's scripted finding (the plan's own objections).
func (g *Governance) verdict(c *call, b GovernanceBehavior, findings []any) map[string]any {
	ttl := g.opts.TokenTTL
	if c.script.has("short_ttl") {
		ttl = time.Second
	}
	planID := c.str("plan_id")
	tool := c.str("tool")
	now := g.now()
	checkID := g.nextID("chk")
	body := map[string]any{"check_id": checkID, "plan_id": planID, "mode": "enforce"}
	payload, _ := c.args["payload"].(map[string]any)
	rkey := planID + "|" + tool

	switch b {
	case GovConditions:
		g.mu.Lock()
		want, asked := g.required[rkey]
		g.mu.Unlock()
		cur, curOK := firstBudget(payload)
		if asked && curOK && cur == want {
			b = govApproved
			break
		}
		if !asked {
			want = math.Floor(cur * 0.8)
			if !curOK || want <= 0 {
				want = 1000
			}
			g.mu.Lock()
			g.required[rkey] = want
			g.mu.Unlock()
		}
		body["verdict"] = "conditions"
		body["explanation"] = "budget exceeds the plan's per-seller allocation"
		body["conditions"] = []any{map[string]any{"field": "packages[0].budget", "required_value": want, "reason": "reduce the package budget to the allocation"}}
		body["expires_at"] = now.Add(ttl).Format(time.RFC3339)
	case GovConditionsAdvisory:
		g.mu.Lock()
		g.rounds[rkey]++
		n := g.rounds[rkey]
		g.mu.Unlock()
		if n > 3 {
			b = GovDenied
			break
		}
		body["verdict"] = "conditions"
		body["explanation"] = "targeting needs a person's review"
		body["conditions"] = []any{map[string]any{"field": "packages[0].targeting_overlay", "reason": "confirm the audience excludes minors"}}
		body["expires_at"] = now.Add(ttl).Format(time.RFC3339)
	}
	switch b {
	case govApproved:
		exp := now.Add(ttl)
		body["verdict"] = "approved"
		body["explanation"] = "within plan budget and policy"
		body["expires_at"] = exp.Format(time.RFC3339)
		body["governance_context"] = fakeJWS(map[string]any{
			"iss": "adcptest-governance", "sub": planID, "aud": c.str("caller"), "phase": "intent",
			"check_id": checkID, "iat": now.Unix(), "exp": exp.Unix(),
		})
	case GovDenied:
		body["verdict"] = "denied"
		body["explanation"] = "the action violates the plan"
		body["findings"] = []any{map[string]any{"category_id": "budget_compliance", "severity": "critical", "explanation": "committed spend would exceed the plan budget"}}
		if len(findings) > 0 {
			body["explanation"] = "the action exceeds the plan's spending authority"
			body["findings"] = findings
		}
	}
	if g.opts.Version == Version30 || c.version == Version30 {
		body["status"] = body["verdict"]
		delete(body, "verdict")
	}
	if c.version == Version32 {
		shape32(body, c)
	}
	entry := map[string]any{"id": checkID, "type": "check", "tool": tool, "mode": "enforce", "check_type": "intent",
		"explanation": body["explanation"]}
	if _, ok := c.args["planned_delivery"]; ok {
		entry["check_type"] = "execution"
	}
	if _, ok := c.args["delivery_metrics"]; ok {
		entry["check_type"] = "execution"
	}
	// The audit log speaks 3.1 (verdict) whatever version the check was answered in.
	if v, ok := body["verdict"]; ok {
		entry["verdict"] = v
	} else {
		entry["verdict"] = body["status"]
	}
	if f, ok := body["findings"]; ok {
		entry["findings"] = f
	}
	gctx := c.str("governance_context")
	if gc, ok := body["governance_context"].(string); ok {
		gctx = gc
	}
	if gctx != "" {
		entry["governance_context"] = gctx
	}
	g.mu.Lock()
	g.checks[checkID] = body
	g.audit(auditEntry{owner: c.owner, planID: planID, at: now, body: entry, context: gctx, checkID: checkID})
	g.mu.Unlock()
	return body
}

func firstBudget(payload map[string]any) (float64, bool) {
	pk, _ := payload["packages"].([]any)
	if len(pk) == 0 {
		return 0, false
	}
	p0, _ := pk[0].(map[string]any)
	b, ok := p0["budget"].(float64)
	return b, ok
}

// fakeJWS returns a compact-JWS-shaped token (header.claims.signature,
// base64url) that is not cryptographically signed.
func fakeJWS(claims map[string]any) string {
	h, _ := json.Marshal(map[string]any{"alg": "none", "typ": "adcp-gov+jwt"})
	cl, _ := json.Marshal(claims)
	enc := base64.RawURLEncoding.EncodeToString
	return enc(h) + "." + enc(cl) + "." + enc([]byte("adcptest-unsigned"))
}

func (g *Governance) reportOutcome(_ context.Context, c *call) reply {
	outcome := c.str("outcome")
	if (outcome == "completed" || outcome == "failed") && c.str("check_id") == "" {
		return reply{err: &AdcpError{Code: "INVALID_REQUEST", Message: "check_id is required for outcome " + outcome, Field: "check_id", Recovery: "correctable"}}
	}
	if outcome == "completed" {
		if _, ok := c.args["seller_response"]; !ok {
			return reply{err: &AdcpError{Code: "INVALID_REQUEST", Message: "seller_response is required for outcome completed", Field: "seller_response", Recovery: "correctable"}}
		}
	}
	committed := 0.0
	if sr, ok := c.args["seller_response"].(map[string]any); ok {
		committed, _ = sr["committed_budget"].(float64)
	}
	// A synced plan keeps what its outcomes committed, so the next check sees less room; a
	// plan never synced is summarised against a nominal 100,000.
	total, sum := 100000.0, committed
	g.mu.Lock()
	if l := g.limits[c.str("plan_id")]; l != nil {
		if outcome == "completed" {
			l.committed += committed
		}
		sum = l.committed
		if l.hasTotal {
			total = l.total
		}
	}
	g.mu.Unlock()
	body := map[string]any{
		"outcome_id":    g.nextID("out"),
		"outcome_state": "accepted",
		"plan_summary":  map[string]any{"total_committed": sum, "budget_remaining": math.Max(0, total-sum)},
	}
	if outcome == "completed" {
		body["committed_budget"] = committed
	}
	if c.script.has("outcome_findings") {
		body["outcome_state"] = "findings"
		body["findings"] = []any{map[string]any{"category_id": "budget_compliance", "severity": "critical", "explanation": "committed budget exceeds the approved amount; cancel the buy"}}
	}
	entry := map[string]any{"id": body["outcome_id"], "type": "outcome", "outcome": outcome,
		"outcome_status": body["outcome_state"], "purchase_type": "media_buy", "governance_context": c.str("governance_context")}
	if pt := c.str("purchase_type"); pt != "" {
		entry["purchase_type"] = pt
	}
	if outcome == "completed" {
		entry["committed_budget"] = committed
	}
	if f, ok := body["findings"]; ok {
		entry["findings"] = f
	}
	seller, commit := "", 0.0
	if outcome == "completed" {
		commit = committed
	}
	if sr, ok := c.args["seller_response"].(map[string]any); ok {
		seller, _ = sr["seller_reference"].(string)
	}
	g.mu.Lock()
	g.audit(auditEntry{owner: c.owner, planID: c.str("plan_id"), at: g.now(), body: entry,
		context: c.str("governance_context"), checkID: c.str("check_id"), commit: commit, seller: seller})
	g.mu.Unlock()
	if g.opts.Version == Version30 || c.version == Version30 {
		body["status"] = body["outcome_state"]
		delete(body, "outcome_state")
	}
	return reply{body: body}
}

// Check returns the body of a recorded check_governance verdict by check_id.
func (g *Governance) Check(checkID string) (map[string]any, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	b, ok := g.checks[checkID]
	if !ok {
		return nil, false
	}
	return cloneMap(b), true
}

// shape32 gives a verdict 3.2's shape (check-governance-response.json with check_type): only
// an approval authorizes, so only it carries governance_context and expires_at; conditions
// carry a consultation_context instead.
func shape32(body map[string]any, c *call) {
	body["check_type"] = "intent"
	if _, ok := c.args["planned_delivery"]; ok {
		body["check_type"] = "execution"
	}
	switch body["verdict"] {
	case "approved":
	case "conditions":
		id, _ := body["check_id"].(string)
		body["consultation_context"] = "cc-" + id
		delete(body, "expires_at")
		delete(body, "governance_context")
	default:
		delete(body, "expires_at")
		delete(body, "governance_context")
	}
}
