package devstack

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/buyflow/buyflow/internal/iampolicy"
	"github.com/buyflow/buyflow/internal/topology"
)

// TemplateEnv is the account the synthesized template is resolved in: the ARNs the gate
// checks and reports are the ones the deployed stack would have in this (placeholder) account.
var TemplateEnv = iampolicy.Env{Partition: "aws", Region: region, AccountID: "123456789012", StackName: "Buyflow"}

// IAMCall is one decision of the gate: a caller's call (a function's, or a state machine's
// Lambda invocation, its Caller then "state machine <name>"), the ARN it named as the deployed stack
// would see it, and the statement that allowed it (or, denied, the explicit Deny or nothing).
type IAMCall struct {
	Caller, Action, Resource string
	// Statement is the deciding statement's source (policy logical id[index]).
	Statement string
	Denied    bool
	// Reason says why a denied call was refused.
	Reason string
}

func (c IAMCall) String() string {
	s := fmt.Sprintf("%s: %s on %s", c.Caller, c.Action, c.Resource)
	if c.Reason != "" {
		s += " (" + c.Reason + ")"
	}
	return s
}

// IAMGate checks every AWS call a function makes against the function's role in a
// synthesized template, and refuses what the role does not allow with AccessDeniedException, as
// AWS does. The caller is known by its access key id (callerFunction); the local names of the
// stack's resources are translated to the template's by pairing each function's environment
// in both (the same topology variable names the same resource).
type IAMGate struct {
	tpl *iampolicy.Template
	// raw is the synthesized template, which WithoutStatement edits.
	raw []byte
	// names maps local resource names to the template's; prefixes map name prefixes (the
	// agents' secrets).
	names    map[string]string
	prefixes [][2]string
	// functions maps a local function name to its logical id (its name in the template);
	// machines maps a local state machine ARN to its caller name.
	functions map[string]string
	machines  map[string]string
	// callers lists the functions, then the state machines, in report order.
	callers []string

	mu sync.Mutex
	// policies are the roles checked now; base are the synthesized ones (the report's grants),
	// which policies differ from only while a test has a statement removed.
	policies, base map[string]iampolicy.Policy
	roles          map[string]string
	// expected are the functions whose denials a test provoked (WithoutStatement).
	expected map[string]bool
	calls    map[IAMCall]int
	// active counts the tests running now (Track), ran is every test that ran, and seen names
	// the tests that were running while an allowed call was made: who exercised a grant.
	active map[string]int
	ran    map[string]bool
	seen   map[IAMCall]map[string]bool
}

// newIAMGate reads raw (a synthesized template) for every topology function; values are the
// local values of the functions' environment (functionValues, with the state machines').
func newIAMGate(raw []byte, values map[string]string) (*IAMGate, error) {
	tpl, err := iampolicy.ParseTemplate(raw, TemplateEnv)
	if err != nil {
		return nil, fmt.Errorf("devstack: iam: %w", err)
	}
	g := &IAMGate{tpl: tpl, raw: raw, names: map[string]string{}, policies: map[string]iampolicy.Policy{}, roles: map[string]string{},
		functions: map[string]string{}, machines: map[string]string{}, expected: map[string]bool{}, calls: map[IAMCall]int{},
		active: map[string]int{}, ran: map[string]bool{SuiteRun: true}, seen: map[IAMCall]map[string]bool{}}
	for _, f := range topology.App.Functions {
		tf, err := tpl.Function(topology.ConstructID(f.Name) + "Function")
		if err != nil {
			return nil, fmt.Errorf("devstack: iam: function %s: %w", f.Name, err)
		}
		if g.policies[f.Name], err = tpl.RolePolicy(tf.Role); err != nil {
			return nil, fmt.Errorf("devstack: iam: function %s: %w", f.Name, err)
		}
		g.roles[f.Name] = tf.Role
		g.functions[f.Name] = tf.LogicalID
		g.callers = append(g.callers, f.Name)
		for _, name := range f.Env {
			local, deployed := values[name], tf.Env[name]
			if local == "" || deployed == "" || local == deployed {
				continue
			}
			if strings.HasSuffix(local, "/") && strings.HasSuffix(deployed, "/") {
				if !slices.Contains(g.prefixes, [2]string{local, deployed}) {
					g.prefixes = append(g.prefixes, [2]string{local, deployed})
				}
				continue
			}
			g.names[local] = deployed
			// A signing key's reference (kms:<ARN>) also pairs the keys' ARNs, which KMS
			// calls name.
			if l, ok := strings.CutPrefix(local, "kms:"); ok {
				if d, ok := strings.CutPrefix(deployed, "kms:"); ok {
					g.names[l] = d
				}
			}
			// A state machine ARN also pairs the machines' names, which execution ARNs carry.
			if l, d := arnName(local, "stateMachine:"), arnName(deployed, "stateMachine:"); l != "" && d != "" {
				g.names[l] = d
				g.machines[local] = "state machine " + d
			}
		}
	}
	// The state machines' roles: their Lambda invocations come from the local engine, which
	// names the machine (statesMachineHeader).
	for _, local := range sortedKeys(g.machines) {
		caller := g.machines[local]
		role, err := tpl.StateMachineRole(strings.TrimPrefix(caller, "state machine "))
		if err != nil {
			return nil, fmt.Errorf("devstack: iam: %w", err)
		}
		if g.policies[caller], err = tpl.RolePolicy(role); err != nil {
			return nil, fmt.Errorf("devstack: iam: %s: %w", caller, err)
		}
		g.roles[caller] = role
		g.callers = append(g.callers, caller)
	}
	g.base = maps.Clone(g.policies)
	return g, nil
}

