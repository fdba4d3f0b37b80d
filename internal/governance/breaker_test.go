package governance_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/stage"
	"github.com/buyflow/buyflow/internal/workflow"
)

// A governance agent that fails 3 checks in a row opens its breaker: the next check asks
// nothing, answers agent_unavailable with the wait, and keeps the gate closed; a buy still
// waiting at its deadline expires instead of waiting for ever.
func TestCheckWaitsWhileTheGovernanceBreakerIsOpen(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{breakers: json.RawMessage(`{"circuit_breaker":{"failures":3,"cooldown_seconds":120}}`)})
	op := e.newOp("approved", false)
	e.gov.FailNextHTTP(3, 503)
	for range 3 {
		_, err := handle(t, e.govStage.Handle, stageIn(op, workflow.ActionCheck))
		wantBare(t, err, "TransientError")
	}
	sent := len(e.gov.Calls())

	out := e.check(op)
	if out.Decision != workflow.GovernanceAgentUnavailable || out.Unavailable == nil || out.Unavailable.AgentID != govID ||
		out.Unavailable.Role != "governance" || out.Unavailable.RetryInSeconds < 119 || out.Unavailable.RetryInSeconds > 120 {
		t.Fatalf("check while open = %+v %+v", out, out.Unavailable)
	}
	if n := len(e.gov.Calls()); n != sent {
		t.Fatalf("%d calls reached governance while its breaker was open", n-sent)
	}
	if got := e.op(op.ID); got.Status != workflow.StatusCheckingGovernance || got.GovernanceCheckID != "" {
		t.Fatalf("operation = %+v; the gate must stay closed", got)
	}
	evs, err := e.store.ListEvents(context.Background(), tenant, op.ID, 100, "")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, ev := range evs.Items {
		found = found || ev.Type == ledger.EventAgentUnavailable
	}
	if !found {
		t.Fatal("no agent_unavailable event on the timeline")
	}

	// A wait shorter than the cool-down left is never asked for: at least PollInitialSeconds.
	e.clock.Advance(115 * time.Second)
	if out := e.check(op); out.Unavailable == nil || out.Unavailable.RetryInSeconds != cfg().PollInitialSeconds {
		t.Fatalf("check near the end of the cool-down = %+v", out.Unavailable)
	}

	// The governance agent is still down at the probe, and the buy passes its deadline.
	e.gov.FailNextHTTP(1, 503)
	e.clock.Advance(time.Duration(cfg().DeadlineSeconds) * time.Second)
	_, err = handle(t, e.govStage.Handle, stageIn(op, workflow.ActionCheck))
	wantBare(t, err, "TransientError") // the probe's own failure: the breaker opens again
	_, err = handle(t, e.govStage.Handle, stageIn(op, workflow.ActionCheck))
	wantBare(t, err, "DeadlineExceededError")
}

// A report_plan_outcome the open breaker refused sent nothing: the intent is released, and
// the report after the cool-down is its first send (an agent without a replay window would
// refuse a resend for good), reaching governance once.
func TestReportRefusedByTheBreakerIsAFirstSendLater(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOptions{breakers: json.RawMessage(`{"circuit_breaker":{"failures":3,"cooldown_seconds":120}}`)})
	op, _ := e.placed("approved,sync")
	other := e.newOp("approved", false)
	e.gov.FailNextHTTP(3, 503)
	for range 3 {
		_, err := handle(t, e.govStage.Handle, stageIn(other, workflow.ActionCheck))
		wantBare(t, err, "TransientError")
	}
	report := workflow.OutcomeInput{Action: workflow.ActionReport, OperationID: op.ID, Tenant: tenant}
	_, err := handle(t, e.govStage.Handle, report)
	wantBare(t, err, "TransientError")
	if n := len(e.gov.CallsTo("report_plan_outcome")); n != 0 {
		t.Fatalf("%d reports reached governance while its breaker was open", n)
	}
	in, err := e.store.GetIntent(context.Background(), tenant, op.ID, stage.IntentReportPrefix+"completed")
	if err != nil || !in.Unsent {
		t.Fatalf("report intent after the refusal: %+v, %v; want unsent", in, err)
	}

	e.clock.Advance(121 * time.Second)
	if _, err := handle(t, e.govStage.Handle, report); err != nil {
		t.Fatalf("report after the cool-down: %v", err)
	}
	calls := e.gov.CallsTo("report_plan_outcome")
	if len(calls) != 1 || calls[0].Replayed || lastArgs(t, calls)["idempotency_key"] != in.IdempotencyKey {
		t.Fatalf("%d reports reached governance, want the fixed intent once", len(calls))
	}
	if in, _ := e.store.GetIntent(context.Background(), tenant, op.ID, stage.IntentReportPrefix+"completed"); in.Unsent || in.Claims != 2 {
		t.Fatalf("report intent after the send: %d claims, unsent %v", in.Claims, in.Unsent)
	}
}
