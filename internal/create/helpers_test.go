package create_test

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
	"github.com/buyflow/buyflow/internal/create"
	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/governance"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/poll"
	"github.com/buyflow/buyflow/internal/stage"
	"github.com/buyflow/buyflow/internal/workflow"
)

const (
	tenant     = "tenant-1"
	sellerID   = "seller-a"
	govID      = "gov-a"
	planID     = "plan-1"
	baseURL    = "https://buyflow.example"
	callerURI  = "https://buyflow.example/agent"
	testBudget = "5000.00"
)

var opSeq atomic.Int64

// clock is the ledger's and the service's clock: real time plus an offset tests move.
type clock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset).UTC()
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.offset += d
	c.mu.Unlock()
}

// tasksFunc is a function-typed fake task completer.
type tasksFunc func(ctx context.Context, token string, output any) error

func (f tasksFunc) Succeed(ctx context.Context, token string, output any) error {
	return f(ctx, token, output)
}

// completion is one recorded Succeed.
type completion struct {
	Token  string
	Output workflow.SellerOutput
}

// policyFunc is a function-typed fake approval policy.
type policyFunc func(op *ledger.Operation) (bool, string)

func (f policyFunc) Needs(op *ledger.Operation) (bool, string) { return f(op) }

// hookLedger wraps the real ledger; a non-nil hook replaces a method.
type hookLedger struct {
	stage.Ledger
	transition func(ctx context.Context, tenant, id string, to workflow.Status, v int64, ch ledger.Changes) (*ledger.Operation, error)
}

func (h *hookLedger) Transition(ctx context.Context, tenant, id string, to workflow.Status, v int64, ch ledger.Changes) (*ledger.Operation, error) {
	if h.transition != nil {
		return h.transition(ctx, tenant, id, to, v, ch)
	}
	return h.Ledger.Transition(ctx, tenant, id, to, v, ch)
}

// hookAdCP wraps the real client; a non-nil hook runs before the call.
type hookAdCP struct {
	stage.AdCP
	beforeCreate   func(in adcp.Intent)
	beforePoll     func()
	beforeListBuys func()
}

func (h *hookAdCP) GetMediaBuys(ctx context.Context, agentID string, req adcp.GetMediaBuysRequest) (*adcp.GetMediaBuysResult, error) {
	if h.beforeListBuys != nil {
		h.beforeListBuys()
	}
	return h.AdCP.GetMediaBuys(ctx, agentID, req)
}

// switchGuard refuses every exchange while refusing is set, as an open circuit breaker does:
// the client sends nothing.
type switchGuard struct{ refusing atomic.Bool }

func (g *switchGuard) Admit(_ context.Context, agentID string) (func(error), error) {
	if g.refusing.Load() {
		return nil, &adcp.UnavailableError{Agent: agentID, Since: time.Now(), RetryAt: time.Now().Add(time.Minute)}
	}
	return func(error) {}, nil
}

func (h *hookAdCP) CreateMediaBuy(ctx context.Context, agentID string, in adcp.Intent) (*adcp.MediaBuyResult, error) {
	if h.beforeCreate != nil {
		h.beforeCreate(in)
	}
	return h.AdCP.CreateMediaBuy(ctx, agentID, in)
}

func (h *hookAdCP) GetTaskStatus(ctx context.Context, agentID string, req adcp.GetTaskStatusRequest) (*adcp.TaskStatusResult, error) {
	if h.beforePoll != nil {
		h.beforePoll()
	}
	return h.AdCP.GetTaskStatus(ctx, agentID, req)
}

type env struct {
	t      *testing.T
	store  *ledger.Store
	led    *hookLedger
	api    *hookAdCP
	client *adcp.Client
	seller *adcptest.Seller
	gov    *adcptest.Governance
	clock  *clock
	policy governance.Policy

	mu          sync.Mutex
	completions []completion
	tasks       poll.Tasks
	govStage    *governance.Governance
	createStage *create.Create
	pollStage   *poll.Poll
}

// build makes the three stages over the env's ledger and agents, each with what its Lambda
// gives it.
func (e *env) build(o stage.Options) {
	e.govStage = governance.New(e.led, e.api, e.policy, callerURI, o)
	e.createStage = create.New(e.led, e.api, callerURI, baseURL, o)
	e.pollStage = poll.New(e.led, e.api, e.tasks, o)
}

type envOptions struct {
	guard  adcp.Guard // asked before every exchange of the client (none: every call goes out)
	seller adcptest.SellerOptions
	gov    adcptest.GovernanceOptions
	policy governance.Policy
}

func newEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	db, table := dynamotest.Start(t)
	clk := &clock{}
	store := ledger.New(db, table)
	store.Now = clk.Now
	if o.seller.Now == nil {
		o.seller.Now = clk.Now
	}
	if o.gov.Now == nil {
		o.gov.Now = clk.Now
	}

	seller := adcptest.NewSeller(o.seller)
	seller.Start()
	t.Cleanup(seller.Close)
	gov := adcptest.NewGovernance(o.gov)
	gov.Start()
	t.Cleanup(gov.Close)

	reg, err := adcp.NewRegistry(adcp.RegistryConfig{Agents: []adcp.Agent{
		{ID: sellerID, Role: adcp.RoleSeller, MCPURL: seller.URL(), CredentialRef: "cred/seller",
			Webhook: &adcp.WebhookConfig{Mode: adcp.WebhookHMAC, HMACSecretRef: "hmac/seller"}},
		{ID: govID, Role: adcp.RoleGovernance, MCPURL: gov.URL(), CredentialRef: "cred/gov"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	v, err := schemaValidator()
	if err != nil {
		t.Fatal(err)
	}
	client, err := adcp.New(adcp.Options{Registry: reg, Validator: v, CallTimeout: 5 * time.Second, Guard: o.guard,
		Credentials: adcp.CredentialsFunc(func(_ context.Context, ref string) (string, error) {
			if ref == "cred/gov" {
				return adcptest.DefaultGovernanceToken, nil
			}
			return adcptest.DefaultSellerToken, nil
		})})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, store: store, led: &hookLedger{Ledger: store}, api: &hookAdCP{AdCP: client}, client: client,
		seller: seller, gov: gov, clock: clk, policy: o.policy}
	tasks := tasksFunc(func(_ context.Context, token string, output any) error {
		out, ok := output.(workflow.SellerOutput)
		if !ok {
			return fmt.Errorf("unexpected output %T", output)
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		e.completions = append(e.completions, completion{Token: token, Output: out})
		return nil
	})
	e.tasks = tasks
	e.build(stage.Options{Now: clk.Now, Rand: func() float64 { return 0.99 }})
	return e
}

// mediaBuy is a schema-valid create_media_buy request as a buyer submits it; sim drives the
// simulated agents.
func mediaBuy(po, sim string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"account":{"account_id":"acc_1"},"brand":{"domain":"acme.example"},
		"start_time":"asap","end_time":"2030-01-31T23:59:59Z","po_number":%q,
		"packages":[{"product_id":"prod_1","pricing_option_id":"cpm_1","budget":5000,"context":{"buyer_ref":"li-1"}}],
		"context":{"sim":%q}}`, po, sim))
}

// newOp stores an operation as submit does (lock included) and returns it.
func (e *env) newOp(sim string, requireApproval bool) *ledger.Operation {
	e.t.Helper()
	id := fmt.Sprintf("mb-test-%d", opSeq.Add(1))
	po := "PO-" + id
	req, err := json.Marshal(map[string]any{
		"seller_id": sellerID, "governance": map[string]string{"agent_id": govID, "plan_id": planID},
		"currency": "USD", "require_approval": requireApproval, "media_buy": mediaBuy(po, sim),
	})
	if err != nil {
		e.t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := e.store.AcquireLock(ctx, ledger.BusinessKeyLock(tenant, sellerID, po), id, time.Hour); err != nil {
		e.t.Fatal(err)
	}
	op, err := e.store.CreateOperation(ctx, ledger.Operation{ID: id, Tenant: tenant, Status: workflow.StatusRequested,
		SellerID: sellerID, GovernanceAgentID: govID, PONumber: po, BudgetTotal: testBudget, Currency: "USD",
		Request: req, ExecutionName: id})
	if err != nil {
		e.t.Fatal(err)
	}
	return op
}

func (e *env) op(id string) *ledger.Operation {
	e.t.Helper()
	op, err := e.store.GetOperation(context.Background(), tenant, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return op
}

// safetyNet reports whether seconds is one jittered safety-net interval of cfg() (0.75x to 1x
// PollMaxSeconds).
func safetyNet(seconds int) bool {
	m := cfg().PollMaxSeconds
	return seconds >= m-m/4 && seconds <= m
}

func cfg() workflow.RunConfig {
	c := workflow.DefaultRunConfig()
	c.PollInitialSeconds = 10
	c.PollMaxSeconds = 600
	c.LoopBudget = 50
	return c
}

func stageIn(op *ledger.Operation, a workflow.Action) workflow.StageInput {
	return workflow.StageInput{Action: a, OperationID: op.ID, Tenant: tenant, Config: cfg()}
}

func (e *env) check(op *ledger.Operation) workflow.GovernanceOutput {
	e.t.Helper()
	out, err := e.govStage.Check(context.Background(), stageIn(op, workflow.ActionCheck))
	if err != nil {
		e.t.Fatalf("check: %v", err)
	}
	return out
}

func (e *env) create(op *ledger.Operation) workflow.SellerOutput {
	e.t.Helper()
	out, err := e.createStage.CreateMediaBuy(context.Background(), stageIn(op, workflow.ActionCreate))
	if err != nil {
		e.t.Fatalf("create: %v", err)
	}
	return out
}

// placed runs check and create for a new operation.
func (e *env) placed(sim string) (*ledger.Operation, workflow.SellerOutput) {
	e.t.Helper()
	op := e.newOp(sim, false)
	if got := e.check(op); got.Decision != workflow.GovernanceProceed {
		e.t.Fatalf("check decision = %+v, want proceed", got)
	}
	out := e.create(op)
	return e.op(op.ID), out
}

// handle calls a stage handler with a raw payload.
func handle(t *testing.T, h func(context.Context, json.RawMessage) (any, error), payload any) (any, error) {
	t.Helper()
	raw, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	return h(context.Background(), raw)
}

// wantBare asserts err is a bare workflow error type named want.
func wantBare(t *testing.T, err error, want string) {
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

func lastArgs(t *testing.T, calls []adcptest.Call) map[string]any {
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

func events(t *testing.T, e *env, opID string) []ledger.Event {
	t.Helper()
	p, err := e.store.ListEvents(context.Background(), tenant, opID, ledger.MaxListLimit, "")
	if err != nil {
		t.Fatal(err)
	}
	return p.Items
}

// schemaValidator compiles the embedded AdCP schemas once for the package's tests.
var schemaValidator = sync.OnceValues(func() (*adcp.Validator, error) {
	schemas, err := adcpschemas.FS()
	if err != nil {
		return nil, err
	}
	return adcp.NewValidator(schemas)
})