// statesMachineHeader names the state machine whose execution invokes a function (live.mjs).
const statesMachineHeader = "X-Buyflow-Local-Machine"

// machineCall returns the IAM question of a local Step Functions Lambda invocation: the
// machine's caller name and lambda:InvokeFunction on the function's deployed ARN; ok is false
// for a request that is not one.
func (g *IAMGate) machineCall(r *http.Request) (caller string, c awsCall, ok bool) {
	machine := r.Header.Get(statesMachineHeader)
	if machine == "" || r.Header.Get(statesCallerHeader) == "" {
		return "", awsCall{}, false
	}
	_, rest, _ := strings.Cut(r.URL.Path, "/functions/")
	fn, _, _ := strings.Cut(rest, "/invocations")
	// The engine names the function by its ARN (a qualifier would follow the name).
	if n := arnName(fn, "function:"); n != "" {
		fn, _, _ = strings.Cut(n, ":")
	}
	caller = g.machines[machine]
	if caller == "" {
		caller = "state machine " + machine
	}
	id := g.functions[fn]
	if id == "" {
		id = fn
	}
	env := g.tpl.Env()
	return caller, awsCall{Action: "lambda:InvokeFunction", Resource: "arn:" + env.Partition + ":lambda:" + env.Region + ":" + env.AccountID + ":function:" + id}, true
}

// arnName returns what follows marker in an ARN, or "".
func arnName(arn, marker string) string {
	if !strings.HasPrefix(arn, "arn:") {
		return ""
	}
	_, name, _ := strings.Cut(arn, ":"+marker)
	return name
}

func (g *IAMGate) translate(name string) string {
	if d, ok := g.names[name]; ok {
		return d
	}
	for _, p := range g.prefixes {
		if rest, ok := strings.CutPrefix(name, p[0]); ok {
			return p[1] + rest
		}
	}
	return name
}

// deployedARN is the ARN c's resource has in the deployed stack.
func (g *IAMGate) deployedARN(c awsCall) string {
	env := g.tpl.Env()
	arn := func(service, rest string) string {
		return "arn:" + env.Partition + ":" + service + ":" + env.Region + ":" + env.AccountID + ":" + rest
	}
	switch c.Kind {
	case "table":
		table, index, hasIndex := strings.Cut(c.Resource, "/index/")
		if n := arnName(table, "table/"); n != "" {
			table = n // DynamoDB also takes the table's ARN as its name
		}
		out := arn("dynamodb", "table/"+g.translate(table))
		if hasIndex {
			out += "/index/" + index
		}
		return out
	case "stateMachine":
		if d, ok := g.names[c.Resource]; ok {
			return d
		}
		return arn("states", "stateMachine:"+g.translate(arnName(c.Resource, "stateMachine:")))
	case "execution":
		machine, id, _ := strings.Cut(arnName(c.Resource, "execution:"), ":")
		return arn("states", "execution:"+g.translate(machine)+":"+id)
	case "secret":
		name := c.Resource
		if n := arnName(name, "secret:"); n != "" {
			// A secret's ARN ends in -<6 random characters>; the grant is on the name.
			if i := strings.LastIndex(n, "-"); i >= 0 && len(n)-i == 7 {
				n = n[:i]
			}
			name = n
		}
		return arn("secretsmanager", "secret:"+g.translate(name)+iampolicy.SecretSuffix)
	case "bus":
		name := c.Resource
		if n := arnName(name, "event-bus/"); n != "" {
			name = n
		}
		return arn("events", "event-bus/"+g.translate(name))
	case "key":
		if d, ok := g.names[c.Resource]; ok {
			return d
		}
		// A key named by its id alone: the key whose ARN ends with it.
		for local, d := range g.names {
			if strings.HasPrefix(local, "arn:") && arnName(local, "key/") == c.Resource {
				return d
			}
		}
		if strings.HasPrefix(c.Resource, "arn:") {
			return c.Resource
		}
		return arn("kms", "key/"+c.Resource)
	case "queue":
		// The local URL pairs with the deployed one (https://sqs.<region>.amazonaws.com/
		// <account>/<name>), whose last segment names the queue.
		u := g.translate(c.Resource)
		return arn("sqs", u[strings.LastIndex(u, "/")+1:])
	}
	return c.Resource
}

