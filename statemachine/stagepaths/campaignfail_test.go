package stagepaths

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// A step of the Campaign execution itself fails past its retries: the failure is recorded on
// the campaign, with a reason a person reads, and on the legs it leaves, each reported to
// governance as a buy's RecordFailure reports it.

// lambdaAttempts is how many times the ASL invokes a campaign task that the Lambda service
// refuses: the first attempt and the four retries of Lambda.ServiceException.
const lambdaAttempts = 5

// ReleaseLegs fails before any leg is placed: every leg was checked with governance, so each
// one records the campaign's reason and governance hears failed for it; nothing reaches a
// seller.
func TestCampaignReleaseFailureIsRecordedOnTheCampaignAndItsLegs(t *testing.T) {
	r := beginCampaign(t, "best_effort")
	sys.lambda.inject("campaign", r.tenant, lambdaAttempts)
	r.submitCampaign()
	ex := only(t, r.finish(90*time.Second))
	if ex.Status != "FAILED" || ex.Error != "CampaignStepFailed" || slices.Contains(ex.States, "PlaceLegs") ||
		!slices.Contains(ex.States, "FailedBeforePlacement") || count(ex.States, "FailLeg") != len(r.spec.Legs) {
		t.Fatalf("campaign ended %s %s: %v", ex.Status, ex.Error, ex.States)
	}
	if ex.Retries["ReleaseLegs"] != lambdaAttempts-1 {
		t.Errorf("retries %v, want ReleaseLegs %d", ex.Retries, lambdaAttempts-1)
	}
	c := r.campaign()
	if c.Status != "failed" || c.Committed != "0.00" ||
		!strings.HasPrefix(c.Reason, "The campaign stopped before any leg was placed: a step failed after its retries (injected by the test: the Lambda service failed)") ||
		!strings.Contains(c.Reason, "Nothing was sent to any seller") {
		t.Errorf("campaign = %s, committed %s, reason %q", c.Status, c.Committed, c.Reason)
	}
	r.wantLegs(c, "failed", "failed", "failed")
	for i, leg := range c.Legs {
		if !strings.Contains(leg.Reason, "campaign "+r.sub.CampaignID+" stopped before this leg was placed") {
			t.Errorf("leg %d reason %q", i, leg.Reason)
		}
		if calls := r.legCalls(i, ""); len(calls) != 0 {
			t.Errorf("leg %d reached its seller: %v", i, tools(calls))
		}
		reports := r.governanceCallsOf(leg.OperationID, r.spec.Legs[i].PO, "report_plan_outcome")
		if len(reports) != 1 || arg(t, reports[0].Arguments, "outcome") != "failed" {
			t.Errorf("leg %d: governance heard %v, want one report_plan_outcome failed", i, tools(reports))
		}
	}
}

// Settle fails after every leg was placed (one leg waits for its seller's input until the test
// has armed the fault, so the fault meets Settle and nothing else): the campaign records the
// failure with what its legs committed, and no leg is touched, since each belongs to its own
// media buy.
func TestCampaignSettleFailureIsRecordedWithWhatWasCommitted(t *testing.T) {
	r := beginCampaign(t, "best_effort", "", "input_required")
	r.submitCampaign()
	leg := &buyRun{t: t, op: r.sub.Legs[1].OperationID}
	link := leg.approvalLink() // the legs are placed: the campaign's next task is Settle
	sys.lambda.inject("campaign", r.tenant, lambdaAttempts)
	decideLink(t, link, "approve")
	ex := only(t, r.finish(90*time.Second))
	if ex.Status != "FAILED" || ex.Error != "CampaignStepFailed" || !slices.Contains(ex.States, "FailedAfterPlacement") ||
		slices.Contains(ex.States, "FailLeg") || slices.Contains(ex.States, "CampaignOutcome") {
		t.Fatalf("campaign ended %s %s: %v", ex.Status, ex.Error, ex.States)
	}
	if ex.Retries["Settle"] != lambdaAttempts-1 {
		t.Errorf("retries %v, want Settle %d", ex.Retries, lambdaAttempts-1)
	}
	c := r.campaign()
	r.wantLegs(c, "completed", "completed", "completed")
	if c.Status != "failed" || c.Committed != "6000.00" ||
		!strings.HasPrefix(c.Reason, "The campaign stopped after its legs were handed to their own media buys: a step failed after its retries (") ||
		!strings.Contains(c.Reason, "3 of its 3 legs placed, committing 6000.00 USD") {
		t.Errorf("campaign = %s, committed %s, reason %q", c.Status, c.Committed, c.Reason)
	}
	for i, l := range c.Legs {
		reports := r.governanceCallsOf(l.OperationID, r.spec.Legs[i].PO, "report_plan_outcome")
		if len(reports) != 1 || arg(t, reports[0].Arguments, "outcome") != "completed" {
			t.Errorf("leg %d: governance heard %v, want its own report_plan_outcome completed once", i, tools(reports))
		}
	}
}
