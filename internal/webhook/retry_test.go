package webhook_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/registry"
	"github.com/buyflow/buyflow/internal/webhook"
	"github.com/buyflow/buyflow/internal/workflow"
)

// AdCP 3.2's receiver rules for a delivery whose idempotency_key was seen: 503 while the first
// delivery is still being processed, 2xx once it was, 409 only for the same key with a
// different payload (from a seller that speaks only 3.2; 3.0 and 3.1 dedupe by the key alone).

// gatedLedger holds every transition until the test opens the gate: the first delivery is then
// in progress, with its receipt claimed, for as long as the test needs.
type gatedLedger struct {
	webhook.Ledger
	entered chan struct{}
	open    chan struct{}
	once    sync.Once
}

func (g *gatedLedger) Advance(ctx context.Context, op *record.Operation, to workflow.Status, ch record.Patch, take bool) (*record.Operation, error) {
	g.once.Do(func() { close(g.entered) })
	<-g.open
	return g.Ledger.Advance(ctx, op, to, ch, take)
}

func TestRetryWhileTheFirstIsProcessingIs503ThenDuplicate(t *testing.T) {
	g := &gatedLedger{entered: make(chan struct{}), open: make(chan struct{})}
	e := newEnvWith(t, func(c *webhook.Config) { g.Ledger = c.Ledger; c.Ledger = g })
	e.op("op-1", seller9421, true)
	body := mustJSON(t, payload("op-1", "completed", key("a")))

	first := make(chan events.APIGatewayV2HTTPResponse, 1)
	req := e.request("op-1", seller9421, body, signOpts{})
	go func() {
		resp, _ := e.svc.HandleHTTP(e.ctx, req)
		first <- resp
	}()
	<-g.entered // the first delivery holds the receipt and is applying the update

	// The seller's retry (same bytes, a new signature) while the first is in progress.
	retry := e.post(e.request("op-1", seller9421, body, signOpts{}))
	if retry.StatusCode != http.StatusServiceUnavailable || retry.Headers["Retry-After"] == "" || !strings.Contains(retry.Body, "delivery_in_progress") {
		t.Fatalf("retry during processing = %d %v %s, want 503 delivery_in_progress with Retry-After", retry.StatusCode, retry.Headers, retry.Body)
	}
	close(g.open)
	if resp := <-first; resp.StatusCode != http.StatusOK || outcome(t, resp) != webhook.OutcomeApplied {
		t.Fatalf("first delivery = %d %s, want 200 applied", resp.StatusCode, resp.Body)
	}
	if again := e.post(e.request("op-1", seller9421, body, signOpts{})); again.StatusCode != http.StatusOK || outcome(t, again) != webhook.OutcomeDuplicate {
		t.Fatalf("retry after processing = %d %s, want 200 duplicate", again.StatusCode, again.Body)
	}
	if n, m := len(e.webhookEvents("op-1")), len(e.tasks.Completed()); n != 1 || m != 1 {
		t.Fatalf("%d events, %d wakes; want 1 and 1", n, m)
	}
}

// versions is a registry that knows only which AdCP versions each seller speaks.
type versions map[string][]string

func (v versions) Lookup(_ context.Context, id string) (registry.Record, error) {
	vs, ok := v[id]
	if !ok {
		return registry.Record{}, errors.New("unknown agent")
	}
	return registry.Record{Capabilities: &registry.Capabilities{SupportedVersions: vs}}, nil
}

func (versions) Refresh(context.Context) error { return nil }