// admit decides r; it answers a refused call itself and reports whether r may go on. A local
// Step Functions invocation is checked against its machine's role; other requests that no
// function signed (the stack's own set-up, the runtime API, the stream mapping) go on.
func (g *IAMGate) admit(w http.ResponseWriter, r *http.Request) bool {
	fn := callerFunction(r)
	if fn == "" {
		caller, c, ok := g.machineCall(r)
		if !ok {
			return true
		}
		return g.decide(w, r, caller, []awsCall{c})
	}
	target := r.Header.Get("X-Amz-Target")
	var body []byte
	if r.Body != nil {
		b, err := io.ReadAll(io.LimitReader(r.Body, maxIAMBody+1))
		_ = r.Body.Close() // replaced below
		if err != nil {
			http.Error(w, "local stack: read request: "+err.Error(), http.StatusBadRequest)
			return false
		}
		if len(b) > maxIAMBody {
			// Never forward a truncated body; no API the gate models takes one this large.
			http.Error(w, "local stack: the request body is larger than the 16 MB the IAM gate reads", http.StatusRequestEntityTooLarge)
			return false
		}
		body = b
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	calls, err := parseAWSCall(target, body)
	if err != nil {
		action := target
		if action == "" {
			action = r.Method + " " + r.URL.Path
		}
		g.deny(w, r, IAMCall{Caller: fn, Action: action, Resource: "?", Denied: true, Reason: err.Error()})
		return false
	}
	return g.decide(w, r, fn, calls)
}

// decide evaluates calls for caller, answers the first refused one and records the decisions.
func (g *IAMGate) decide(w http.ResponseWriter, r *http.Request, fn string, calls []awsCall) bool {
	decided := make([]IAMCall, 0, len(calls))
	for _, c := range calls {
		res := g.deployedARN(c)
		g.mu.Lock()
		pol := g.policies[fn]
		g.mu.Unlock()
		d := pol.Evaluate(iampolicy.Request{Action: c.Action, Resource: res})
		call := IAMCall{Caller: fn, Action: c.Action, Resource: res, Denied: !d.Allowed}
		if d.Statement != nil {
			call.Statement = d.Statement.Source
		}
		if !d.Allowed {
			call.Reason = "no statement of the role allows it"
			if d.Statement != nil {
				call.Reason = "explicitly denied by " + d.Statement.Source
			}
			if pol == nil {
				call.Reason = "the template has no role for this function"
			}
			g.deny(w, r, call)
			return false
		}
		decided = append(decided, call)
	}
	g.mu.Lock()
	for _, c := range decided {
		g.calls[c]++
		// A role with a statement taken out names its statements differently for a while:
		// those calls prove nothing about the synthesized grants.
		if g.expected[fn] {
			continue
		}
		if g.seen[c] == nil {
			g.seen[c] = map[string]bool{}
		}
		g.seen[c][SuiteRun] = true
		for test := range g.active {
			g.seen[c][test] = true
		}
	}
	g.mu.Unlock()
	return true
}

// SuiteRun names the suite's own run in ExercisedBy: every allowed call counts as exercised by
// it, for the calls no test starts (a function's cold start at the stack's start, a schedule).
const SuiteRun = "TestMain"

// Track records that test runs until done is called: the allowed calls made meanwhile count
// as exercised by it (with parallel tests, by each test running then).
func (g *IAMGate) Track(test string) (done func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.active[test]++
	g.ran[test] = true
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.active[test]--; g.active[test] <= 0 {
			delete(g.active, test)
		}
	}
}

