package buyerstoryboards

import (
	"fmt"
	"math"
	"net/http"
	"slices"

	"github.com/buyflow/buyflow/internal/adcptest"
)

// binding says which step's correlation id selects a declared scenario, and at which tool.
// The contract leaves the choice of scenario to the runner; the step ids are the storyboards'.
type binding struct {
	step string // the substring of context.correlation_id ("<storyboard>--<step>")
	tool string
	// unused says why the scenario is declared but never served ("": served).
	unused string
	// always answers every attempt (a seller that is offline stays offline), not once per key.
	always bool
}

// bindings cover every scenario the vendored storyboards declare; Seller refuses one missing
// here, so a new upstream scenario cannot be dropped silently.
var bindings = map[string]binding{
	// buyer_activation
	"create_success":           {unused: "the default answer: a synchronous success"},
	"create_async":             {step: "create_async_buy", tool: "create_media_buy"},
	"create_transient_failure": {step: "create_buy_fails", tool: "create_media_buy"},
	// buyer_recovery: seller_offline is served on create_media_buy, buyflow's first domain task
	// (it does not browse: get_products is never called), as the reference script serves it too.
	"seller_offline":       {step: "seller_unavailable", tool: "create_media_buy", always: true},
	"auth_expiry":          {step: "auth_expired", tool: "create_media_buy"},
	"idempotency_conflict": {step: "conflict_on_reuse", tool: "create_media_buy"},
	"rate_limited":         {step: "rate_limited", tool: "create_media_buy"},
	// orchestrator_multi_agent
	"alpha_success": {unused: "the default answer: a synchronous success"},
	"beta_offline":  {step: "activate_beta_fails", tool: "create_media_buy", always: true},
	// buyer_negotiation: buyflow does not negotiate (request_proposals, refine_proposals)
	"proposal_returned": {unused: "negotiation is outside buyflow's scope"},
	"proposal_refined":  {unused: "negotiation is outside buyflow's scope"},
	"terms_rejected":    {unused: "negotiation is outside buyflow's scope"},
}

// Seller returns the simulated seller's options for a storyboard's fixture: its declared
// versions and lifecycle tools, and each declared scenario bound to the step that selects it.
func Seller(s *Storyboard) (adcptest.SellerOptions, error) {
	f := s.Fixtures.Publisher
	o := adcptest.SellerOptions{
		SupportedVersions: f.Capabilities.AdCP.SupportedVersions,
		LifecycleTools:    f.Capabilities.MediaBuy.LifecycleTools,
		PollsPerStep:      1, // the contract: a submitted task completes after polls
	}
	names := make([]string, 0, len(f.Scenarios))
	for name := range f.Scenarios {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		d := f.Scenarios[name]
		b, ok := bindings[name]
		if !ok {
			return o, fmt.Errorf("%s: scenario %q has no binding to a step: the runner cannot serve it", s.ID, name)
		}
		if b.unused != "" {
			continue
		}
		sc := adcptest.Scenario{Match: s.ID + "--" + b.step, Tool: b.tool}
		if b.always {
			sc.Times = math.MaxInt32
		}
		switch {
		case d.ResponseType == "submitted":
			sc.Tokens = "async_complete"
		case d.HTTPStatus == http.StatusUnauthorized || d.HTTPStatus >= 500:
			sc.HTTPStatus, sc.Challenge = d.HTTPStatus, d.WWWAuthenticate
			if d.ErrorCode != "" {
				sc.Error = &adcptest.AdcpError{Code: d.ErrorCode}
			}
		case d.ErrorCode != "":
			sc.Error = &adcptest.AdcpError{Code: d.ErrorCode, Message: d.Message, RetryAfter: d.RetryAfter}
		default:
			return o, fmt.Errorf("%s: scenario %q declares neither an error nor a response type", s.ID, name)
		}
		o.Scenarios = append(o.Scenarios, sc)
	}
	return o, nil
}
