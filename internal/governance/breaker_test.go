package governance_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/stage"
	"github.com/buyflow/buyflow/internal/stagetest"
	"github.com/buyflow/buyflow/internal/workflow"
)

// A governance agent that fails 3 checks in a row opens its breaker: the next check asks
// nothing, answers agent_unavailable with the wait, and keeps the gate closed; a buy still
// waiting at its deadline expires instead of waiting for ever.
func TestCheckWaitsWhileTheGovernanceBreakerIsOpen(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{Breakers: json.RawMessage(`{"circuit_breaker":{"failures":3,"cooldown_seconds":120}}`)})
	op := e.NewOp("approved", false)
	e.Gov.FailNextHTTP(3, 503)
	for range 3 {
		_, err := stagetest.Handle(t, e.GovStage.Handle, stagetest.StageIn(op, workflow.ActionCheck))
		stagetest.WantBare(t, err, "TransientError")
	}
	sent := len(e.Gov.Calls())

	out := e.Check(op)
	if out.Decision != workflow.GovernanceAgentUnavailable || out.Unavailable == nil || out.Unavailable.AgentID != stagetest.GovID ||
		out.Unavailable.Role != "governance" || out.Unavailable.RetryInSeconds < 119 || out.Unavailable.RetryInSeconds > 120 {
		t.Fatalf("check while open = %+v %+v", out, out.Unavailable)
	}
	if n := len(e.Gov.Calls()); n != sent {
		t.Fatalf("%d calls reached governance while its breaker was open", n-sent)
	}
	if got := e.Op(op.ID); got.Status != workflow.StatusCheckingGovernance || got.GovernanceCheckID != "" {
		t.Fatalf("operation = %+v; the gate must stay closed", got)
	}
	evs, err := e.Store.ListEvents(context.Background(), stagetest.Tenant, op.ID, 100, "")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, ev := range evs.Items {
		found = found || ev.Type == record.EventAgentUnavailable
	}
	if !found {
		t.Fatal("no agent_unavailable event on the timeline")
	}

	// A wait shorter than the cool-down left is never asked for: at least PollInitialSeconds.
	e.Clock.Advance(115 * time.Second)
	if out := e.Check(op); out.Unavailable == nil || out.Unavailable.RetryInSeconds != stagetest.RunConfig().PollInitialSeconds {
		t.Fatalf("check near the end of the cool-down = %+v", out.Unavailable)
	}

	// The governance agent is still down at the probe, and the buy passes its deadline.
	e.Gov.FailNextHTTP(1, 503)
	e.Clock.Advance(time.Duration(stagetest.RunConfig().DeadlineSeconds) * time.Second)
	_, err = stagetest.Handle(t, e.GovStage.Handle, stagetest.StageIn(op, workflow.ActionCheck))
	stagetest.WantBare(t, err, "TransientError") // the probe's own failure: the breaker opens again
	_, err = stagetest.Handle(t, e.GovStage.Handle, stagetest.StageIn(op, workflow.ActionCheck))
	stagetest.WantBare(t, err, "DeadlineExceededError")
}

// A report_plan_outcome the open breaker refused sent nothing: the intent is released, and
// the report after the cool-down is its first send (an agent without a replay window would
// refuse a resend for good), reaching governance once.
func TestReportRefusedByTheBreakerIsAFirstSendLater(t *testing.T) {
	t.Parallel()
	e := stagetest.NewEnv(t, stagetest.Options{Breakers: json.RawMessage(`{"circuit_breaker":{"failures":3,"cooldown_seconds":120}}`)})
	op, _ := e.Placed("approved,sync")
	other := e.NewOp("approved", false)
	e.Gov.FailNextHTTP(3, 503)
	for range 3 {
		_, err := stagetest.Handle(t, e.GovStage.Handle, stagetest.StageIn(other, workflow.ActionCheck))
		stagetest.WantBare(t, err, "TransientError")
	}
	report := workflow.OutcomeInput{Action: workflow.ActionReport, OperationID: op.ID, Tenant: stagetest.Tenant}
	_, err := stagetest.Handle(t, e.GovStage.Handle, report)
	stagetest.WantBare(t, err, "TransientError")
	if n := len(e.Gov.CallsTo("report_plan_outcome")); n != 0 {
		t.Fatalf("%d reports reached governance while its breaker was open", n)
	}
	in, err := e.Store.GetIntent(context.Background(), stagetest.Tenant, op.ID, stage.IntentReportPrefix+"completed")
	if err != nil || !in.Unsent {
		t.Fatalf("report intent after the refusal: %+v, %v; want unsent", in, err)
	}

	e.Clock.Advance(121 * time.Second)
	if _, err := stagetest.Handle(t, e.GovStage.Handle, report); err != nil {
		t.Fatalf("report after the cool-down: %v", err)
	}
	calls := e.Gov.CallsTo("report_plan_outcome")
	if len(calls) != 1 || calls[0].Replayed || stagetest.LastArgs(t, calls)["idempotency_key"] != in.IdempotencyKey {
		t.Fatalf("%d reports reached governance, want the fixed intent once", len(calls))
	}
	if in, _ := e.Store.GetIntent(context.Background(), stagetest.Tenant, op.ID, stage.IntentReportPrefix+"completed"); in.Unsent || in.Claims != 2 {
		t.Fatalf("report intent after the send: %d claims, unsent %v", in.Claims, in.Unsent)
	}
}
