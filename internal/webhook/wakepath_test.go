package webhook_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/stagetest"
	"github.com/buyflow/buyflow/internal/webhook"
)

// countingAPI counts the requests the service sends to the table.
type countingAPI struct {
	ledger.API
	n atomic.Int64
}

func (c *countingAPI) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	c.n.Add(1)
	return c.API.PutItem(ctx, in, o...)
}

func (c *countingAPI) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.n.Add(1)
	return c.API.UpdateItem(ctx, in, o...)
}

func (c *countingAPI) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.n.Add(1)
	return c.API.GetItem(ctx, in, o...)
}

func (c *countingAPI) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	c.n.Add(1)
	return c.API.Query(ctx, in, o...)
}

func (c *countingAPI) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.n.Add(1)
	return c.API.TransactWriteItems(ctx, in, o...)
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

// TestWakeWaitsOnlyForTheUpdate: the seller's terminal update reaches the workflow after the
// requests that record it (find the operation, claim the receipt, move the operation taking the
// parked token in the same write), not after the receipt's bookkeeping, which follows the
// wake. Each table request is a round trip on the path the webhook-to-resume budget measures,
// so their number is pinned: a seller's later webhook for the same buy (working, then
// completed) finds the operation without its index (ledger's opTenants).
func TestWakeWaitsOnlyForTheUpdate(t *testing.T) {
	var cfg webhook.Config
	e := newEnvWith(t, func(c *webhook.Config) { cfg = *c })
	// The same service over a table client that counts its requests.
	api := &countingAPI{API: e.api}
	tasks := &wakeCounter{api: api}
	counted := ledger.New(api, e.table)
	counted.Now = e.clock.Now
	cfg.Ledger, cfg.Operations, cfg.Tasks = counted, counted, tasks
	svc, err := webhook.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.svc = svc
	// The index read, the operation, the receipt's claim, the transition that takes the token;
	// the receipt's completion follows the wake.
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
