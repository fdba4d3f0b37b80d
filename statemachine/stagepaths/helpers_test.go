package stagepaths

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/adcptest"
	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/apiclient"
)

// buyRun is one scenario: a tenant of its own, one buy, its executions.
type buyRun struct {
	t      *testing.T
	tenant string
	client *apiclient.Client
	po     string
	op     string
	// changes are the ids of the changes sent to the buy (their logs are the buy's too).
	changes []string
	// agents, when set, are the seller and governance agent the buy goes to instead of the
	// system's simulated ones (devstack.SellerID, devstack.GovernanceID).
	agents *runAgents
}

// runAgents are a seller and a governance agent of a run's own, in the registry as sellerID
// and govID, that buyflow speaks AdCP version to.
type runAgents struct {
	seller          *adcptest.Seller
	gov             *adcptest.Governance
	sellerID, govID string
	version         string
}

// begin starts a parallel scenario under a fresh tenant whose executions run with baseRun
// patched by patch (workflow.RunConfig JSON field names).
func begin(t *testing.T, patch map[string]any) *buyRun {
	t.Helper()
	if sys == nil {
		t.Skip(skipWhy)
	}
	t.Parallel()
	return newRun(t, patch)
}

// newRun is one more scenario of a running test, under a fresh tenant (begin starts the test).
func newRun(t *testing.T, patch map[string]any) *buyRun {
	t.Helper()
	r := &buyRun{t: t, tenant: fmt.Sprintf("%012d", rand.Int64N(1e12)), po: fmt.Sprintf("PO-SP-%08X", rand.Uint32())}
	r.client = &apiclient.Client{BaseURL: sys.apiURL, TenantHeader: callerAccountHeader, Tenant: r.tenant}
	if patch == nil {
		patch = map[string]any{}
	}
	body, _ := json.Marshal(patch)
	req, _ := http.NewRequest(http.MethodPut, sys.harness+"/_harness/tenants/"+r.tenant, bytes.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	t.Cleanup(func() {
		r.spoken()
		if t.Failed() && r.op != "" {
			for _, l := range sys.logs.matching(r.op) {
				t.Log(l)
			}
			for _, id := range r.changes {
				for _, l := range sys.logs.matching(id) {
					t.Log(l)
				}
			}
		}
	})
	return r
}

// submit posts the buy (PO set to the scenario's) through the HTTP API and returns the
// operation id; the execution is named after it.
func (r *buyRun) submit(b apiclient.Buy) string {
	r.t.Helper()
	b.PO = r.po
	if r.agents != nil {
		b.Seller = r.agents.sellerID
	}
	body, err := b.Body(sys.root)
	if err != nil {
		r.t.Fatal(err)
	}
	if r.agents != nil {
		var req map[string]any
		if err := json.Unmarshal(body, &req); err != nil {
			r.t.Fatal(err)
		}
		req["governance"].(map[string]any)["agent_id"] = r.agents.govID
		body, _ = json.Marshal(req)
	}
	return r.submitBody(body)
}

// submitBody posts body, a buy request of r's PO, through the HTTP API under the idempotency
// key of the PO and returns the operation id.
func (r *buyRun) submitBody(body []byte) string {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sub, code, err := r.client.Submit(ctx, "key-"+r.po, body)
	if err != nil {
		r.t.Fatalf("submit: HTTP %d: %v", code, err)
	}
	r.op = sub.OperationID
	return r.op
}

// execution is one execution's summary from the harness.
type execution struct {
	Name        string           `json:"name"`
	Status      string           `json:"status"`
	Error       string           `json:"error"`
	Cause       string           `json:"cause"`
	States      []string         `json:"states"`
	Retries     map[string]int   `json:"retries"`
	Invocations []invocationInfo `json:"invocations"`
	Leaks       []string         `json:"leaks"`
	Input       json.RawMessage  `json:"input"`
	Output      json.RawMessage  `json:"output"`
}

type invocationInfo struct {
	State    string `json:"state"`
	Action   string `json:"action"`
	Function string `json:"function"`
	Callback bool   `json:"callback"`
	Result   string `json:"result"`
}

// finish waits for the buy's execution and every execution it handed over to, checks that no
// task token leaked into any state's output, and returns them, first to last.
func (r *buyRun) finish(wait time.Duration) []execution {
	r.t.Helper()
	return r.finishNamed(r.op, wait)
}

// finishNamed is finish for the execution named name (a change's runs under the change's id).
func (r *buyRun) finishNamed(name string, wait time.Duration) []execution {
	r.t.Helper()
	hc := &http.Client{Timeout: wait + 10*time.Second}
	resp, err := hc.Get(fmt.Sprintf("%s/_harness/executions/%s?wait_ms=%d", sys.harness, name, wait.Milliseconds()))
	if err != nil {
		r.t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		r.t.Fatalf("execution %s: HTTP %d %s", name, resp.StatusCode, b)
	}
	var exs []execution
	if err := json.Unmarshal(b, &exs); err != nil {
		r.t.Fatalf("execution %s: %v: %s", name, err, b)
	}
	for _, ex := range exs {
		if len(ex.Leaks) > 0 {
			r.t.Errorf("execution %s leaked task tokens: %v", ex.Name, ex.Leaks)
		}
		r.t.Logf("execution %s: %s %s: %s", ex.Name, ex.Status, ex.Error, strings.Join(ex.States, " > "))
	}
	return exs
}

// operation is the buy as GET /v1/media-buys/{id} shows it.
func (r *buyRun) operation() api.MediaBuy {
	r.t.Helper()
	op, err := r.client.Get(context.Background(), r.op)
	if err != nil {
		r.t.Fatal(err)
	}
	return op
}

// timeline is the buy's event types, in order, from GET /v1/media-buys/{id}/events.
func (r *buyRun) timeline() []string { return r.timelineOf(r.op) }

// timelineOf is the event types of operation id's timeline (a change's, say), oldest first.
func (r *buyRun) timelineOf(id string) []string {
	r.t.Helper()
	evs := r.events(id)
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

// events is operation id's timeline, oldest first.
func (r *buyRun) events(id string) []api.Event {
	r.t.Helper()
	evs, err := r.client.Events(context.Background(), id)
	if err != nil {
		r.t.Fatal(err)
	}
	return evs
}

// sellerCalls returns the seller's recorded calls of tool for this buy: calls whose arguments
// name its PO or operation, or one of the seller tasks its create calls started.
func (r *buyRun) sellerCalls(tool string) []adcptest.Call {
	calls := sys.agents.Seller.Calls()
	if r.agents != nil {
		calls = r.agents.seller.Calls()
	}
	return mine(calls, tool, r.keys(calls))
}

// governanceCalls is sellerCalls for the governance agent.
func (r *buyRun) governanceCalls(tool string) []adcptest.Call {
	calls := sys.agents.Governance.Calls()
	if r.agents != nil {
		calls = r.agents.gov.Calls()
	}
	return mine(calls, tool, r.keys(calls))
}

// keys are the strings that mark a call as this buy's: the PO, the operation id and the task
// and check ids the agent answered to calls that carried them.
func (r *buyRun) keys(calls []adcptest.Call) []string {
	keys := []string{r.po}
	if r.op != "" {
		keys = append(keys, r.op)
	}
	for _, c := range calls {
		if !containsAny(c.Arguments, keys) {
			continue
		}
		var res struct {
			TaskID  string `json:"task_id"`
			CheckID string `json:"check_id"`
		}
		_ = json.Unmarshal(c.Result, &res)
		for _, id := range []string{res.TaskID, res.CheckID} {
			if id != "" && !slices.Contains(keys, id) {
				keys = append(keys, `"`+id+`"`)
			}
		}
	}
	return keys
}

func mine(calls []adcptest.Call, tool string, keys []string) []adcptest.Call {
	var out []adcptest.Call
	for _, c := range calls {
		if (tool == "" || c.Tool == tool) && containsAny(c.Arguments, keys) {
			out = append(out, c)
		}
	}
	return out
}

func containsAny(b []byte, keys []string) bool {
	for _, k := range keys {
		if bytes.Contains(b, []byte(k)) {
			return true
		}
	}
	return false
}

func tools(calls []adcptest.Call) []string {
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i] = c.Tool
		if c.Fault != "" {
			out[i] += "(" + c.Fault + ")"
		} else if c.ErrorCode != "" {
			out[i] += "(" + c.ErrorCode + ")"
		}
	}
	return out
}

