package inform

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/workflow"
)

// The requester hears when their buy waits on the seller's people: when the seller takes it
// as a long-running task (submitted) or says in its own words (escaped) what it does, once per
// wait however its status moves within it; an ask for input is told on its own; the seller's
// systems working without a word are not news.
func TestRequesterHearsTheBuyWaitsOnTheSellersPeople(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	for _, id := range []string{"op-1", "op-2", "op-3"} {
		f.buy(t, id)
	}
	timeline := func(opID string, evs ...record.Event) {
		t.Helper()
		for _, ev := range evs {
			if err := f.store.AppendEvent(ctx, "acme", opID, ev); err != nil {
				t.Fatal(err)
			}
		}
	}
	quiet := func(raw json.RawMessage) {
		t.Helper()
		before := len(f.messages(t))
		if err := f.n.Handle(ctx, raw); err != nil {
			t.Fatal(err)
		}
		if msgs := f.messages(t); len(msgs) != before {
			t.Fatalf("told what is not news: %s", msgs[len(msgs)-1].Body)
		}
	}
	said := func(status, msg string) json.RawMessage {
		return json.RawMessage(`{"seller_status":"` + status + `","message":"` + msg + `"}`)
	}

	// op-1: the create answered submitted, without words: the seller took it for review.
	timeline("op-1", record.Event{Type: record.EventTransition, To: workflow.StatusCreating},
		record.Event{Type: record.EventSellerCall, To: workflow.StatusSubmitted, Detail: json.RawMessage(`{"task_id":"t-1"}`)})
	wantAll(t, f.handled(t, event(t, "op-1", 5, workflow.StatusCreating, workflow.StatusSubmitted, nil)),
		"Waiting for the seller", "*seller-a* took your buy for review", "PO-op-1", "USD 15,000.00")
	quiet(event(t, "op-1", 5, workflow.StatusCreating, workflow.StatusSubmitted, nil)) // redelivered
	// The same wait moves on to working, in the seller's words: told already.
	timeline("op-1", record.Event{Type: record.EventPoll, To: workflow.StatusWorking, Detail: said("working", "IO review by legal")})
	quiet(event(t, "op-1", 6, workflow.StatusSubmitted, workflow.StatusWorking, nil))
	// The seller asks for input: its own message, escaped.
	timeline("op-1", record.Event{Type: record.EventWebhook, To: workflow.StatusInputRequired, Detail: said("input-required", "Confirm the <dates> & budget")})
	wantAll(t, f.handled(t, event(t, "op-1", 7, workflow.StatusWorking, workflow.StatusInputRequired, nil)),
		"asks for input", "Confirm the &lt;dates&gt; &amp; budget")

	// op-2: the seller's words on the way into the wait are quoted.
	timeline("op-2", record.Event{Type: record.EventTransition, To: workflow.StatusCreating},
		record.Event{Type: record.EventSellerCall, To: workflow.StatusSubmitted, Detail: said("submitted", "queued for IO review")})
	wantAll(t, f.handled(t, event(t, "op-2", 5, workflow.StatusCreating, workflow.StatusSubmitted, nil)), "The seller says:", "queued for IO review")

	// op-3: working without a word from the seller is its systems: not news; its words are.
	timeline("op-3", record.Event{Type: record.EventTransition, To: workflow.StatusCreating},
		record.Event{Type: record.EventSellerCall, To: workflow.StatusWorking})
	quiet(event(t, "op-3", 5, workflow.StatusCreating, workflow.StatusWorking, nil))

	for _, m := range f.messages(t) {
		if strings.Contains(string(m.Body), "<dates>") {
			t.Errorf("the seller's words were not escaped: %s", m.Body)
		}
	}
}
