package buyerstoryboards_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/adcptest"
	"github.com/buyflow/buyflow/internal/buyerstoryboards"
	"github.com/buyflow/buyflow/internal/stagetest"
	"github.com/buyflow/buyflow/internal/workflow"
	"github.com/buyflow/buyflow/statemachine"
)

var update = flag.Bool("update", false, "rewrite the README's conformance table from the results")

// scope says how one step of the vendored storyboards is graded: on which run's calls and which
// call of it, or why it does not apply to buyflow. Every step must be listed (TestStoryboards
// fails on one that is not), so nothing is skipped silently.
type scope struct {
	// call is the call the step's request checks read: "<tool>#<n>", the n-th call of tool in
	// the run; "" grades on the run's whole log (task_called, task_not_called_before).
	call string
	// run is the correlation id of the buy whose calls grade the step ("" = the step's own,
	// "<storyboard>--<step>").
	run string
	// via says how the step is graded when buyflow's call is not the step's task.
	via string
	// na says why the step does not apply to buyflow.
	na string
	// reauth also requires a new OAuth token fetched during the run: the storyboard expects the
	// buyer to re-authenticate on the 401, not to resend the refused token.
	reauth bool
	// campaign marks a step graded by statemachine/stagepaths (TestOrchestratorStoryboard): a
	// campaign's legs and its partial-failure policy run in the Campaign state machine, which
	// needs Node. This test keeps the README's row as that test graded it.
	campaign bool
}

const (
	notBrowsing    = "buyflow does not browse: it is handed a chosen product (or proposal) and never calls get_products"
	notNegotiating = "buyflow does not negotiate: it is handed a chosen proposal and commits it through the create_media_buy facade (proposal_id); it never calls request_proposals, refine_proposals or accept_proposal (docs/seller-onboarding.md)"
	onCreate       = "graded on create_media_buy, buyflow's first domain task (it never calls get_products)"
)

var scopes = map[string]scope{
	"buyer_discovery/discover_capabilities": {run: "buyer_discovery--discover_products"},
	"buyer_discovery/discover_products":     {call: "create_media_buy#1", via: onCreate},
	"buyer_discovery/interpret_products":    {na: notBrowsing + "; the shortlist is the buyer's"},

	"buyer_activation/create_buy":       {call: "create_media_buy#1"},
	"buyer_activation/create_buy_fails": {call: "create_media_buy#1"},
	"buyer_activation/create_buy_retry": {call: "create_media_buy#2", run: "buyer_activation--create_buy_fails",
		via: "buyflow's own retry of create_buy_fails (the frozen request, so the same context)"},
	"buyer_activation/create_async_buy": {call: "create_media_buy#1"},
	"buyer_activation/poll_task_status": {call: "get_task_status#1", run: "buyer_activation--create_async_buy"},
	"buyer_activation/sync_creatives":   {na: "buyflow places and follows the buy; creatives are synced by the buyer, not buyflow (it never calls sync_creatives)"},

	"buyer_negotiation/request_proposal": {na: notNegotiating},
	"buyer_negotiation/refine_proposal":  {na: notNegotiating},
	"buyer_negotiation/rejected_refine":  {na: notNegotiating},
	"buyer_negotiation/accept":           {na: notNegotiating},

	"buyer_recovery/seller_unavailable": {call: "create_media_buy#1", via: "the 503 is served on create_media_buy (buyflow never calls get_products)"},
	"buyer_recovery/auth_expired":       {call: "create_media_buy#1", reauth: true, via: "an OAuth client-credentials seller"},
	"buyer_recovery/conflict_on_reuse":  {call: "create_media_buy#1", via: "deliberate: buyflow fixes one key per buy write-ahead and never reuses it, so the other request under its key may be this very buy (an earlier plan of it): it stops the buy for a person rather than risk placing it twice with a fresh key"},
	"buyer_recovery/rate_limited":       {call: "create_media_buy#1"},

	"orchestrator_multi_agent/discover_alpha":        {na: notBrowsing},
	"orchestrator_multi_agent/discover_beta":         {na: notBrowsing},
	"orchestrator_multi_agent/compare_and_shortlist": {na: notBrowsing + "; comparing sellers' catalogues is the buyer's"},
	"orchestrator_multi_agent/activate_alpha":        {campaign: true},
	"orchestrator_multi_agent/activate_beta_fails":   {campaign: true},
	"orchestrator_multi_agent/reconcile_budget":      {campaign: true},
}

