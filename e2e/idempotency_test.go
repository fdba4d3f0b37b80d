package e2e

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/apiclient"
)

// The same Idempotency-Key and body name the same operation; another body is refused.
func TestDuplicateSubmitSameKey(t *testing.T) {
	c := begin(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	key := "key-" + randomID(t)
	b := buy{PO: po(t), Sim: "async_complete"}
	first, _, err := c.Submit(ctx, key, b.body(t))
	if err != nil {
		t.Fatal(err)
	}
	again, _, err := c.Submit(ctx, key, b.body(t))
	if err != nil {
		t.Fatal(err)
	}
	if again.OperationID != first.OperationID || !again.Replayed {
		t.Errorf("retry answered %+v, want operation %s replayed", again, first.OperationID)
	}
	other := buy{PO: b.PO, Budgets: []float64{3100, 2000}, Sim: b.Sim}
	_, _, err = c.Submit(ctx, key, other.body(t))
	if got := apiclient.StatusOf(err); got != http.StatusUnprocessableEntity {
		t.Errorf("same key, other body: %v, want HTTP 422", err)
	}
	finished(t, c, first.OperationID, "completed")
}

// Twenty identical submits at once start one operation and one execution.
func TestConcurrentIdenticalSubmits(t *testing.T) {
	c := begin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	key := "key-" + randomID(t)
	b := buy{PO: po(t), Sim: "async_complete"}
	body := b.body(t)
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		ids = map[string]int{}
	)
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				sub, _, err := c.Submit(ctx, key, body)
				if apiclient.StatusOf(err) == http.StatusConflict && ctx.Err() == nil {
					// idempotency_key_in_use: the first request is still running; retry.
					time.Sleep(300 * time.Millisecond)
					continue
				}
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					t.Errorf("submit: %v", err)
					return
				}
				ids[sub.OperationID]++
				return
			}
		}()
	}
	wg.Wait()
	if len(ids) != 1 {
		t.Fatalf("20 identical submits named %d operations: %v", len(ids), ids)
	}
	var id string
	for k := range ids {
		id = k
	}
	finished(t, c, id, "completed")
	created, sellerCalls := 0, 0
	for _, e := range settled(t, c, id) {
		switch {
		case e.Type == "created":
			created++
		case e.Type == "seller_call" && e.To != "":
			sellerCalls++
		}
	}
	if created != 1 || sellerCalls != 1 {
		t.Errorf("timeline has %d created and %d seller calls that moved the buy, want 1 and 1", created, sellerCalls)
	}
	if suite.local != nil {
		n := 0
		for _, call := range suite.local.Seller.CallsTo("create_media_buy") {
			if strings.Contains(string(call.Arguments), b.PO) && !call.Replayed {
				n++
			}
		}
		if n != 1 {
			t.Errorf("the seller executed create_media_buy %d times for PO %s, want 1", n, b.PO)
		}
	}
}

// Another tenant cannot read, list or follow the buy: it does not exist for them.
func TestCrossTenantReadRefused(t *testing.T) {
	c := begin(t)
	if suite.local == nil {
		t.Skip("a deployed stack takes the tenant from the caller's IAM identity: one identity is one tenant")
	}
	sub := submit(t, c, buy{PO: po(t), Sim: "async_complete"})
	other := client(t, "t"+randomID(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := other.Get(ctx, sub.OperationID); apiclient.StatusOf(err) != http.StatusNotFound {
		t.Errorf("other tenant GET: %v, want HTTP 404", err)
	}
	if _, err := other.Events(ctx, sub.OperationID); apiclient.StatusOf(err) != http.StatusNotFound {
		t.Errorf("other tenant events: %v, want HTTP 404", err)
	}
	page, err := other.List(ctx, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range page.Items {
		if op.OperationID == sub.OperationID {
			t.Errorf("other tenant's list shows %s", sub.OperationID)
		}
	}
	if _, err := c.Get(ctx, sub.OperationID); err != nil {
		t.Errorf("owner GET: %v", err)
	}
	finished(t, c, sub.OperationID, "completed")
}
