// Package stagetest builds the world the seller-facing stages' tests run in: a kumo ledger, the
// simulated seller and governance agents (adcptest) behind a real, schema-validating AdCP
// client, a recording task completer, and the governance, create and poll stages over them as
// their Lambdas build them, with hooks to interfere and helpers to drive a buy through. Only
// tests import it: those of governance, create and poll, and those of the other task
// completers (reconcile, sellertask, webhook) for its fake completers.
package stagetest

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/adcpschemas"
	"github.com/buyflow/buyflow/internal/adcptest"
	"github.com/buyflow/buyflow/internal/adcpvalidate"
	"github.com/buyflow/buyflow/internal/breaker"
	"github.com/buyflow/buyflow/internal/clocktest"
	"github.com/buyflow/buyflow/internal/create"
	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/governance"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/poll"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/stage"
	"github.com/buyflow/buyflow/internal/workflow"
)

// The tenant every operation belongs to, the two agents in the registry, the governance plan,
// the base URL the create stage builds push-notification URLs on and the caller URI it names.
const (
	Tenant     = "tenant-1"
	SellerID   = "seller-a"
	GovID      = "gov-a"
	PlanID     = "plan-1"
	BaseURL    = "https://buyflow.example"
	CallerURI  = "https://buyflow.example/agent"
	testBudget = "5000.00"
)

var opSeq atomic.Int64

// TasksFunc is a function-typed fake task completer (Step Functions' SendTaskSuccess).
type TasksFunc func(ctx context.Context, token string, output any) error

// Succeed calls f.
func (f TasksFunc) Succeed(ctx context.Context, token string, output any) error {
	return f(ctx, token, output)
}

// Completion is one task completion a stage sent (Step Functions' SendTaskSuccess).
type Completion struct {
	Token  string
	Output workflow.SellerOutput
}

// Completer is a fake task completer, safe for concurrent use: it records every completion
// whose output is a workflow.SellerOutput and answers it with Err (nil: success); any other
// output is refused unrecorded.
type Completer struct {
	mu          sync.Mutex
	completions []Completion
	Err         error
}

// Succeed records the completion and returns Err.
func (c *Completer) Succeed(_ context.Context, token string, output any) error {
	out, ok := output.(workflow.SellerOutput)
	if !ok {
		return fmt.Errorf("unexpected output %T", output)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.completions = append(c.completions, Completion{Token: token, Output: out})
	return c.Err
}

// Completed returns the completions recorded so far.
func (c *Completer) Completed() []Completion {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.completions)
}

// PolicyFunc is a function-typed fake of the governance stage's approval policy.
type PolicyFunc func(budget, currency string) (bool, string)

// Needs calls f.
func (f PolicyFunc) Needs(budget, currency string) (bool, string) { return f(budget, currency) }

// hookLedger wraps the real ledger; a non-nil hook replaces a method.
type hookLedger struct {
	stage.Ledger
	OnTransition func(ctx context.Context, tenant, id string, to workflow.Status, v int64, ch record.Patch) (*record.Operation, error)
}

// Transition calls OnTransition when it is set, else the ledger.
func (h *hookLedger) Transition(ctx context.Context, tenant, id string, to workflow.Status, v int64, ch record.Patch) (*record.Operation, error) {
	if h.OnTransition != nil {
		return h.OnTransition(ctx, tenant, id, to, v, ch)
	}
	return h.Ledger.Transition(ctx, tenant, id, to, v, ch)
}

// hookAdCP wraps the real client; a non-nil hook runs before the call.
type hookAdCP struct {
	stage.AdCP
	BeforeCreate   func(in adcp.Intent)
	BeforePoll     func()
	BeforeListBuys func()
}

// GetMediaBuys runs BeforeListBuys, then the client's call.
func (h *hookAdCP) GetMediaBuys(ctx context.Context, agentID string, req adcp.GetMediaBuysRequest) (*adcp.GetMediaBuysResult, error) {
	if h.BeforeListBuys != nil {
		h.BeforeListBuys()
	}
	return h.AdCP.GetMediaBuys(ctx, agentID, req)
}