// deny records c and answers as AWS does for a JSON-protocol API: HTTP 400 with the error
// type AccessDeniedException (the SDKs read __type, Step Functions' also x-amzn-ErrorType).
func (g *IAMGate) deny(w http.ResponseWriter, r *http.Request, c IAMCall) {
	g.mu.Lock()
	if g.expected[c.Caller] {
		c.Reason += " [provoked by a test]"
	}
	g.calls[c]++
	role := g.roles[c.Caller]
	g.mu.Unlock()
	why := "because no identity-based policy allows the " + c.Action + " action"
	if strings.HasPrefix(c.Reason, "explicitly") {
		why = "with an explicit deny in an identity-based policy"
	}
	session := c.Caller
	if strings.HasPrefix(session, "state machine ") {
		session = "states-session"
	}
	msg := fmt.Sprintf("User: arn:aws:sts::%s:assumed-role/%s/%s is not authorized to perform: %s on resource: %s %s",
		g.tpl.Env().AccountID, role, session, c.Action, c.Resource, why)
	ct, status := r.Header.Get("Content-Type"), http.StatusBadRequest
	if ct == "" {
		ct = "application/x-amz-json-1.1"
	}
	if strings.HasPrefix(c.Action, "lambda:") {
		// Lambda's REST API answers 403 (the engine reports it as Lambda.AWSLambdaException).
		ct, status = "application/json", http.StatusForbidden
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("X-Amzn-ErrorType", "AccessDeniedException")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": "AccessDeniedException", "Type": "User", "message": msg}) // the client may be gone
}

// Calls returns every decision so far (allowed and denied), sorted.
func (g *IAMGate) Calls() []IAMCall {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]IAMCall, 0, len(g.calls))
	for c := range g.calls {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b IAMCall) int {
		return strings.Compare(a.Caller+"\x00"+a.Action+"\x00"+a.Resource+"\x00"+a.Reason, b.Caller+"\x00"+b.Action+"\x00"+b.Resource+"\x00"+b.Reason)
	})
	return out
}

// Denied returns the denied calls no test provoked: each is a grant the deployed stack lacks.
func (g *IAMGate) Denied() []IAMCall {
	var out []IAMCall
	for _, c := range g.Calls() {
		if c.Denied && !strings.HasSuffix(c.Reason, "[provoked by a test]") {
			out = append(out, c)
		}
	}
	return out
}

// DeniedError is the error a suite fails with when calls were denied: each named.
func DeniedError(denied []IAMCall) error {
	if len(denied) == 0 {
		return nil
	}
	lines := make([]string, 0, len(denied))
	for _, c := range denied {
		lines = append(lines, "  "+c.String())
	}
	return fmt.Errorf("the functions' roles in the synthesized stack refused %d AWS call(s) (AccessDeniedException on AWS):\n%s", len(denied), strings.Join(lines, "\n"))
}

// WithoutStatement checks fn's calls against the synthesized template with the statement of
// fn's role that allows action taken out (iampolicy.RemoveStatement), until restore is called:
// the template a build of the stack without that grant would synthesize. The denials it causes
// are marked as provoked (Denied leaves them out). It returns the removed statement's source.
func (g *IAMGate) WithoutStatement(fn, action string) (source string, restore func(), err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	pol, ok := g.base[fn]
	if !ok {
		return "", nil, fmt.Errorf("devstack: iam: no function %s", fn)
	}
	i := slices.IndexFunc(pol, func(s iampolicy.Statement) bool {
		return s.Effect == "Allow" && slices.ContainsFunc(s.Action, func(a string) bool { return iampolicy.Match(strings.ToLower(a), strings.ToLower(action)) })
	})
	if i < 0 {
		return "", nil, fmt.Errorf("devstack: iam: no statement of %s's role allows %s", fn, action)
	}
	edited, err := iampolicy.RemoveStatement(g.raw, pol[i].Source)
	if err != nil {
		return "", nil, fmt.Errorf("devstack: iam: %w", err)
	}
	tpl, err := iampolicy.ParseTemplate(edited, g.tpl.Env())
	if err != nil {
		return "", nil, fmt.Errorf("devstack: iam: %w", err)
	}
	if g.policies[fn], err = tpl.RolePolicy(g.roles[fn]); err != nil {
		return "", nil, fmt.Errorf("devstack: iam: %w", err)
	}
	g.expected[fn] = true
	return pol[i].Source, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.policies[fn] = g.base[fn]
		delete(g.expected, fn)
	}, nil
}
