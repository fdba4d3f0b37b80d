package poll_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/stagetest"
)

// A seller's words on tasks/get (its message, else its progress's current step, as the official
// SDK reports a handoff at work) stay on the poll's events: the one that moved the buy to
// working and the repeats after it, which are what shows a multi-day wait is the seller's
// people at work. The simulated seller's working task says "processing" in its progress.
func TestThePollKeepsTheSellersMessage(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{})
	op, out := e.Placed("approved,async_complete")
	if _, err := e.Seller.Advance(e.Seller.Tasks()[0].ID); err != nil { // → working
		t.Fatal(err)
	}
	got, err := e.PollStage.PollSeller(context.Background(), pollIn(op, out.Next, 0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.PollStage.PollSeller(context.Background(), pollIn(op, got.Next, 0)); err != nil {
		t.Fatal(err)
	}
	var polls []string
	for _, ev := range stagetest.Events(t, e, op.ID) {
		if ev.Type != record.EventPoll {
			continue
		}
		var d struct {
			Message string `json:"message"`
		}
		_ = json.Unmarshal(ev.Detail, &d)
		polls = append(polls, d.Message)
	}
	if len(polls) != 2 || polls[0] != "processing" || polls[1] != polls[0] {
		t.Fatalf("the poll events' messages = %q, want the seller's on both", polls)
	}
}