// CreateMediaBuy runs BeforeCreate, then the client's call.
func (h *hookAdCP) CreateMediaBuy(ctx context.Context, agentID string, in adcp.Intent) (*adcp.MediaBuyResult, error) {
	if h.BeforeCreate != nil {
		h.BeforeCreate(in)
	}
	return h.AdCP.CreateMediaBuy(ctx, agentID, in)
}

// GetTaskStatus runs BeforePoll, then the client's call.
func (h *hookAdCP) GetTaskStatus(ctx context.Context, agentID string, req adcp.GetTaskStatusRequest) (*adcp.TaskStatusResult, error) {
	if h.BeforePoll != nil {
		h.BeforePoll()
	}
	return h.AdCP.GetTaskStatus(ctx, agentID, req)
}

// Env is one test's world, on Clock: the real time plus what the test advanced, shared by the
// ledger, the agents, the AdCP client and the stages. The stages reach the ledger through
// Ledger and the agents through AdCP, so a test can interfere with either; Store and Client are
// the real ones underneath.
type Env struct {
	T      *testing.T
	Store  *ledger.Store
	Ledger *hookLedger
	AdCP   *hookAdCP
	Client *adcp.Client
	Seller *adcptest.Seller
	Gov    *adcptest.Governance
	Clock  *clocktest.Clock
	policy governance.Policy

	tasks       Completer
	GovStage    *governance.Service
	CreateStage *create.Service
	PollStage   *poll.Service
}

// Build makes the three stages over the env's ledger and agents, each with what its Lambda
// gives it.
func (e *Env) Build(o stage.Options) {
	e.GovStage = governance.New(e.Ledger, e.AdCP, e.policy, CallerURI, o)
	e.CreateStage = create.New(e.Ledger, e.AdCP, CallerURI, BaseURL, o)
	e.PollStage = poll.New(e.Ledger, e.AdCP, &e.tasks, o)
}

// Options shape a world: the simulated agents' behaviour, the approval policy and breakers.
type Options struct {
	Seller adcptest.SellerOptions
	Gov    adcptest.GovernanceOptions
	Policy governance.Policy
	// Breakers, when set, guards the AdCP client with the agents' circuit breakers in the
	// env's ledger, with these registry settings for every agent.
	Breakers json.RawMessage
	// SellerAuth, when set, is the seller agent's auth settings (OAuth client credentials) and
	// SellerSecret what its credential ref resolves to (the client secret).
	SellerAuth   *adcp.AuthConfig
	SellerSecret string
}

