package webhook_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/stagetest"
	"github.com/buyflow/buyflow/internal/webhook"
	"github.com/buyflow/buyflow/internal/webhookroute"
	"github.com/buyflow/buyflow/internal/workflow"
)

// hookedAPI runs before ahead of every table request the service sends.
type hookedAPI struct {
	ledger.API
	before func()
}

func (h hookedAPI) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	h.before()
	return h.API.PutItem(ctx, in, o...)
}

func (h hookedAPI) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	h.before()
	return h.API.UpdateItem(ctx, in, o...)
}

func (h hookedAPI) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	h.before()
	return h.API.DeleteItem(ctx, in, o...)
}

func (h hookedAPI) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	h.before()
	return h.API.GetItem(ctx, in, o...)
}

func (h hookedAPI) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	h.before()
	return h.API.Query(ctx, in, o...)
}

func (h hookedAPI) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	h.before()
	return h.API.TransactWriteItems(ctx, in, o...)
}

// countingAPI counts the requests the service sends to the table.
type countingAPI struct {
	hookedAPI
	n atomic.Int64
}

func newCountingAPI(api ledger.API) *countingAPI {
	c := &countingAPI{}
	c.hookedAPI = hookedAPI{API: api, before: func() { c.n.Add(1) }}
	return c
}

// wakeCounter notes how many table requests the service had sent when it woke the workflow.
type wakeCounter struct {
	stagetest.Completer
	api    *countingAPI
	atWake int64
}

func (w *wakeCounter) Succeed(ctx context.Context, token string, output any) error {
	w.atWake = w.api.n.Load()
	return w.Completer.Succeed(ctx, token, output)
}

// newCountedEnv is newEnv with the service over a table client that counts its requests and a
// task completer that notes how many were sent when it woke the workflow; routes opens the
// URLs' routes (nil: none).
func newCountedEnv(t *testing.T, routes *webhookroute.Secret) (*env, *countingAPI, *wakeCounter) {
	t.Helper()
	var cfg webhook.Config
	e := newEnvWith(t, func(c *webhook.Config) { cfg = *c })
	api := newCountingAPI(e.api)
	tasks := &wakeCounter{api: api}
	counted := ledger.New(api, e.table)
	counted.Now = e.clock.Now
	cfg.Ledger, cfg.Operations, cfg.Tasks = counted, counted, tasks
	if routes != nil {
		cfg.Routes = routes
	}
	svc, err := webhook.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	return e, api, tasks
}

// TestWakeWaitsOnlyForTheUpdate: the seller's terminal update reaches the workflow after the
// requests that record it (find the operation's owner, read it while the receipt is claimed,
// move the operation taking the parked token in the same write), not after the receipt's
// bookkeeping, which follows the wake. Each table request is on the path the webhook-to-resume
// budget measures, so their number is pinned (TestOperationIsReadWhileTheReceiptIsClaimed
// pins which of them share a round trip): a seller's later webhook for the same buy (working,
// then completed) finds the owner without the index (ledger's opOwners).
func TestWakeWaitsOnlyForTheUpdate(t *testing.T) {
	e, api, tasks := newCountedEnv(t, nil)
	// The index read, the operation and the receipt's claim together, the transition that takes
	// the token; the receipt's completion follows the wake.
	const firstBeforeWake = 4
	e.op("op-1", sellerHMAC, true)
	e.op("op-2", sellerHMAC, true)
	for _, c := range []struct {
		id, status string
		beforeWake int64
	}{
		{"op-1", "completed", firstBeforeWake},
		{"op-2", "working", -1},                    // not a decision: no wake
		{"op-2", "completed", firstBeforeWake - 1}, // the same buy again: no index read
	} {
		api.n.Store(0)
		woken := len(tasks.Completed())
		resp := e.deliver(c.id, sellerHMAC, payload(c.id, c.status, key(c.id+c.status)), signOpts{})
		if resp.StatusCode != http.StatusOK || outcome(t, resp) != webhook.OutcomeApplied {
			t.Fatalf("%s %s: answer = %d %s", c.id, c.status, resp.StatusCode, resp.Body)
		}
		if !e.hasReceipt(sellerHMAC, key(c.id+c.status)) {
			t.Errorf("%s %s: no receipt stored", c.id, c.status)
		}
		if c.beforeWake < 0 {
			if len(tasks.Completed()) != woken {
				t.Errorf("%s %s woke the workflow", c.id, c.status)
			}
			continue
		}
		if len(tasks.Completed()) != woken+1 {
			t.Fatalf("%s %s: %d wakes, want 1", c.id, c.status, len(tasks.Completed())-woken)
		}
		if total := api.n.Load(); tasks.atWake >= total {
			t.Errorf("%s %s: the wake came after all %d table requests; want the receipt's completion after it", c.id, c.status, total)
		}
		if tasks.atWake != c.beforeWake {
			t.Errorf("%s %s: the wake came after %d table requests, want %d", c.id, c.status, tasks.atWake, c.beforeWake)
		}
	}
}

