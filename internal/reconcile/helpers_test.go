package reconcile_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/adcpschemas"
	"github.com/buyflow/buyflow/internal/adcptest"
	"github.com/buyflow/buyflow/internal/adcpvalidate"
	"github.com/buyflow/buyflow/internal/clocktest"
	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/reconcile"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/sfn"
	"github.com/buyflow/buyflow/internal/stagetest"
	"github.com/buyflow/buyflow/internal/workflow"
)

const (
	tenant   = "tenant-1"
	sellerID = "seller-a"
	smARN    = "arn:aws:states:us-east-1:123456789012:stateMachine:MediaBuy"
)

var opSeq atomic.Int64

// executionsFunc answers DescribeExecution of the execution executionARN as Step Functions
// would: its status, when it stopped (zero: it runs), or a refusal; executions wraps it in the
// real sfn.Client the sweep is given.
type executionsFunc func(ctx context.Context, executionARN string) (status string, stopped time.Time, err error)

// Call answers the sweep's one action in Step Functions' JSON.
func (f executionsFunc) Call(ctx context.Context, action string, in, out any) error {
	if action != "DescribeExecution" {
		return errors.New("the sweep only describes executions, not " + action)
	}
	status, stopped, err := f(ctx, in.(map[string]string)["executionArn"])
	if err != nil {
		return err
	}
	answer := map[string]any{"status": status}
	if !stopped.IsZero() {
		answer["stopDate"] = float64(stopped.UnixMilli()) / 1e3
	}
	raw, err := json.Marshal(answer)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, out)
}

// executions is the sweep's view of the state machine smARN, answered by f.
func executions(f executionsFunc) *sfn.Client { return sfn.New(f, smARN) }

// hookAdCP wraps the real client; beforeList runs before every listing call.
type hookAdCP struct {
	reconcile.AdCP
	beforeList func()
	noListing  bool // ListTool answers CodeToolNotOffered, like a 3.0 peer with tasks/get only
}

func (h *hookAdCP) ListTool(ctx context.Context, agentID string) (string, error) {
	if h.noListing {
		return "", &adcp.Error{Kind: adcp.KindLocal, Agent: agentID, Tool: adcp.ToolListTasks, Code: adcp.CodeToolNotOffered, Recovery: adcp.RecoveryTerminal}
	}
	return h.AdCP.ListTool(ctx, agentID)
}

func (h *hookAdCP) Call(ctx context.Context, agentID, tool string, req any) (*adcp.Response, error) {
	if h.beforeList != nil && (tool == adcp.ToolListTasks || tool == adcp.ToolTasksList) {
		h.beforeList()
	}
	return h.AdCP.Call(ctx, agentID, tool, req)
}

type env struct {
	t      *testing.T
	db     *dynamodb.Client
	table  string
	store  *ledger.Store
	seller *adcptest.Seller
	client *adcp.Client
	api    *hookAdCP
	clock  *clocktest.Clock
	out    bytes.Buffer // EMF lines of every run
	tasks  stagetest.Completer
}

