package submit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/buy"
	"github.com/buyflow/buyflow/internal/buytest"
	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/workflow"
)

// recordingExecutions is a fake Step Functions with Standard workflows' naming rule: a start
// with the name and input of an existing execution returns that execution; the same name with
// another input fails. starts holds one entry per execution; calls counts StartExecution calls.
type recordingExecutions struct {
	mu     sync.Mutex
	starts map[string][]workflow.ExecutionInput
	calls  int
	fail   error
}

func (r *recordingExecutions) Start(_ context.Context, name string, input any) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.fail != nil {
		return "", r.fail
	}
	if r.starts == nil {
		r.starts = map[string][]workflow.ExecutionInput{}
	}
	in := input.(workflow.ExecutionInput)
	if prev, ok := r.starts[name]; ok {
		if prev[0] != in {
			return "", fmt.Errorf("execution %s already exists with another input", name)
		}
		return "arn:exec:" + name, nil
	}
	r.starts[name] = append(r.starts[name], in)
	return "arn:exec:" + name, nil
}

func newService(t *testing.T) (*Service, *ledger.Store, *recordingExecutions) {
	t.Helper()
	client, table := dynamotest.Start(t)
	store := ledger.New(client, table)
	execs := &recordingExecutions{}
	placer := buy.NewPlacer(store, buy.PlaceConfig{Run: workflow.DefaultRunConfig(), StateMachineARN: "arn:aws:states:us-east-1:000000000000:stateMachine:MediaBuy"})
	return New(store, execs, placer, buytest.Agents, buytest.Schemas(t)), store, execs
}

var acme = buy.Caller{Tenant: "acme", Principal: "arn:aws:sts::111122223333:assumed-role/Buyer/alice"}

func TestSubmitCreatesOperationAndStartsExecution(t *testing.T) {
	svc, store, execs := newService(t)
	ctx := context.Background()
	out, err := svc.Submit(ctx, acme, "key-000001", buytest.Marshal(t, buytest.Example(t, "media-buy.json")))
	if err != nil {
		t.Fatal(err)
	}
	if out.OperationID != buy.OperationID("acme", "key-000001") || out.Replayed || out.Links.Self != "/v1/media-buys/"+out.OperationID {
		t.Fatalf("out = %+v", out)
	}
	op, err := store.GetOperation(ctx, "acme", out.OperationID)
	if err != nil {
		t.Fatal(err)
	}
	if op.Status != workflow.StatusRequested || op.BudgetTotal != "20000.50" || op.Currency != "USD" ||
		op.Requester != acme.Principal || op.PlanID != "plan-spring-2027" || op.SellerID != "sim-seller" {
		t.Fatalf("op = %+v", op)
	}
	in := execs.starts[out.OperationID]
	if len(in) != 1 || in[0].OperationID != out.OperationID || in[0].Tenant != "acme" || in[0].StateMachineARN == "" {
		t.Fatalf("starts = %+v", execs.starts)
	}
	v, err := svc.Get(ctx, "acme", out.OperationID)
	if err != nil || v.Status != "requested" || len(v.MediaBuy) == 0 {
		t.Fatalf("Get = %+v, %v", v, err)
	}
	// The runbook finds a buy's executions by this name: the one submit started.
	if _, started := execs.starts[v.ExecutionName]; !started || len(execs.starts) != 1 {
		t.Fatalf("execution name %q, submit started %v", v.ExecutionName, execs.starts)
	}
}

func TestSubmitIsIdempotent(t *testing.T) {
	svc, _, execs := newService(t)
	ctx := context.Background()
	body := buytest.Marshal(t, buytest.Example(t, "media-buy.json"))
	first, err := svc.Submit(ctx, acme, "key-000002", body)
	if err != nil {
		t.Fatal(err)
	}
	again, err := svc.Submit(ctx, acme, "key-000002", body)
	if err != nil {
		t.Fatal(err)
	}
	if again.OperationID != first.OperationID || !again.Replayed {
		t.Fatalf("again = %+v", again)
	}
	other := buytest.Example(t, "media-buy.json")
	other["currency"] = "EUR"
	_, err = svc.Submit(ctx, acme, "key-000002", buytest.Marshal(t, other))
	var re *buy.RequestError
	if !errors.As(err, &re) || re.Status != 422 || re.Code != "idempotency_key_reused" {
		t.Fatalf("other body: %v", err)
	}
	if n := len(execs.starts[first.OperationID]); n != 1 {
		t.Fatalf("execution started %d times", n)
	}
}