// TestStoryboards runs every vendored buyer storyboard against buyflow's governance, create and
// poll stages (the functions' own code, over a kumo ledger and the real AdCP client) and the
// simulated seller serving the storyboard's fixture, grades buyflow's calls with the
// storyboards' checks, and holds the README's conformance table to the results.
func TestStoryboards(t *testing.T) {
	_, boards, err := buyerstoryboards.Load(os.DirFS("testdata"))
	if err != nil {
		t.Fatal(err)
	}
	const readme = "../../README.md"
	raw, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	begin, end, current, err := buyerstoryboards.Table(string(raw))
	if err != nil {
		t.Fatalf("README.md: %v", err)
	}
	var rows []buyerstoryboards.Row
	for _, sb := range boards {
		t.Run(sb.ID, func(t *testing.T) {
			rows = append(rows, runStoryboard(t, sb, current)...)
		})
	}
	logCounts(t, rows)
	want := buyerstoryboards.RenderTable(rows)
	if string(raw[begin:end]) == want {
		return
	}
	if *update {
		if err := os.WriteFile(readme, []byte(string(raw[:begin])+want+string(raw[end:])), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("README.md's conformance table differs from the storyboards' results; run go test ./internal/buyerstoryboards -run TestStoryboards -update\nwant:\n%s", want)
}

// logCounts logs the pass, fail and not-applicable counts per storyboard.
func logCounts(t *testing.T, rows []buyerstoryboards.Row) {
	counts := map[string]map[string]int{}
	var order []string
	for _, r := range rows {
		if counts[r.Storyboard] == nil {
			counts[r.Storyboard] = map[string]int{}
			order = append(order, r.Storyboard)
		}
		for _, k := range []string{buyerstoryboards.Pass, buyerstoryboards.Fail, buyerstoryboards.NotApplicable} {
			if strings.HasPrefix(r.Result, k) {
				counts[r.Storyboard][k]++
			}
		}
	}
	for _, sb := range order {
		c := counts[sb]
		t.Logf("%s: %d pass, %d fail, %d not applicable", sb, c[buyerstoryboards.Pass], c[buyerstoryboards.Fail], c[buyerstoryboards.NotApplicable])
	}
}

// runStoryboard places one buy per step that applies, each with the step's correlation id, in
// one world whose seller serves the storyboard's fixture, and grades every step. current is the
// README's table, whose rows of steps graded elsewhere are kept.
func runStoryboard(t *testing.T, sb *buyerstoryboards.Storyboard, current map[string]string) []buyerstoryboards.Row {
	var env *stagetest.Env
	var issued *atomic.Int64
	logs := map[string][]buyerstoryboards.Call{}
	tokens := map[string]int64{} // OAuth tokens fetched during each run
	run := func(id string) []buyerstoryboards.Call {
		if calls, ok := logs[id]; ok {
			return calls
		}
		if env == nil {
			opts, err := buyerstoryboards.Seller(sb)
			if err != nil {
				t.Fatal(err)
			}
			env, issued = newEnv(t, opts)
		}
		from, before := len(env.Seller.Calls()), issued.Load()
		drive(t, env, id)
		calls := buyerstoryboards.Calls(env.Seller.Calls()[from:])
		logs[id], tokens[id] = calls, issued.Load()-max(before, 1) // the world's first token is no re-authentication
		return calls
	}
	aliases := map[string]string{}
	var rows []buyerstoryboards.Row
	for _, p := range sb.Phases {
		for _, st := range p.Steps {
			row := buyerstoryboards.Row{Storyboard: sb.ID, Step: st.ID}
			sc, ok := scopes[row.Key()]
			switch {
			case !ok:
				t.Errorf("%s: no scope: say how the step is graded or why it does not apply", row.Key())
				continue
			case sc.na != "":
				row.Result = buyerstoryboards.NotApplicable + ": " + sc.na
			case sc.campaign:
				if row.Result, ok = current[row.Key()]; !ok {
					t.Errorf("%s: the README has no row for it: run statemachine/stagepaths' TestOrchestratorStoryboard (BUYFLOW_NODE_TESTS=1) and copy the row it prints", row.Key())
					continue
				}
			default:
				id := sc.run
				if id == "" {
					id = sb.ID + "--" + st.ID
				}
				calls := run(id)
				var checks []buyerstoryboards.CheckResult
				row.Result, checks = buyerstoryboards.GradeStep(st, buyerstoryboards.Observation{Calls: calls, Index: nth(calls, sc.call)}, sc.via, aliases)
				if sc.reauth && tokens[id] == 0 {
					row.Result = buyerstoryboards.Fail + ": no new OAuth token was fetched after the 401 (" + sc.via + ")"
				}
				for _, c := range checks {
					t.Logf("%s %s: %s (%s)", row.Key(), c.Check, c.Result, c.Detail)
				}
			}
			rows = append(rows, row)
		}
	}
	return rows
}

// nth finds "<tool>#<n>" in calls: the index of the n-th call of tool, -1 when there is none.
func nth(calls []buyerstoryboards.Call, sel string) int {
	if sel == "" {
		return -1
	}
	tool, n := sel, 1
	if i := strings.LastIndexByte(sel, '#'); i > 0 {
		tool = sel[:i]
		_, _ = fmt.Sscan(sel[i+1:], &n)
	}
	for i, c := range calls {
		if c.Tool == tool {
			if n--; n == 0 {
				return i
			}
		}
	}
	return -1
}

// newEnv is a stage world whose seller serves opts, reached with OAuth client credentials (the
// token endpoint hands out a new token per request, each one the seller accepts), so that a 401
// is answered as buyflow answers one in production: a fresh token and the same request again.
func newEnv(t *testing.T, opts adcptest.SellerOptions) (*stagetest.Env, *atomic.Int64) {
	issued := new(atomic.Int64)
	tokens := make([]string, 50)
	for i := range tokens {
		tokens[i] = fmt.Sprintf("oauth-token-%d", i+1)
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := issued.Add(1)
		if n > int64(len(tokens)) {
			http.Error(w, `{"error":"temporarily_unavailable"}`, http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"access_token":%q,"token_type":"Bearer","expires_in":3600}`, tokens[n-1])
	}))
	t.Cleanup(ts.Close)
	opts.Token, opts.Tokens = tokens[0], tokens[1:]
	return stagetest.NewEnv(t, stagetest.Options{Seller: opts, SellerSecret: "client-secret",
		SellerAuth: &adcp.AuthConfig{Mode: adcp.AuthOAuth2ClientCredentials, ClientID: "buyflow", TokenURL: ts.URL + "/token"}}), issued
}

// asl is the part of statemachine/mediabuy.asl.json the runner follows between stages.
type asl struct {
	States map[string]struct {
		Type        string `json:"Type"`
		Next        string `json:"Next"`
		SecondsPath string `json:"SecondsPath"`
		Retry       []struct {
			ErrorEquals     []string `json:"ErrorEquals"`
			IntervalSeconds float64  `json:"IntervalSeconds"`
			MaxAttempts     int      `json:"MaxAttempts"`
			BackoffRate     float64  `json:"BackoffRate"`
			MaxDelaySeconds float64  `json:"MaxDelaySeconds"`
			JitterStrategy  string   `json:"JitterStrategy"`
		} `json:"Retry"`
		Choices []struct {
			Variable string `json:"Variable"`
			Next     string `json:"Next"`
		} `json:"Choices"`
	} `json:"States"`
}

// retryFloor is the least wait the ASL's retrier of TransientError on state guarantees before
// retry n (1-based), and how many retries it makes: with full jitter the wait is drawn from
// [0, the backoff], so nothing is guaranteed.
func retryFloor(t *testing.T, def asl, state string, n int) (time.Duration, bool) {
	for _, r := range def.States[state].Retry {
		if !slices.Contains(r.ErrorEquals, "TransientError") {
			continue
		}
		if n > r.MaxAttempts {
			return 0, false
		}
		if r.JitterStrategy == "FULL" {
			return 0, true
		}
		d := r.IntervalSeconds * math.Pow(r.BackoffRate, float64(n-1))
		if r.MaxDelaySeconds > 0 {
			d = min(d, r.MaxDelaySeconds)
		}
		return time.Duration(d * float64(time.Second)), true
	}
	t.Fatalf("%s has no retrier of TransientError", state)
	return 0, false
}

// drive runs one buy with context.correlation_id id as the state machine does: CheckGovernance;
// CreateMediaBuy, again after each TransientError at the least delay its retrier guarantees,
// and after an unavailable output once SellerAvailable's wait passed; then while the seller's
// task runs, AwaitSeller's timeout and PollSeller. The clock moves by those waits only.
func drive(t *testing.T, e *stagetest.Env, id string) {
	var def asl
	if err := json.Unmarshal([]byte(statemachine.Definition), &def); err != nil {
		t.Fatal(err)
	}
	avail := def.States["SellerAvailable"]
	if len(avail.Choices) != 1 || avail.Choices[0].Variable != "$.seller.result.unavailable" ||
		def.States[avail.Choices[0].Next].SecondsPath != "$.seller.result.unavailable.retry_in_seconds" ||
		def.States[avail.Choices[0].Next].Next != "CreateMediaBuy" {
		t.Fatal("SellerAvailable no longer waits retry_in_seconds and creates again: update drive")
	}
	op := e.NewOpWithContext(map[string]any{"correlation_id": id}, false)
	if got := e.Check(op); got.Decision != workflow.GovernanceProceed {
		t.Fatalf("%s: governance decision %+v", id, got)
	}
	ctx := context.Background()
	var out workflow.SellerOutput
	for retry := 0; ; {
		var err error
		out, err = e.CreateStage.CreateMediaBuy(ctx, stagetest.StageIn(op, workflow.ActionCreate))
		var te *workflow.TransientError
		switch {
		case errors.As(err, &te):
			retry++
			wait, ok := retryFloor(t, def, "CreateMediaBuy", retry)
			if !ok {
				t.Logf("%s: create failed after its retries: %v", id, err)
				return
			}
			e.Clock.Advance(wait)
			continue
		case err != nil:
			t.Logf("%s: create failed: %v", id, err)
			return
		case out.Unavailable != nil:
			e.Clock.Advance(time.Duration(out.Unavailable.RetryInSeconds) * time.Second)
			continue
		}
		break
	}
	for round := 0; !out.NeedsDecision(); round++ {
		if round == 10 {
			t.Fatalf("%s: the seller's task did not end in 10 polls: %+v", id, out)
		}
		e.Clock.Advance(time.Duration(out.Next.IntervalSeconds) * time.Second)
		var err error
		out, err = e.PollStage.PollSeller(ctx, workflow.PollInput{Action: workflow.ActionPoll, OperationID: op.ID, Tenant: stagetest.Tenant, Config: stagetest.RunConfig(), Wait: out.Next})
		if err != nil {
			t.Logf("%s: poll failed: %v", id, err)
			return
		}
	}
	t.Logf("%s: the buy ended %s", id, e.Op(op.ID).Status)
}