func newEnv(t *testing.T, so adcptest.SellerOptions) *env {
	t.Helper()
	db, table := dynamotest.Start(t)
	clk := clocktest.Real()
	store := ledger.New(db, table)
	store.Now = clk.Now
	so.Now = clk.Now
	seller := adcptest.NewSeller(so)
	seller.Start()
	t.Cleanup(seller.Close)
	reg, err := adcp.NewRegistry(adcp.RegistryConfig{Agents: []adcp.Agent{
		{ID: sellerID, Role: adcp.RoleSeller, MCPURL: seller.URL(), CredentialRef: "cred/seller",
			Webhook: &adcp.WebhookConfig{Mode: adcp.WebhookHMAC, HMACSecretRef: "hmac/seller"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	v, err := schemaValidator()
	if err != nil {
		t.Fatal(err)
	}
	client, err := adcp.New(adcp.Options{Registry: reg, Validator: v, CallTimeout: 5 * time.Second, Now: clk.Now,
		Credentials: adcp.CredentialsFunc(func(context.Context, string) (string, error) { return adcptest.DefaultSellerToken, nil })})
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, db: db, table: table, store: store, seller: seller, client: client, api: &hookAdCP{AdCP: client}, clock: clk}
}

// cfg is the sweep's configuration in the tests; change it before calling svc.
func (e *env) cfg() reconcile.Config {
	var mu sync.Mutex
	return reconcile.Config{
		Ledger: e.store, AdCP: e.api,
		Tasks:      &e.tasks,
		Sellers:    func(context.Context) ([]string, error) { return []string{sellerID}, nil },
		StaleAfter: 30 * time.Minute, DeadlineSlack: 15 * time.Minute,
		Metrics: &lockedWriter{w: &e.out, mu: &mu}, Now: e.clock.Now,
		Deadline: func(context.Context) time.Time { return e.clock.Now().Add(time.Hour) },
		// The run's budget (Deadline) governs unless a test bounds a shard itself.
		ShardBudget: 2 * time.Hour,
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (e *env) svc(cfg reconcile.Config) *reconcile.Service {
	e.t.Helper()
	s, err := reconcile.New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

func (e *env) run(cfg reconcile.Config) reconcile.Summary {
	e.t.Helper()
	sum, err := e.svc(cfg).Run(context.Background())
	if err != nil {
		e.t.Fatalf("run: %v", err)
	}
	return sum
}

func (e *env) completed() []stagetest.Completion { return e.tasks.Completed() }

// createRequest is a schema-valid create_media_buy whose context carries the operation id, as
// the create stage sends it; sim drives the simulated seller.
func createRequest(opID, sim string) map[string]any {
	return map[string]any{
		"account": map[string]any{"account_id": "acc_1"}, "brand": map[string]any{"domain": "acme.example"},
		"start_time": "asap", "end_time": "2030-01-31T23:59:59Z", "po_number": "PO-" + opID,
		"packages": []any{map[string]any{"product_id": "prod_1", "pricing_option_id": "cpm_1", "budget": 5000}},
		"context":  map[string]any{"operation_id": opID, "sim": sim},
	}
}

// sellerTask places an async create_media_buy at the seller and returns its task id.
func (e *env) sellerTask(opID string) string {
	e.t.Helper()
	in, err := adcp.NewIntent(adcp.ToolCreateMediaBuy, createRequest(opID, "submitted"), e.clock.Now())
	if err != nil {
		e.t.Fatal(err)
	}
	res, err := e.client.CreateMediaBuy(context.Background(), sellerID, in)
	if err != nil {
		e.t.Fatal(err)
	}
	if res.TaskID == "" {
		e.t.Fatalf("create answered %s without a task", res.Status)
	}
	return res.TaskID
}

// newOp stores an operation waiting on taskID (status st) with a parked task token.
func (e *env) newOp(st workflow.Status, taskID string, mutate func(*record.Operation)) *record.Operation {
	e.t.Helper()
	id := fmt.Sprintf("mb-rec-%d", opSeq.Add(1))
	req, err := json.Marshal(map[string]any{"seller_id": sellerID, "media_buy": createRequest(id, "submitted")})
	if err != nil {
		e.t.Fatal(err)
	}
	op := record.Operation{ID: id, Tenant: tenant, Status: st, SellerID: sellerID, SellerTaskID: taskID,
		BudgetTotal: "5000.00", Currency: "USD", Request: req, ExecutionName: workflow.ExecutionName(id, 0)}
	if mutate != nil {
		mutate(&op)
	}
	ctx := context.Background()
	if _, err := e.store.CreateOperation(ctx, op); err != nil {
		e.t.Fatal(err)
	}
	got, err := e.store.SetTaskToken(ctx, tenant, id, "token-"+id)
	if err != nil {
		e.t.Fatal(err)
	}
	return got
}

func (e *env) op(id string) *record.Operation {
	e.t.Helper()
	op, err := e.store.GetOperation(context.Background(), tenant, id)
	if err != nil {
		e.t.Fatal(err)
	}
	return op
}

func (e *env) events(id string) []record.Event {
	e.t.Helper()
	page, err := e.store.ListEvents(context.Background(), tenant, id, 200, "")
	if err != nil {
		e.t.Fatal(err)
	}
	return page.Items
}

// orphanEvents reads the orphan pseudo-operation's events straight from the table, as the
// runbook's query does.
func (e *env) orphanEvents() []map[string]types.AttributeValue {
	e.t.Helper()
	out, err := e.db.Query(context.Background(), &dynamodb.QueryInput{
		TableName:              aws.String(e.table),
		KeyConditionExpression: aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": &types.AttributeValueMemberS{Value: "TENANT#" + reconcile.OrphanTenant + "#OP#" + reconcile.OrphanOperation},
		},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out.Items
}

// emf parses every metric line written so far and returns value per (metric, dimension value).
func (e *env) emf() map[string]float64 {
	e.t.Helper()
	got := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(e.out.Bytes()))
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			e.t.Fatalf("EMF line %q: %v", sc.Text(), err)
		}
		aws, _ := line["_aws"].(map[string]any)
		if _, ok := aws["Timestamp"].(float64); !ok {
			e.t.Fatalf("no _aws.Timestamp in %s", sc.Text())
		}
		dirs, _ := aws["CloudWatchMetrics"].([]any)
		if len(dirs) == 0 {
			e.t.Fatalf("no CloudWatchMetrics in %s", sc.Text())
		}
		for _, d := range dirs {
			dir := d.(map[string]any)
			if dir["Namespace"] != metrics.Namespace {
				e.t.Errorf("Namespace %v", dir["Namespace"])
			}
			sets, _ := dir["Dimensions"].([]any)
			if len(sets) != 1 {
				e.t.Fatalf("Dimensions %v", dir["Dimensions"])
			}
			var dimVal string
			for _, k := range sets[0].([]any) {
				v, ok := line[k.(string)].(string)
				if !ok {
					e.t.Errorf("dimension %v is not a root string", k)
				}
				dimVal += v
			}
			for _, m := range dir["Metrics"].([]any) {
				name := m.(map[string]any)["Name"].(string)
				switch v := line[name].(type) {
				case float64:
					got[name+"/"+dimVal] += v
				case []any:
					got[name+"/"+dimVal] += float64(len(v))
				default:
					e.t.Errorf("metric %s value %v at the root", name, line[name])
				}
			}
		}
	}
	return got
}

// schemaValidator compiles the embedded AdCP schemas once for the package's tests.
var schemaValidator = sync.OnceValues(func() (*adcpvalidate.Validator, error) {
	schemas, err := adcpschemas.FS()
	if err != nil {
		return nil, err
	}
	return adcpvalidate.NewValidator(schemas)
})