func TestConcurrentIdenticalSubmitsMakeOneOperation(t *testing.T) {
	svc, store, execs := newService(t)
	ctx := context.Background()
	body := buytest.Marshal(t, buytest.Example(t, "media-buy.json"))
	var wg sync.WaitGroup
	results := make([]error, 20)
	ids := make([]string, 20)
	for i := range 20 {
		wg.Go(func() {
			out, err := svc.Submit(ctx, acme, "key-concurrent", body)
			results[i], ids[i] = err, out.OperationID
		})
	}
	wg.Wait()
	want := buy.OperationID("acme", "key-concurrent")
	// Every attempt answers with the one operation: one that finds the claim in progress runs
	// the converging steps itself instead of making the client wait.
	for i, err := range results {
		if err != nil {
			t.Fatalf("submit %d: %v", i, err)
		}
		if ids[i] != want {
			t.Fatalf("submit %d got %s", i, ids[i])
		}
	}
	if len(execs.starts) != 1 || len(execs.starts[want]) != 1 {
		t.Fatalf("starts = %v", execs.starts)
	}
	page, err := store.ListOperations(ctx, "acme", record.ListOptions{})
	if err != nil || len(page.Items) != 1 {
		t.Fatalf("operations = %d, %v", len(page.Items), err)
	}
}

func TestRefusedSubmitLeavesNothing(t *testing.T) {
	svc, store, execs := newService(t)
	ctx := context.Background()
	bad := buytest.Example(t, "media-buy.json")
	delete(buytest.MB(bad), "brand")
	if _, err := svc.Submit(ctx, acme, "key-refused", buytest.Marshal(t, bad)); err == nil {
		t.Fatal("accepted an invalid buy")
	}
	page, err := store.ListOperations(ctx, "acme", record.ListOptions{})
	if err != nil || len(page.Items) != 0 || len(execs.starts) != 0 {
		t.Fatalf("refusal left %d operations, %d starts (%v)", len(page.Items), len(execs.starts), err)
	}
	// The key was never claimed: a corrected body under the same key goes through.
	if _, err := svc.Submit(ctx, acme, "key-refused", buytest.Marshal(t, buytest.Example(t, "media-buy.json"))); err != nil {
		t.Fatalf("corrected resubmit: %v", err)
	}
}

func TestStartFailureFreesTheKeyAndRetryConverges(t *testing.T) {
	svc, store, execs := newService(t)
	ctx := context.Background()
	body := buytest.Marshal(t, buytest.Example(t, "media-buy.json"))
	execs.fail = errors.New("states: throttled")
	if _, err := svc.Submit(ctx, acme, "key-retry", body); err == nil {
		t.Fatal("submit succeeded while the start failed")
	}
	execs.fail = nil
	out, err := svc.Submit(ctx, acme, "key-retry", body)
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if out.Replayed || out.OperationID != buy.OperationID("acme", "key-retry") {
		t.Fatalf("retry = %+v", out)
	}
	page, _ := store.ListOperations(ctx, "acme", record.ListOptions{})
	if len(page.Items) != 1 {
		t.Fatalf("%d operations after a retry", len(page.Items))
	}
}

func TestOneActiveBuyPerPONumber(t *testing.T) {
	svc, _, _ := newService(t)
	ctx := context.Background()
	if _, err := svc.Submit(ctx, acme, "key-po-1", buytest.Marshal(t, buytest.Example(t, "media-buy.json"))); err != nil {
		t.Fatal(err)
	}
	second := buytest.Example(t, "media-buy.json")
	buytest.MB(second)["context"] = map[string]any{"campaign": "another"}
	_, err := svc.Submit(ctx, acme, "key-po-2", buytest.Marshal(t, second))
	var re *buy.RequestError
	if !errors.As(err, &re) || re.Status != 409 || re.Code != "active_buy_exists" {
		t.Fatalf("second buy with the same PO: %v", err)
	}
	// Another tenant may use the same PO number.
	if _, err := svc.Submit(ctx, buy.Caller{Tenant: "globex", Principal: "p"}, "key-po-2", buytest.Marshal(t, second)); err != nil {
		t.Fatalf("other tenant: %v", err)
	}
}