// routeSecret is the route secret of TestRouteSparesTheIndexRead.
type routeSecret []byte

func (r routeSecret) Get(context.Context, string) ([]byte, error) { return r, nil }

// TestRouteSparesTheIndexRead: a URL the create stage registered carries the operation's
// route, and its deliveries find the owner there: one table request fewer before the wake, in
// sequence. A route that does not open for the URL's operation (garbage, another operation's,
// one sealed under a replaced secret) is no refusal: the owner is read from the index.
func TestRouteSparesTheIndexRead(t *testing.T) {
	routes := webhookroute.FromSecret(routeSecret("route secret of the webhook tests, 32 bytes at least"), "routes")
	e, api, tasks := newCountedEnv(t, routes)
	replaced, err := webhookroute.NewKey([]byte("the route secret before it was replaced, 32 bytes+"))
	if err != nil {
		t.Fatal(err)
	}
	route := func(k *webhookroute.Key, id, seller string) string {
		t.Helper()
		if k == nil {
			if k, err = routes.Key(e.ctx); err != nil {
				t.Fatal(err)
			}
		}
		r, err := k.Seal(id, record.OperationOwner{Tenant: tenant, SellerID: seller})
		if err != nil {
			t.Fatal(err)
		}
		return webhookroute.Param + "=" + r
	}
	for _, c := range []struct {
		name, id, seller, query string
		beforeWake              int64
	}{
		{"routed, 9421", "op-r1", seller9421, route(nil, "op-r1", seller9421), 3},
		{"routed, HMAC", "op-r2", sellerHMAC, route(nil, "op-r2", sellerHMAC), 3},
		{"another operation's route", "op-r3", seller9421, route(nil, "op-r1", seller9421), 4},
		{"a replaced secret's route", "op-r4", seller9421, route(replaced, "op-r4", seller9421), 4},
		{"garbage", "op-r5", sellerHMAC, webhookroute.Param + "=%FF%FE", 4},
		{"no route", "op-r6", sellerHMAC, "", 4},
	} {
		e.op(c.id, c.seller, true)
		api.n.Store(0)
		resp := e.deliver(c.id, c.seller, payload(c.id, "completed", key(c.id)), signOpts{query: c.query})
		if resp.StatusCode != http.StatusOK || outcome(t, resp) != webhook.OutcomeApplied {
			t.Fatalf("%s: answer = %d %s", c.name, resp.StatusCode, resp.Body)
		}
		if tasks.atWake != c.beforeWake {
			t.Errorf("%s: the wake came after %d table requests, want %d", c.name, tasks.atWake, c.beforeWake)
		}
		if op := e.get(c.id); op.Status != workflow.StatusCompleted || !e.hasReceipt(c.seller, key(c.id)) {
			t.Errorf("%s: operation %s, receipt stored %v", c.name, op.Status, e.hasReceipt(c.seller, key(c.id)))
		}
	}
}