// actions lists "<state>:<result>" for every invocation of the executions.
func actions(exs []execution) []string {
	var out []string
	for _, ex := range exs {
		for _, in := range ex.Invocations {
			out = append(out, in.State+":"+in.Result)
		}
	}
	return out
}

func count(ss []string, s string) int {
	n := 0
	for _, x := range ss {
		if x == s {
			n++
		}
	}
	return n
}

// eventually waits up to timeout for cond, checking every 100 ms.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v", what, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// sellerTask waits for the buy's create_media_buy and returns the seller task it started.
func (r *buyRun) sellerTask() string {
	r.t.Helper()
	var id string
	eventually(r.t, 30*time.Second, "seller task", func() bool {
		for _, c := range r.sellerCalls("create_media_buy") {
			var res struct {
				TaskID string `json:"task_id"`
			}
			if json.Unmarshal(c.Result, &res) == nil && res.TaskID != "" {
				id = res.TaskID
				return true
			}
		}
		return false
	})
	return id
}

// slackMessages returns the fake Slack's messages about this buy.
func (r *buyRun) slackMessages() []apiclient.SlackMessage {
	r.t.Helper()
	msgs, err := apiclient.SlackMessages(context.Background(), nil, sys.slackURL)
	if err != nil {
		r.t.Fatal(err)
	}
	var out []apiclient.SlackMessage
	for _, m := range msgs {
		if strings.Contains(string(m.Body)+m.Text, r.op) {
			out = append(out, m)
		}
	}
	return out
}

// approvalLink waits for the Slack message asking for this buy's approval and returns its link.
func (r *buyRun) approvalLink() string {
	r.t.Helper()
	var link string
	eventually(r.t, 30*time.Second, "approval link in Slack", func() bool {
		links := apiclient.ApprovalLinks(r.slackMessages(), sys.apiURL)
		if len(links) > 0 {
			link = links[len(links)-1]
		}
		return link != ""
	})
	return link
}

// decide opens the buy's approval link from Slack and submits decision, as the approver would.
func (r *buyRun) decide(decision string) {
	r.t.Helper()
	if code, heading := decideLink(r.t, r.approvalLink(), decision); code != http.StatusOK {
		r.t.Fatalf("%s: result page HTTP %d %q", decision, code, heading)
	}
}

// decideLink submits decision from link and returns the result page's status and heading.
func decideLink(t *testing.T, link, decision string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code, heading, err := apiclient.Decide(ctx, &http.Client{Timeout: 30 * time.Second}, link, decision, "stagepaths: "+decision)
	if err != nil {
		t.Fatalf("%s from the Slack link: %v", decision, err)
	}
	return code, heading
}