// NewEnv starts the agents and builds the stages as o says, on a clock the agents share unless o
// gives them their own.
func NewEnv(t *testing.T, o Options) *Env {
	t.Helper()
	db, table := dynamotest.Start(t)
	clk := clocktest.Real()
	store := ledger.New(db, table)
	store.Now = clk.Now
	if o.Seller.Now == nil {
		o.Seller.Now = clk.Now
	}
	if o.Gov.Now == nil {
		o.Gov.Now = clk.Now
	}

	seller := adcptest.NewSeller(o.Seller)
	seller.Start()
	t.Cleanup(seller.Close)
	gov := adcptest.NewGovernance(o.Gov)
	gov.Start()
	t.Cleanup(gov.Close)

	reg, err := adcp.NewRegistry(adcp.RegistryConfig{Agents: []adcp.Agent{
		{ID: SellerID, Role: adcp.RoleSeller, MCPURL: seller.URL(), CredentialRef: "cred/seller", Auth: o.SellerAuth,
			Webhook: &adcp.WebhookConfig{Mode: adcp.WebhookHMAC, HMACSecretRef: "hmac/seller"}},
		{ID: GovID, Role: adcp.RoleGovernance, MCPURL: gov.URL(), CredentialRef: "cred/gov"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	v, err := schemaValidator()
	if err != nil {
		t.Fatal(err)
	}
	var guard adcp.Guard
	if o.Breakers != nil {
		g := breaker.New(store, func(context.Context, string) (json.RawMessage, error) { return o.Breakers, nil })
		g.Now = clk.Now
		guard = g
	}
	client, err := adcp.New(adcp.Options{Registry: reg, Validator: v, CallTimeout: 5 * time.Second, Guard: guard, Now: clk.Now,
		Credentials: adcp.CredentialsFunc(func(_ context.Context, ref string) (string, error) {
			switch {
			case ref == "cred/gov":
				return adcptest.DefaultGovernanceToken, nil
			case o.SellerSecret != "":
				return o.SellerSecret, nil
			}
			return adcptest.DefaultSellerToken, nil
		})})
	if err != nil {
		t.Fatal(err)
	}
	e := &Env{T: t, Store: store, Ledger: &hookLedger{Ledger: store}, AdCP: &hookAdCP{AdCP: client}, Client: client,
		Seller: seller, Gov: gov, Clock: clk, policy: o.Policy}
	e.Build(stage.Options{Now: clk.Now, Rand: func() float64 { return 0.99 }})
	return e
}

// mediaBuy is a schema-valid create_media_buy request as a buyer submits it, with ctx as its
// context (context.sim drives the simulated agents).
func mediaBuy(po string, ctx map[string]any) json.RawMessage {
	c, _ := json.Marshal(ctx)
	return json.RawMessage(fmt.Sprintf(`{"account":{"account_id":"acc_1"},"brand":{"domain":"acme.example"},
		"start_time":"asap","end_time":"2030-01-31T23:59:59Z","po_number":%q,
		"packages":[{"product_id":"prod_1","pricing_option_id":"cpm_1","budget":5000,"context":{"buyer_ref":"li-1"}}],
		"context":%s}`, po, c))
}

// NewOp stores a new operation as submit does (lock included) and returns it; sim drives the
// simulated agents (see adcptest), requireApproval is the buyer's own request for approval.
func (e *Env) NewOp(sim string, requireApproval bool) *record.Operation {
	e.T.Helper()
	return e.NewOpWithContext(map[string]any{"sim": sim}, requireApproval)
}

// NewOpWithContext is NewOp with the buy's context given whole (a storyboard's correlation_id).
func (e *Env) NewOpWithContext(buyContext map[string]any, requireApproval bool) *record.Operation {
	e.T.Helper()
	id := fmt.Sprintf("mb-test-%d", opSeq.Add(1))
	po := "PO-" + id
	req, err := json.Marshal(map[string]any{
		"seller_id": SellerID, "governance": map[string]string{"agent_id": GovID, "plan_id": PlanID},
		"currency": "USD", "require_approval": requireApproval, "media_buy": mediaBuy(po, buyContext),
	})
	if err != nil {
		e.T.Fatal(err)
	}
	ctx := context.Background()
	if _, err := e.Store.AcquireLock(ctx, record.BusinessKeyLock(Tenant, SellerID, po), id, time.Hour); err != nil {
		e.T.Fatal(err)
	}
	op, err := e.Store.CreateOperation(ctx, record.Operation{ID: id, Tenant: Tenant, Status: workflow.StatusRequested,
		SellerID: SellerID, GovernanceAgentID: GovID, PONumber: po, BudgetTotal: testBudget, Currency: "USD",
		Request: req, ExecutionName: id})
	if err != nil {
		e.T.Fatal(err)
	}
	return op
}

// Completed returns the task completions the poll stage sent so far.
func (e *Env) Completed() []Completion { return e.tasks.Completed() }

// Op reads operation id from the ledger.
func (e *Env) Op(id string) *record.Operation {
	e.T.Helper()
	op, err := e.Store.GetOperation(context.Background(), Tenant, id)
	if err != nil {
		e.T.Fatal(err)
	}
	return op
}

// RunConfig is the run configuration the tests' stage inputs carry: the defaults with a
// 10-second first poll, a 600-second poll ceiling and a loop budget of 50.
func RunConfig() workflow.RunConfig {
	c := workflow.DefaultRunConfig()
	c.PollInitialSeconds = 10
	c.PollMaxSeconds = 600
	c.LoopBudget = 50
	return c
}

// SafetyNet reports whether seconds is one jittered safety-net interval of RunConfig (0.75x to 1x
// PollMaxSeconds).
func SafetyNet(seconds int) bool {
	m := RunConfig().PollMaxSeconds
	return seconds >= m-m/4 && seconds <= m
}

// StageIn is the state machine's input to a stage: action a on op.
func StageIn(op *record.Operation, a workflow.Action) workflow.StageInput {
	return workflow.StageInput{Action: a, OperationID: op.ID, Tenant: Tenant, Config: RunConfig()}
}

// Check runs the governance stage's check of op; an error fails the test.
func (e *Env) Check(op *record.Operation) workflow.GovernanceOutput {
	e.T.Helper()
	return runStage(e, "check", e.GovStage.Check, StageIn(op, workflow.ActionCheck))
}

// Create runs the create stage on op; an error fails the test.
func (e *Env) Create(op *record.Operation) workflow.SellerOutput {
	e.T.Helper()
	return runStage(e, "create", e.CreateStage.CreateMediaBuy, StageIn(op, workflow.ActionCreate))
}

// runStage runs stage on in; an error fails the test, named what.
func runStage[Out any](e *Env, what string, stage func(context.Context, workflow.StageInput) (Out, error), in workflow.StageInput) Out {
	e.T.Helper()
	out, err := stage(context.Background(), in)
	if err != nil {
		e.T.Fatalf("%s: %v", what, err)
	}
	return out
}

// Placed runs check and create for a new operation driven by sim and returns it as stored.
func (e *Env) Placed(sim string) (*record.Operation, workflow.SellerOutput) {
	e.T.Helper()
	op := e.NewOp(sim, false)
	if got := e.Check(op); got.Decision != workflow.GovernanceProceed {
		e.T.Fatalf("check decision = %+v, want proceed", got)
	}
	out := e.Create(op)
	return e.Op(op.ID), out
}

// Handle calls a stage handler with a raw payload.
func Handle(t *testing.T, h func(context.Context, json.RawMessage) (any, error), payload any) (any, error) {
	t.Helper()
	raw, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	return h(context.Background(), raw)
}

// WantBare asserts err is a bare workflow error type named want.
func WantBare(t *testing.T, err error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %s", want)
	}
	typ := reflect.TypeOf(err)
	if typ.Kind() != reflect.Pointer || typ.Elem().PkgPath() != reflect.TypeOf(workflow.TransientError{}).PkgPath() {
		t.Fatalf("error %T (%v) is not a bare workflow type", err, err)
	}
	name := typ.Elem().Name()
	if !slices.Contains(workflow.ErrorNames, name) {
		t.Fatalf("error type %s not in workflow.ErrorNames", name)
	}
	if name != want {
		t.Fatalf("error type = %s (%v), want %s", name, err, want)
	}
}

// LastArgs returns the arguments of the last of calls.
func LastArgs(t *testing.T, calls []adcptest.Call) map[string]any {
	t.Helper()
	if len(calls) == 0 {
		t.Fatal("no calls recorded")
	}
	var m map[string]any
	if err := json.Unmarshal(calls[len(calls)-1].Arguments, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// Events returns operation opID's timeline.
func Events(t *testing.T, e *Env, opID string) []record.Event {
	t.Helper()
	p, err := e.Store.ListEvents(context.Background(), Tenant, opID, record.MaxListLimit, "")
	if err != nil {
		t.Fatal(err)
	}
	return p.Items
}

// schemaValidator compiles the embedded AdCP schemas (every release) once per test binary.
var schemaValidator = sync.OnceValues(func() (*adcpvalidate.Validator, error) {
	return adcpvalidate.NewReleasesValidator(adcpschemas.Open), nil
})