func TestReadsAreTenantScoped(t *testing.T) {
	svc, _, _ := newService(t)
	ctx := context.Background()
	out, err := svc.Submit(ctx, acme, "key-scope", buytest.Marshal(t, buytest.Example(t, "media-buy.json")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Get(ctx, "globex", out.OperationID); !errors.Is(err, buy.ErrNotFound) {
		t.Fatalf("cross-tenant Get: %v", err)
	}
	if _, err := svc.Events(ctx, "globex", out.OperationID, "", 10); !errors.Is(err, buy.ErrNotFound) {
		t.Fatalf("cross-tenant Events: %v", err)
	}
	page, err := svc.List(ctx, "globex", ListQuery{})
	if err != nil || len(page.Items) != 0 {
		t.Fatalf("cross-tenant List: %d, %v", len(page.Items), err)
	}
	evs, err := svc.Events(ctx, "acme", out.OperationID, "", 10)
	if err != nil || len(evs.Items) == 0 {
		t.Fatalf("own events: %+v, %v", evs, err)
	}
}

// TestEventsKeepReasonAndDetail: an event with both a reason and details shows both (a
// failed cancel's reason is the seller's error, its details the call).
func TestEventsKeepReasonAndDetail(t *testing.T) {
	svc, store, _ := newService(t)
	ctx := context.Background()
	out, err := svc.Submit(ctx, acme, "key-reason", buytest.Marshal(t, buytest.Example(t, "media-buy.json")))
	if err != nil {
		t.Fatal(err)
	}
	const reason = "adcp: update_media_buy at sim-seller: MEDIA_BUY_NOT_FOUND (terminal)"
	if err := store.AppendEvent(ctx, "acme", out.OperationID, record.Event{Type: "cancel", Actor: "seller:sim-seller",
		Reason: reason, Detail: json.RawMessage(`{"error_code":"MEDIA_BUY_NOT_FOUND"}`)}); err != nil {
		t.Fatal(err)
	}
	evs, err := svc.Events(ctx, "acme", out.OperationID, "", 50)
	if err != nil {
		t.Fatal(err)
	}
	last := evs.Items[len(evs.Items)-1]
	if last.Type != "cancel" || last.Reason != reason || !strings.Contains(string(last.Detail), "MEDIA_BUY_NOT_FOUND") {
		t.Fatalf("event %+v", last)
	}
}

func TestListFiltersAndPages(t *testing.T) {
	svc, _, _ := newService(t)
	ctx := context.Background()
	for i := range 3 {
		m := buytest.Example(t, "media-buy.json")
		buytest.MB(m)["po_number"] = fmt.Sprintf("PO-%d", i)
		if _, err := svc.Submit(ctx, acme, fmt.Sprintf("key-list-%d", i), buytest.Marshal(t, m)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	page, err := svc.List(ctx, "acme", ListQuery{Limit: 2, Status: "requested", Seller: "sim-seller"})
	if err != nil || len(page.Items) != 2 || page.NextCursor == "" {
		t.Fatalf("page 1 = %+v, %v", page, err)
	}
	rest, err := svc.List(ctx, "acme", ListQuery{Limit: 2, Cursor: page.NextCursor, Status: "requested", Seller: "sim-seller"})
	if err != nil || len(rest.Items) != 1 {
		t.Fatalf("page 2 = %+v, %v", rest, err)
	}
	if _, err := svc.List(ctx, "acme", ListQuery{Status: "done"}); err == nil {
		t.Fatal("accepted an unknown status")
	}
	var re *buy.RequestError
	if _, err := svc.List(ctx, "acme", ListQuery{Cursor: "garbage"}); !errors.As(err, &re) || re.Code != "invalid_cursor" {
		t.Fatalf("bad cursor: %v", err)
	}
	_ = json.Valid
}

// A first attempt that claimed the key and died (or is stalled) does not make the retry wait:
// the retry runs the converging steps and answers with the same operation.
func TestRetryAfterAStalledFirstAttemptConverges(t *testing.T) {
	svc, store, execs := newService(t)
	ctx := context.Background()
	body := buytest.Marshal(t, buytest.Example(t, "media-buy.json"))
	req, err := buy.ParseSubmit(context.Background(), body, buytest.Agents, buytest.Schemas(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Claim(ctx, "acme", "key-stalled", req.PayloadHash); err != nil {
		t.Fatalf("the stalled attempt's claim: %v", err)
	}
	out, err := svc.Submit(ctx, acme, "key-stalled", body)
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	if out.OperationID != buy.OperationID("acme", "key-stalled") {
		t.Fatalf("retry = %+v", out)
	}
	if _, err := store.GetOperation(ctx, "acme", out.OperationID); err != nil {
		t.Fatalf("operation: %v", err)
	}
	if len(execs.starts[out.OperationID]) != 1 {
		t.Fatalf("executions = %v", execs.starts)
	}
	// Another body under the held key is still refused.
	other := buytest.Example(t, "media-buy.json")
	other["currency"] = "EUR"
	var re *buy.RequestError
	if _, err := svc.Submit(ctx, acme, "key-stalled", buytest.Marshal(t, other)); !errors.As(err, &re) || re.Status != 422 {
		t.Fatalf("other body: %v", err)
	}
}

// TestAmountRefusalsLeaveNothing submits every amount refusal through the use case: each is
// refused with its code and field, leaves no operation and starts no execution (nothing can be
// approved or spent), and leaves its Idempotency-Key free for the corrected buy, which then
// records the amount the seller is asked to commit.
func TestAmountRefusalsLeaveNothing(t *testing.T) {
	svc, store, execs := newService(t)
	ctx := context.Background()
	for i, tt := range buytest.AmountRefusals {
		body := []byte(tt.Raw)
		if tt.Edit != nil {
			m := buytest.Example(t, "media-buy.json")
			tt.Edit(m)
			body = buytest.Marshal(t, m)
		}
		_, err := svc.Submit(ctx, acme, fmt.Sprintf("key-amount-%d", i), body)
		var re *buy.RequestError
		if !errors.As(err, &re) || re.Code != tt.Code || re.Field != tt.Field {
			t.Errorf("%s: err = %v, want %s at %s", tt.Name, err, tt.Code, tt.Field)
		}
	}
	page, err := store.ListOperations(ctx, "acme", record.ListOptions{})
	if err != nil || len(page.Items) != 0 || execs.calls != 0 {
		t.Fatalf("refusals left %d operations, %d starts (%v)", len(page.Items), execs.calls, err)
	}
	out, err := svc.Submit(ctx, acme, "key-amount-0", buytest.Marshal(t, buytest.Example(t, "media-buy.json")))
	if err != nil {
		t.Fatalf("corrected buy under a refused key: %v", err)
	}
	op, err := store.GetOperation(ctx, "acme", out.OperationID)
	if err != nil || op.BudgetTotal != "20000.50" || op.Currency != "USD" {
		t.Fatalf("operation = %+v, %v", op, err)
	}
}

// TestSellerRequiringSignaturesWithoutAKeyIsRefused: a seller whose capabilities require
// create_media_buy signed, while the deployment has no request-signing key, gets no buy: a 422
// naming the seller and the missing key, nothing recorded, no execution started.
func TestSellerRequiringSignaturesWithoutAKeyIsRefused(t *testing.T) {
	client, table := dynamotest.Start(t)
	store := ledger.New(client, table)
	execs := &recordingExecutions{}
	lookup := func(ctx context.Context, id string) (buy.Agent, bool, error) {
		a, ok, err := buytest.Agents(ctx, id)
		a.Unsignable = id == "sim-seller"
		return a, ok, err
	}
	svc := New(store, execs, buy.NewPlacer(store, buy.PlaceConfig{Run: workflow.DefaultRunConfig(), StateMachineARN: "arn:sm"}), lookup, buytest.Schemas(t))
	_, err := svc.Submit(context.Background(), acme, "key-1", buytest.Marshal(t, buytest.Example(t, "media-buy.json")))
	var re *buy.RequestError
	if !errors.As(err, &re) || re.Status != 422 || re.Code != "seller_requires_signing" || re.Field != "/seller_id" ||
		!strings.Contains(re.Message, `"sim-seller"`) || !strings.Contains(re.Message, "request-signing key") {
		t.Fatalf("buy at a seller requiring signatures: %v", err)
	}
	page, err := store.ListOperations(context.Background(), "acme", record.ListOptions{})
	if err != nil || len(page.Items) != 0 || len(execs.starts) != 0 {
		t.Fatalf("refusal left %d operations, %d starts (%v)", len(page.Items), len(execs.starts), err)
	}
}

// TestDisabledSellerRefusesNewBuysAndReplaysAccepted: a buy accepted before its seller was
// disabled is replayed to its retries; a new buy is refused with a 422 that names the field,
// and leaves nothing behind (its key goes through once the seller is enabled again).
func TestDisabledSellerRefusesNewBuysAndReplaysAccepted(t *testing.T) {
	client, table := dynamotest.Start(t)
	store := ledger.New(client, table)
	execs := &recordingExecutions{}
	var disabled atomic.Bool
	lookup := func(ctx context.Context, id string) (buy.Agent, bool, error) {
		a, ok, err := buytest.Agents(ctx, id)
		if id == "sim-seller" {
			a.Disabled = disabled.Load()
		}
		return a, ok, err
	}
	svc := New(store, execs, buy.NewPlacer(store, buy.PlaceConfig{Run: workflow.DefaultRunConfig(), StateMachineARN: "arn:sm"}), lookup, buytest.Schemas(t))
	ctx := context.Background()
	body := buytest.Marshal(t, buytest.Example(t, "media-buy.json"))
	first, err := svc.Submit(ctx, acme, "key-before", body)
	if err != nil {
		t.Fatal(err)
	}
	disabled.Store(true)
	again, err := svc.Submit(ctx, acme, "key-before", body)
	if err != nil || !again.Replayed || again.OperationID != first.OperationID {
		t.Fatalf("replay after disable = %+v, %v", again, err)
	}
	other := buytest.Example(t, "media-buy.json")
	buytest.MB(other)["po_number"] = "PO-OTHER"
	_, err = svc.Submit(ctx, acme, "key-after", buytest.Marshal(t, other))
	var re *buy.RequestError
	if !errors.As(err, &re) || re.Status != 422 || re.Code != "seller_disabled" || re.Field != "/seller_id" {
		t.Fatalf("new buy at a disabled seller: %v", err)
	}
	page, err := store.ListOperations(ctx, "acme", record.ListOptions{})
	if err != nil || len(page.Items) != 1 || len(execs.starts) != 1 {
		t.Fatalf("refusal left %d operations, %d starts (%v)", len(page.Items), len(execs.starts), err)
	}
	disabled.Store(false)
	if out, err := svc.Submit(ctx, acme, "key-after", buytest.Marshal(t, other)); err != nil || out.Replayed {
		t.Fatalf("the refused key after enabling = %+v, %v", out, err)
	}
}

// TestRegistryOutageIsNotAnUnknownSeller: a registry that cannot be read is a server-side
// failure, never a 4xx that tells the buyer their seller does not exist.
func TestRegistryOutageIsNotAnUnknownSeller(t *testing.T) {
	client, table := dynamotest.Start(t)
	lookup := func(context.Context, string) (buy.Agent, bool, error) {
		return buy.Agent{}, false, errors.New("table unavailable")
	}
	store := ledger.New(client, table)
	svc := New(store, &recordingExecutions{}, buy.NewPlacer(store, buy.PlaceConfig{Run: workflow.DefaultRunConfig(), StateMachineARN: "arn:sm"}), lookup, buytest.Schemas(t))
	_, err := svc.Submit(context.Background(), acme, "key-outage", buytest.Marshal(t, buytest.Example(t, "media-buy.json")))
	var re *buy.RequestError
	if err == nil || errors.As(err, &re) {
		t.Fatalf("outage answered %v", err)
	}
}

// A submit that asks to be told in Slack keeps the id on the buy, where its status events
// pick it up; one that does not ask keeps none.
func TestSubmitKeepsTheRequestersSlackID(t *testing.T) {
	svc, store, _ := newService(t)
	ctx := context.Background()
	body := buytest.Example(t, "media-buy.json")
	body["notify"] = map[string]any{"slack": "U024BE7LH"}
	out, err := svc.Submit(ctx, acme, "key-000002", buytest.Marshal(t, body))
	if err != nil {
		t.Fatal(err)
	}
	op, err := store.GetOperation(ctx, "acme", out.OperationID)
	if err != nil || op.NotifySlack != "U024BE7LH" {
		t.Fatalf("op = %+v, %v", op, err)
	}
	other := buytest.Example(t, "media-buy.json")
	buytest.MB(other)["po_number"] = "PO-2027-0043"
	quiet, err := svc.Submit(ctx, acme, "key-000003", buytest.Marshal(t, other))
	if err != nil {
		t.Fatal(err)
	}
	if op, err := store.GetOperation(ctx, "acme", quiet.OperationID); err != nil || op.NotifySlack != "" {
		t.Fatalf("op = %+v, %v", op, err)
	}
}
