package campaign

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/workflow"
)

func fail(t *testing.T, f fixture, out api.CampaignSubmitted, failure *workflow.StepError, placed bool) FailureRecorded {
	t.Helper()
	raw, _ := json.Marshal(TaskInput{Action: ActionFail, Tenant: "acme", CampaignID: out.CampaignID, Failure: failure, LegsPlaced: placed})
	got, err := NewSettler(f.store, nil, testPolicy(t)).Handle(context.Background(), raw)
	if err != nil {
		t.Fatal(err)
	}
	return got.(FailureRecorded)
}

// A Lambda's error as the Catch records it: the engine's name, the function's error as JSON.
var lambdaFailure = &workflow.StepError{Error: "States.TaskFailed",
	Cause: `{"errorMessage":"read campaign: the ledger did not answer","errorType":"TransientError"}`}

// A step that fails before the legs are placed fails the campaign with a sentence, and leaves
// every leg to be failed with the campaign's reason; a retry records nothing new.
func TestFailBeforePlacementLeavesEveryLeg(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	out := submitAndEnd(t, f, BestEffort)
	got := fail(t, f, out, lambdaFailure, false)
	if got.Status != Failed || got.Committed != "0.00" || len(got.LegsLeft) != len(out.Legs) {
		t.Fatalf("failure = %+v", got)
	}
	for i, leg := range got.LegsLeft {
		if leg.OperationID != out.Legs[i].OperationID || leg.Failure.Error != workflow.FailureCampaignFailed ||
			!strings.Contains(leg.Failure.Cause, "the ledger did not answer") || !strings.Contains(leg.Failure.Cause, out.CampaignID) {
			t.Errorf("leg %d left as %+v", i, leg)
		}
	}
	for _, bad := range []string{"States.TaskFailed", "errorType", "{"} {
		if strings.Contains(got.Reason, bad) {
			t.Errorf("reason %q shows the engine's %s", got.Reason, bad)
		}
	}
	v, err := f.svc.Get(ctx, "acme", out.CampaignID)
	if err != nil || v.Status != string(Failed) || v.Reason != got.Reason || !strings.Contains(v.Reason, "before any leg was placed: a step failed after its retries (read campaign: the ledger did not answer)") {
		t.Fatalf("campaign = %+v, %v", v, err)
	}
	if again := fail(t, f, out, lambdaFailure, false); again.Reason != got.Reason || again.Status != Failed {
		t.Fatalf("retry = %+v", again)
	}
	service := &workflow.StepError{Error: "Lambda.ServiceException", Cause: `{"Type":"User","message":"Rate exceeded."}`}
	if got := failureCause(service); got != "a step failed after its retries (Rate exceeded)" {
		t.Errorf("the Lambda service's refusal reads %q", got)
	}
	page, err := f.svc.List(ctx, "acme", 10, "")
	if err != nil || len(page.Items) != 1 || page.Items[0].Status != string(Failed) || page.Items[0].Reason != got.Reason {
		t.Fatalf("list = %+v, %v", page, err)
	}
}

// After placement every leg belongs to its own execution: none is left, and the reason says
// what the placed legs committed; a campaign settled before keeps its outcome.
func TestFailAfterPlacementCountsWhatWasPlaced(t *testing.T) {
	f := newFixture(t)
	out := submitAndEnd(t, f, BestEffort, workflow.StatusCompleted, workflow.StatusFailed, workflow.StatusCompleted)
	got := fail(t, f, out, &workflow.StepError{Error: "States.Runtime", Cause: "The JSONPath '$.x' could not be found."}, true)
	if got.Status != Failed || got.Committed != "13500.00" || len(got.LegsLeft) != 0 ||
		!strings.Contains(got.Reason, "2 of its 3 legs placed, committing 13500.00 USD") || !strings.Contains(got.Reason, "could not be found") {
		t.Fatalf("failure = %+v", got)
	}

	g := newFixture(t)
	settled := submitAndEnd(t, g, BestEffort, workflow.StatusCompleted, workflow.StatusCompleted, workflow.StatusCompleted)
	settle(t, g, settled)
	if got := fail(t, g, settled, &workflow.StepError{Error: "States.Timeout"}, true); got.Status != Completed || got.Committed != "22500.00" {
		t.Fatalf("a settled campaign's failure = %+v", got)
	}
	if v, _ := g.svc.Get(context.Background(), "acme", settled.CampaignID); v.Status != string(Completed) || v.Reason != "" {
		t.Fatalf("settled campaign = %+v", v)
	}
}