// overlapAPI notes whether each read of an operation came before any receipt's claim was
// sent (readFirst). Armed to hold, it holds the read until a claim is sent, for at most
// overlapWait: a read that only goes on after it came first, since the claim was not sent
// meanwhile.
type overlapAPI struct {
	ledger.API
	mu        sync.Mutex
	claimed   chan struct{} // closed by a receipt's claim; a fresh one per delivery (arm)
	hold      bool
	readFirst atomic.Bool
}

// overlapWait only ends a read that nothing would release; it measures nothing.
const overlapWait = 10 * time.Second

func (o *overlapAPI) arm(hold bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.claimed, o.hold = make(chan struct{}), hold
	o.readFirst.Store(false)
}

func (o *overlapAPI) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if sortKey(in.Item) == "RECEIPT" {
		o.mu.Lock()
		select {
		case <-o.claimed:
		default:
			close(o.claimed)
		}
		o.mu.Unlock()
	}
	return o.API.PutItem(ctx, in, opts...)
}

func (o *overlapAPI) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if sortKey(in.Key) == "OP" {
		o.mu.Lock()
		claimed, hold := o.claimed, o.hold
		o.mu.Unlock()
		select {
		case <-claimed:
		case <-o.holdFor(hold):
			o.readFirst.Store(true)
		}
	}
	return o.API.GetItem(ctx, in, opts...)
}

// holdFor is a channel that ends a read's hold: after overlapWait when held, at once otherwise.
func (o *overlapAPI) holdFor(hold bool) <-chan time.Time {
	if hold {
		return time.After(overlapWait)
	}
	done := make(chan time.Time, 1)
	done <- time.Time{}
	return done
}

func sortKey(item map[string]types.AttributeValue) string {
	if sk, ok := item["sk"].(*types.AttributeValueMemberS); ok {
		return sk.Value
	}
	return ""
}

// TestOperationIsReadWhileTheReceiptIsClaimed: a task update's operation is read in the same
// round trip as its receipt's claim (and its nonce's record), since the operation index names
// the seller whose keys verify it. An index item written before it named the seller still
// works, reading the operation first; so does a delivery report, whose checks need the
// operation before anything is written.
func TestOperationIsReadWhileTheReceiptIsClaimed(t *testing.T) {
	var cfg webhook.Config
	e := newEnvWith(t, func(c *webhook.Config) { cfg = *c })
	api := &overlapAPI{API: e.api}
	store := ledger.New(api, e.table)
	store.Now = e.clock.Now
	cfg.Ledger, cfg.Operations = store, store
	svc, err := webhook.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	e.op("op-new", seller9421, true)
	e.op("op-old", seller9421, true)
	// op-old's index item as one written before the seller was kept.
	if _, err := e.api.UpdateItem(e.ctx, &dynamodb.UpdateItemInput{TableName: aws.String(e.table),
		Key: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "OPIDX#op-old"}, "sk": &types.AttributeValueMemberS{Value: "OPIDX"},
		},
		UpdateExpression: aws.String("REMOVE seller_id"), ConditionExpression: aws.String("attribute_exists(seller_id)"),
	}); err != nil {
		t.Fatalf("the index item names no seller to remove: %v", err)
	}
	for _, c := range []struct {
		id          string
		wantOverlap bool
	}{{"op-new", true}, {"op-old", false}} {
		api.arm(c.wantOverlap) // the old index's read comes first: nothing to hold it for
		resp := e.deliver(c.id, seller9421, payload(c.id, "completed", key(c.id)), signOpts{})
		if resp.StatusCode != http.StatusOK || outcome(t, resp) != webhook.OutcomeApplied {
			t.Fatalf("%s: answer = %d %s", c.id, resp.StatusCode, resp.Body)
		}
		if overlapped := !api.readFirst.Load(); overlapped != c.wantOverlap {
			t.Errorf("%s: the operation's read overlapped the receipt's claim: %v, want %v", c.id, overlapped, c.wantOverlap)
		}
		if op := e.get(c.id); op.Status != workflow.StatusCompleted || !e.hasReceipt(seller9421, key(c.id)) {
			t.Errorf("%s: operation %s, receipt stored %v", c.id, op.Status, e.hasReceipt(seller9421, key(c.id)))
		}
	}
}
