package webhook_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/buyflow/buyflow/internal/webhook"
	"github.com/buyflow/buyflow/internal/workflow"
)

// delivery kinds of the storm.
const (
	kindFirst   = "first"   // the first delivery of a distinct event
	kindDup     = "dup"     // a seller retry of it: same body and key, new signature
	kindBad     = "bad"     // a bad signature (corrupted, wrong secret or body changed)
	kindExpired = "expired" // signed 10 minutes ago
)

type stormDelivery struct {
	op     int
	kind   string
	key    string
	seller string
	body   []byte
	req    events.APIGatewayV2HTTPRequest
}

// TestStorm sends 1,000 deliveries for 200 parked operations of two sellers (RFC 9421 and HMAC)
// through the handler against the kumo ledger, eight at a time: 600 distinct events (working,
// completed and a re-emitted completed per operation), 300 duplicates (30 %), 200 of the
// distinct events out of order (20 %), 50 bad signatures (5 %) and 50 expired ones (5 %). Each
// distinct event must be recorded once (applied or stale), nothing may regress, every bad one is
// refused with nothing stored, and each parked token is woken exactly once.
func TestStorm(t *testing.T) {
	const (
		ops      = 200
		dups     = 300
		bad      = 50
		expired  = 50
		workers  = 8
		reversed = 100 // operations whose events arrive as e3, e1, e2 (two out of order each)
	)
	e := newEnv(t)
	rng := rand.New(rand.NewPCG(1, 2))
	seqs := make([][]stormDelivery, ops)
	sellerOf := func(i int) string {
		if i%2 == 0 {
			return seller9421
		}
		return sellerHMAC
	}
	for i := range ops {
		id := opName(i)
		e.op(id, sellerOf(i), true)
		e1 := payload(id, "working", key(fmt.Sprintf("s%d-1", i)))
		e2 := payload(id, "completed", key(fmt.Sprintf("s%d-2", i)))
		e3 := payload(id, "completed", key(fmt.Sprintf("s%d-3", i)))
		e2["notification_id"], e3["notification_id"] = "n-"+id, "n-"+id
		order := []map[string]any{e1, e2, e3}
		if i >= ops-reversed {
			order = []map[string]any{e3, e1, e2}
		}
		for _, p := range order {
			body := mustJSON(t, p)
			seqs[i] = append(seqs[i], stormDelivery{op: i, kind: kindFirst, key: p["idempotency_key"].(string), seller: sellerOf(i),
				body: body, req: e.request(id, sellerOf(i), body, signOpts{})})
		}
	}
	// Duplicates go anywhere after their first delivery.
	for n := 0; n < dups; n++ {
		i := rng.IntN(ops)
		firsts := []int{}
		for j, d := range seqs[i] {
			if d.kind == kindFirst {
				firsts = append(firsts, j)
			}
		}
		j := firsts[rng.IntN(len(firsts))]
		orig := seqs[i][j]
		dup := orig
		dup.kind, dup.req = kindDup, e.request(opName(i), orig.seller, orig.body, signOpts{})
		seqs[i] = insertAt(seqs[i], j+1+rng.IntN(len(seqs[i])-j), dup)
	}
	// Bad and expired deliveries carry events of their own ("failed"), which must never land.
	for n := 0; n < bad+expired; n++ {
		i := rng.IntN(ops)
		kind, o := kindBad, signOpts{}
		if n >= bad {
			kind, o.at = kindExpired, e.clock.Now().Add(-10*time.Minute)
		} else {
			switch {
			case n%2 == 0:
				o.tamper = true
			case sellerOf(i) == seller9421:
				o.badSig = true
			default:
				o.wrongSecret = true
			}
		}
		k := key(fmt.Sprintf("%s%d", kind, n))
		d := stormDelivery{op: i, kind: kind, key: k, seller: sellerOf(i), req: e.request(opName(i), sellerOf(i), mustJSON(t, payload(opName(i), "failed", k)), o)}
		seqs[i] = insertAt(seqs[i], rng.IntN(len(seqs[i])+1), d)
	}

	// Interleave the operations (each keeps its own order) and count what was built.
	var all []stormDelivery
	next := make([]int, ops)
	for left := ops; left > 0; {
		i := rng.IntN(ops)
		if next[i] == len(seqs[i]) {
			continue
		}
		all = append(all, seqs[i][next[i]])
		if next[i]++; next[i] == len(seqs[i]) {
			left--
		}
	}
	built := map[string]int{}
	outOfOrder := 0
	for i := range ops {
		if i >= ops-reversed {
			outOfOrder += 2
		}
	}
	for _, d := range all {
		built[d.kind]++
	}
	if len(all) != 1000 || built[kindFirst] != 600 || built[kindDup] != dups || built[kindBad] != bad || built[kindExpired] != expired || outOfOrder != 200 {
		t.Fatalf("storm shape: %d deliveries %v, %d out of order", len(all), built, outOfOrder)
	}

	// Eight workers; an operation always goes to the same worker, so its order holds.
	type got struct {
		d      stormDelivery
		status int
		auth   string
		out    webhook.Outcome
	}
	results := make(chan got, len(all))
	queues := make([]chan stormDelivery, workers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		queues[w] = make(chan stormDelivery, len(all))
		wg.Go(func() {
			for d := range queues[w] {
				resp, err := e.svc.HandleHTTP(e.ctx, d.req)
				if err != nil {
					t.Errorf("HandleHTTP: %v", err)
					continue
				}
				g := got{d: d, status: resp.StatusCode, auth: resp.Headers["WWW-Authenticate"]}
				if resp.StatusCode == http.StatusOK {
					g.out = outcome(t, resp)
				}
				results <- g
			}
		})
	}
	for _, d := range all {
		queues[d.op%workers] <- d
	}
	for _, q := range queues {
		close(q)
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(results)

	outcomes := map[webhook.Outcome]int{}
	refused := 0
	good9421 := 0
	for g := range results {
		switch g.d.kind {
		case kindFirst:
			if g.status != http.StatusOK || (g.out != webhook.OutcomeApplied && g.out != webhook.OutcomeStale) {
				t.Errorf("first delivery of %s = %d %s", g.d.key, g.status, g.out)
			}
		case kindDup:
			if g.status != http.StatusOK || g.out != webhook.OutcomeDuplicate {
				t.Errorf("duplicate of %s = %d %s", g.d.key, g.status, g.out)
			}
		default:
			if g.status != http.StatusUnauthorized || g.auth == "" {
				t.Errorf("%s delivery %s = %d %q, want 401 with WWW-Authenticate", g.d.kind, g.d.key, g.status, g.auth)
			}
			refused++
		}
		if g.status == http.StatusOK {
			outcomes[g.out]++
			if g.d.seller == seller9421 {
				good9421++
			}
		}
	}
	if outcomes[webhook.OutcomeApplied] != 300 || outcomes[webhook.OutcomeStale] != 300 || outcomes[webhook.OutcomeDuplicate] != dups || refused != bad+expired {
		t.Errorf("outcomes %v, refused %d; want 300 applied, 300 stale, %d duplicate, %d refused", outcomes, refused, dups, bad+expired)
	}

	// The ledger: every operation completed once, each distinct event recorded once.
	for i := range ops {
		id := opName(i)
		op := e.get(id)
		wantVersion := int64(3) // submitted → working → completed
		if i >= ops-reversed {
			wantVersion = 2 // submitted → completed; the late working and completed are stale
		}
		if op.Status != workflow.StatusCompleted || op.Version != wantVersion || op.MediaBuyID != "mb-"+id || op.TaskToken != "" {
			t.Errorf("%s = %s v%d mb %q token kept %v; want completed v%d", id, op.Status, op.Version, op.MediaBuyID, op.TaskToken != "", wantVersion)
		}
		evs := e.webhookEvents(id)
		seen := map[string]int{}
		for _, ev := range evs {
			var dt struct {
				Key string `json:"idempotency_key"`
			}
			if err := jsonUnmarshal(ev.Detail, &dt); err != nil {
				t.Fatal(err)
			}
			seen[dt.Key]++
			if ev.To == workflow.StatusFailed || (ev.From == workflow.StatusCompleted && ev.To != workflow.StatusCompleted && ev.Reason == "") {
				t.Errorf("%s: regression event %+v", id, ev)
			}
		}
		if len(evs) != 3 || len(seen) != 3 {
			t.Errorf("%s: %d webhook events for %d keys, want 3 distinct", id, len(evs), len(seen))
		}
	}
	if n := e.count("RECEIPT#"); n != 600 {
		t.Errorf("%d receipts, want 600 (one per distinct event)", n)
	}
	for _, d := range all {
		if (d.kind == kindBad || d.kind == kindExpired) && e.hasReceipt(d.seller, d.key) {
			t.Errorf("refused %s delivery %s left a receipt", d.kind, d.key)
		}
	}
	if n := e.count("NONCE#"); n != good9421 {
		t.Errorf("%d replay nonces, want %d (one per accepted RFC 9421 delivery, none for refused ones)", n, good9421)
	}
	calls := e.tasks.Completed()
	tokens := map[string]bool{}
	for _, c := range calls {
		if tokens[c.Token] || c.Output.Status != workflow.StatusCompleted || !c.Output.Terminal {
			t.Errorf("wake %+v repeated or not a completion", c)
		}
		tokens[c.Token] = true
	}
	if len(calls) != ops {
		t.Errorf("%d wakes, want %d (one per parked operation)", len(calls), ops)
	}
	t.Logf("storm: %d deliveries in %v (%.0f/s): %v, %d refused; %d receipts, %d wakes",
		len(all), elapsed.Round(time.Millisecond), float64(len(all))/elapsed.Seconds(), outcomes, refused, e.count("RECEIPT#"), len(calls))
}

func opName(i int) string { return fmt.Sprintf("op-%03d", i) }

func insertAt(s []stormDelivery, i int, d stormDelivery) []stormDelivery {
	s = append(s, stormDelivery{})
	copy(s[i+1:], s[i:])
	s[i] = d
	return s
}