func TestDifferentPayloadUnderOneKey(t *testing.T) {
	for _, tc := range []struct {
		name     string
		speaks   []string
		status   int
		conflict bool
	}{
		{"a 3.2 seller gets 409", []string{"3.2"}, http.StatusConflict, true},
		{"a 3.3 release candidate too", []string{"3.2", "3.3-rc.0"}, http.StatusConflict, true},
		{"a seller that also speaks 3.1 is deduplicated by the key", []string{"3.1", "3.2"}, http.StatusOK, false},
		{"and so is one the registry has not checked", nil, http.StatusOK, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnvWith(t, func(c *webhook.Config) { c.Registry = versions{seller9421: tc.speaks} })
			e.op("op-1", seller9421, true)
			if resp := e.deliver("op-1", seller9421, payload("op-1", "working", key("a")), signOpts{}); outcome(t, resp) != webhook.OutcomeApplied {
				t.Fatalf("first delivery = %d %s", resp.StatusCode, resp.Body)
			}
			// The same key on another event: completed, where the key was bound to working.
			resp := e.deliver("op-1", seller9421, payload("op-1", "completed", key("a")), signOpts{})
			if resp.StatusCode != tc.status || strings.Contains(resp.Body, "idempotency_conflict") != tc.conflict {
				t.Fatalf("same key, other payload = %d %s, want %d (conflict %v)", resp.StatusCode, resp.Body, tc.status, tc.conflict)
			}
			if op := e.get("op-1"); op.Status != workflow.StatusWorking {
				t.Fatalf("the operation is %s: the second payload was applied", op.Status)
			}
			// A byte-different but equivalent payload (key order, spacing) is the same payload.
			same := []byte(strings.Replace(string(mustJSON(t, payload("op-1", "working", key("a")))), `{"idempotency_key"`, `{ "idempotency_key"`, 1))
			if resp := e.post(e.request("op-1", seller9421, same, signOpts{})); resp.StatusCode != http.StatusOK || outcome(t, resp) != webhook.OutcomeDuplicate {
				t.Fatalf("an equivalent payload = %d %s, want 200 duplicate", resp.StatusCode, resp.Body)
			}
		})
	}
}

// A delivery whose holder died after claiming the receipt (a crash, a timeout) is answered 503
// while the claim is fresh, then taken over and applied: it is never lost to a receipt that
// will not complete.
func TestAbandonedDeliveryIsTakenOver(t *testing.T) {
	e := newEnv(t)
	e.op("op-1", seller9421, true)
	p := payload("op-1", "completed", key("a"))
	d, err := webhook.ParseDelivery(mustJSON(t, p))
	if err != nil {
		t.Fatal(err)
	}
	// What the dead holder left: a claimed receipt, never completed or released.
	if held, err := e.store.ClaimReceipt(e.ctx, record.Receipt{SellerID: seller9421, IdempotencyKey: key("a"), PayloadHash: d.PayloadHash}, 30*time.Second); err != nil || held != nil {
		t.Fatalf("claim = %+v, %v", held, err)
	}
	e.clock.Advance(10 * time.Second)
	if resp := e.deliver("op-1", seller9421, p, signOpts{}); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("retry within the claim = %d %s, want 503", resp.StatusCode, resp.Body)
	}
	e.clock.Advance(25 * time.Second)
	if resp := e.deliver("op-1", seller9421, p, signOpts{}); resp.StatusCode != http.StatusOK || outcome(t, resp) != webhook.OutcomeApplied {
		t.Fatalf("retry after the claim went stale = %d %s, want 200 applied", resp.StatusCode, resp.Body)
	}
	if len(e.tasks.Completed()) != 1 {
		t.Fatalf("%d wakes, want 1", len(e.tasks.Completed()))
	}
}

// Many copies of one delivery at once (a seller retrying on its own timeout while the first is
// in flight): one applies the update and wakes the workflow; every other copy is 503 or a
// duplicate, never a second effect.
func TestConcurrentCopiesApplyOnce(t *testing.T) {
	e := newEnv(t)
	e.op("op-1", seller9421, true)
	body := mustJSON(t, payload("op-1", "completed", key("a")))
	const copies = 16
	reqs := make([]events.APIGatewayV2HTTPRequest, copies)
	for i := range reqs {
		reqs[i] = e.request("op-1", seller9421, body, signOpts{})
	}
	resps := make([]events.APIGatewayV2HTTPResponse, copies)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range reqs {
		wg.Go(func() {
			<-start
			resps[i], _ = e.svc.HandleHTTP(e.ctx, reqs[i])
		})
	}
	close(start)
	wg.Wait()
	applied := 0
	for i, r := range resps {
		switch {
		case r.StatusCode == http.StatusOK && outcome(t, r) == webhook.OutcomeApplied:
			applied++
		case r.StatusCode == http.StatusOK && outcome(t, r) == webhook.OutcomeDuplicate,
			r.StatusCode == http.StatusServiceUnavailable && strings.Contains(r.Body, "delivery_in_progress"):
		default:
			t.Errorf("copy %d = %d %s", i, r.StatusCode, r.Body)
		}
	}
	if applied != 1 {
		t.Fatalf("%d copies applied the update, want 1", applied)
	}
	if n, m := len(e.webhookEvents("op-1")), len(e.tasks.Completed()); n != 1 || m != 1 {
		t.Fatalf("%d events, %d wakes; want 1 and 1", n, m)
	}
}
