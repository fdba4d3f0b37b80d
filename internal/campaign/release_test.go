package campaign

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/approvalpolicy"
	"github.com/buyflow/buyflow/internal/buytest"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/workflow"
)

// checked submits the example campaign under policy and moves each leg as its governance check
// would (creating: proceed, awaiting_approval: a person is needed, rejected: denied).
func checked(t *testing.T, f fixture, policy Policy, after ...workflow.Status) (api.CampaignSubmitted, ExecutionInput) {
	t.Helper()
	ctx := context.Background()
	m := buytest.Example(t, "campaign.json")
	m["policy"] = string(policy)
	out, err := f.svc.Submit(ctx, acme, "release-key-"+string(policy), buytest.Marshal(t, m))
	if err != nil {
		t.Fatal(err)
	}
	for i, to := range after {
		reason := "checked: " + string(to)
		if _, err := f.store.Transition(ctx, "acme", out.Legs[i].OperationID, to, 1, record.Patch{Reason: &reason}); err != nil {
			t.Fatal(err)
		}
	}
	return out, f.campaigns.starts[out.CampaignID].(ExecutionInput)
}

// policyAt is an approval policy whose threshold is threshold USD.
func policyAt(t *testing.T, threshold string) approvalpolicy.Policy {
	t.Helper()
	p, err := approvalpolicy.Parse([]byte(`{"threshold":"` + threshold + `","currency":"USD","approvers":["U1"]}`))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// testPolicy's threshold is over the example campaign's total (22,500.00 USD of legs of
// 8,500.25, 9,000.00 and 4,999.75): only a leg that waits for a person asks one.
func testPolicy(t *testing.T) approvalpolicy.Policy { return policyAt(t, "30000.00") }

func release(t *testing.T, f fixture, out api.CampaignSubmitted, in ExecutionInput, mod func(*TaskInput)) Released {
	t.Helper()
	return releaseUnder(t, testPolicy(t), f.store, out, in, mod)
}

// releaseUnder runs ActionRelease with the approval policy p, reading facts.
func releaseUnder(t *testing.T, p approvalpolicy.Policy, facts Facts, out api.CampaignSubmitted, in ExecutionInput, mod func(*TaskInput)) Released {
	t.Helper()
	task := TaskInput{Action: ActionRelease, Tenant: "acme", CampaignID: out.CampaignID, Legs: in.Legs}
	for _, l := range in.Legs {
		task.Checks = append(task.Checks, LegCheck{OperationID: l.OperationID})
	}
	if mod != nil {
		mod(&task)
	}
	raw, _ := json.Marshal(task)
	got, err := NewSettler(facts, nil, p).Handle(context.Background(), raw)
	if err != nil {
		t.Fatal(err)
	}
	return got.(Released)
}

func starts(r Released) []workflow.LegEntry {
	var out []workflow.LegEntry
	for _, l := range r.Legs {
		out = append(out, l.Input.CampaignLeg.Start)
	}
	return out
}

func TestReleaseAsksOneApprovalBeforeAnyLeg(t *testing.T) {
	f := newFixture(t)
	out, in := checked(t, f, BestEffort, workflow.StatusCreating, workflow.StatusAwaitingApproval, workflow.StatusCreating)
	if r := release(t, f, out, in, nil); !r.NeedsApproval || len(r.Legs) != 0 {
		t.Fatalf("first release = %+v", r)
	}
	// Approved: every leg is created, each under the name and input its submit fixed.
	r := release(t, f, out, in, func(ti *TaskInput) { ti.Approval = &workflow.ApprovalOutput{Decision: "approved", ApprovalID: "apr_1"} })
	if r.NeedsApproval || len(r.Legs) != 3 {
		t.Fatalf("approved release = %+v", r)
	}
	for i, l := range r.Legs {
		if l.Input.CampaignLeg.Start != workflow.LegCreate || l.ExecutionName != in.Legs[i].ExecutionName ||
			l.Input.OperationID != in.Legs[i].OperationID || l.Input.StateMachineARN != mediaBuyARN || l.Input.Failure != nil {
			t.Errorf("leg %d = %+v", i, l)
		}
	}
	// Rejected: every leg records the rejection and none is created.
	rejected := &workflow.StepError{Error: "ApprovalRejectedError", Cause: "rejected by U1"}
	r = release(t, f, out, in, func(ti *TaskInput) { ti.Failure = rejected })
	for i, l := range r.Legs {
		if l.Input.CampaignLeg.Start != workflow.LegFail || l.Input.Failure == nil || *l.Input.Failure != *rejected {
			t.Errorf("rejected leg %d = %+v", i, l.Input)
		}
	}
}

// Legs each under the threshold whose total is at or over it need the campaign's one approval,
// as a single buy of the total would: none is started before the decision, every one is created
// after an approval and none after a rejection.
func TestReleaseHoldsTheTotalToTheThreshold(t *testing.T) {
	f := newFixture(t)
	out, in := checked(t, f, AllOrNothing, workflow.StatusCreating, workflow.StatusCreating, workflow.StatusCreating)
	for _, threshold := range []string{"10000.00", "22500.00"} {
		r := releaseUnder(t, policyAt(t, threshold), f.store, out, in, nil)
		want := "the campaign's total 22500.00 USD is at or over the approval threshold " + threshold + " USD"
		if !r.NeedsApproval || len(r.Legs) != 0 || r.Why != want {
			t.Fatalf("release under a %s threshold = %+v, want the approval first because %q", threshold, r, want)
		}
	}
	p := policyAt(t, "10000.00")
	r := releaseUnder(t, p, f.store, out, in, func(ti *TaskInput) { ti.Approval = &workflow.ApprovalOutput{Decision: "approved", ApprovalID: "apr_1"} })
	if r.NeedsApproval || strings.Join(toStrings(starts(r)), ",") != "create,create,create" {
		t.Fatalf("approved release = %+v", r)
	}
	rejected := &workflow.StepError{Error: "ApprovalRejectedError", Cause: "rejected by U1"}
	r = releaseUnder(t, p, f.store, out, in, func(ti *TaskInput) { ti.Failure = rejected })
	if strings.Join(toStrings(starts(r)), ",") != "fail,fail,fail" {
		t.Fatalf("rejected release = %+v", r)
	}
	for i, l := range r.Legs {
		if *l.Input.Failure != *rejected {
			t.Errorf("rejected leg %d = %+v", i, l.Input)
		}
	}
	// A cent under the total: no person, every leg is created at once.
	if r := releaseUnder(t, policyAt(t, "22500.01"), f.store, out, in, nil); r.NeedsApproval || r.Why != "" ||
		strings.Join(toStrings(starts(r)), ",") != "create,create,create" {
		t.Fatalf("release under a 22500.01 threshold = %+v", r)
	}
}

// The total is what the campaign would commit: a leg governance denied (best_effort goes on
// without it) does not count. A threshold in another currency than the legs needs a person.
func TestReleaseTotalCountsTheClearedLegs(t *testing.T) {
	f := newFixture(t)
	out, in := checked(t, f, BestEffort, workflow.StatusCreating, workflow.StatusRejected, workflow.StatusCreating)
	if r := releaseUnder(t, policyAt(t, "13500.01"), f.store, out, in, nil); r.NeedsApproval || strings.Join(toStrings(starts(r)), ",") != "create,fail,create" {
		t.Fatalf("release of 13500.00 USD of cleared legs under a 13500.01 threshold = %+v", r)
	}
	r := releaseUnder(t, policyAt(t, "13500.00"), f.store, out, in, nil)
	if !r.NeedsApproval || !strings.Contains(r.Why, "total 13500.00 USD") {
		t.Fatalf("release of 13500.00 USD of cleared legs under a 13500.00 threshold = %+v", r)
	}
	// The approval covers exactly the legs whose total the gate compared.
	if got, want := strings.Join(r.Covers, ","), out.Legs[0].OperationID+","+out.Legs[2].OperationID; got != want {
		t.Errorf("the approval covers %s, want the cleared legs %s", got, want)
	}
	eur, err := approvalpolicy.Parse([]byte(`{"threshold":"1000000.00","currency":"EUR","approvers":["U1"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if r := releaseUnder(t, eur, f.store, out, in, nil); !r.NeedsApproval || r.Why != "the campaign's total is in USD but the approval threshold is in EUR" {
		t.Fatalf("release under a EUR threshold = %+v", r)
	}
}

// With no leg left to buy, nobody is asked, even under a policy that fails closed (a threshold
// in another currency): each leg records its own failure.
func TestReleaseAsksNobodyWhenNoLegIsBought(t *testing.T) {
	f := newFixture(t)
	out, in := checked(t, f, BestEffort, workflow.StatusRejected, workflow.StatusRejected, workflow.StatusRejected)
	eur, err := approvalpolicy.Parse([]byte(`{"threshold":"1.00","currency":"EUR","approvers":["U1"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if r := releaseUnder(t, eur, f.store, out, in, nil); r.NeedsApproval || len(r.Covers) != 0 || strings.Join(toStrings(starts(r)), ",") != "fail,fail,fail" {
		t.Fatalf("release of three denied legs = %+v", r)
	}
}

func TestReleaseWithoutAPersonCreatesAtOnce(t *testing.T) {
	f := newFixture(t)
	out, in := checked(t, f, AllOrNothing, workflow.StatusCreating, workflow.StatusCreating, workflow.StatusCreating)
	if r := release(t, f, out, in, nil); r.NeedsApproval || strings.Join(toStrings(starts(r)), ",") != "create,create,create" {
		t.Fatalf("release = %+v", r)
	}
}

// A denied leg under all_or_nothing calls the others off before any is created (and nobody is
// asked); under best_effort the others go on, with the campaign's approval when one needs it.
func TestReleaseDeniedLeg(t *testing.T) {
	f := newFixture(t)
	out, in := checked(t, f, AllOrNothing, workflow.StatusAwaitingApproval, workflow.StatusRejected, workflow.StatusCreating)
	r := release(t, f, out, in, nil)
	if r.NeedsApproval || strings.Join(toStrings(starts(r)), ",") != "fail,fail,fail" {
		t.Fatalf("all_or_nothing release = %+v", r)
	}
	if f := r.Legs[1].Input.Failure; f.Error != workflow.FailureGovernanceDenied || f.Cause != "checked: rejected" {
		t.Errorf("denied leg's failure = %+v", f)
	}
	for _, i := range []int{0, 2} {
		f := r.Legs[i].Input.Failure
		if f.Error != workflow.FailureCampaignCalledOff || !strings.Contains(f.Cause, "sim-seller-2") || !strings.Contains(f.Cause, "all_or_nothing") {
			t.Errorf("leg %d's failure = %+v", i, f)
		}
	}

	g := newFixture(t)
	out, in = checked(t, g, BestEffort, workflow.StatusAwaitingApproval, workflow.StatusRejected, workflow.StatusCreating)
	if r := release(t, g, out, in, nil); !r.NeedsApproval {
		t.Fatalf("best_effort release = %+v", r)
	}
	r = release(t, g, out, in, func(ti *TaskInput) { ti.Approval = &workflow.ApprovalOutput{Decision: "approved"} })
	if strings.Join(toStrings(starts(r)), ",") != "create,fail,create" {
		t.Fatalf("best_effort approved release = %+v", r)
	}
}

// A check that failed after its retries (the Map's Catch) is that leg's failure.
func TestReleaseFailedCheck(t *testing.T) {
	f := newFixture(t)
	out, in := checked(t, f, BestEffort, workflow.StatusCreating, workflow.StatusCheckingGovernance, workflow.StatusCreating)
	failure := &workflow.StepError{Error: "TransientError", Cause: "governance unreachable"}
	r := release(t, f, out, in, func(ti *TaskInput) { ti.Checks[1].Failure = failure })
	if strings.Join(toStrings(starts(r)), ",") != "create,fail,create" || *r.Legs[1].Input.Failure != *failure {
		t.Fatalf("release = %+v", r)
	}
	// Over the threshold, the approval covers the two legs checked (13,500.00 USD), not the one
	// whose check failed: that leg is not bought whatever the decision.
	r = releaseUnder(t, policyAt(t, "13500.00"), f.store, out, in, func(ti *TaskInput) { ti.Checks[1].Failure = failure })
	if !r.NeedsApproval || !strings.Contains(r.Why, "total 13500.00 USD") ||
		strings.Join(r.Covers, ",") != out.Legs[0].OperationID+","+out.Legs[2].OperationID {
		t.Fatalf("release over the threshold with a failed check = %+v", r)
	}
}

// Legs that are not the campaign's are refused, not started.
func TestReleaseRefusesOtherLegs(t *testing.T) {
	f := newFixture(t)
	out, in := checked(t, f, BestEffort)
	for _, mod := range []func(*TaskInput){
		func(ti *TaskInput) { ti.Legs = ti.Legs[:2] },
		func(ti *TaskInput) { ti.Checks[0].OperationID = "mb-other" },
		func(ti *TaskInput) { ti.Legs[1].OperationID = ti.Legs[0].OperationID },
	} {
		task := TaskInput{Action: ActionRelease, Tenant: "acme", CampaignID: out.CampaignID, Legs: append([]LegInput{}, in.Legs...)}
		for _, l := range in.Legs {
			task.Checks = append(task.Checks, LegCheck{OperationID: l.OperationID})
		}
		mod(&task)
		raw, _ := json.Marshal(task)
		if _, err := NewSettler(f.store, nil, testPolicy(t)).Handle(context.Background(), raw); err == nil || !strings.Contains(err.Error(), "legs") {
			t.Errorf("release of other legs: err = %v", err)
		}
	}
}

func toStrings(es []workflow.LegEntry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = string(e)
	}
	return out
}

// A leg whose governance approval lapsed before the campaign's decision is checked again first.
func TestReleaseRechecksALapsedLeg(t *testing.T) {
	f := newFixture(t)
	out, in := checked(t, f, BestEffort, workflow.StatusAwaitingApproval, workflow.StatusCreating, workflow.StatusCreating)
	lapsed := time.Now().Add(-time.Minute)
	op, err := f.store.GetOperation(context.Background(), "acme", out.Legs[0].OperationID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.UpdateFields(context.Background(), "acme", op.ID, op.Version, record.Patch{GovernanceExpiresAt: &lapsed}); err != nil {
		t.Fatal(err)
	}
	r := release(t, f, out, in, func(ti *TaskInput) { ti.Approval = &workflow.ApprovalOutput{Decision: "approved"} })
	if strings.Join(toStrings(starts(r)), ",") != "check,create,create" {
		t.Fatalf("release = %+v", r)
	}
}

// otherCurrency reads leg id's operation as if it were in EUR: a total that cannot be summed.
type otherCurrency struct {
	*ledger.Store
	id string
}

func (o otherCurrency) GetOperation(ctx context.Context, tenant, id string) (*record.Operation, error) {
	op, err := o.Store.GetOperation(ctx, tenant, id)
	if err == nil && id == o.id {
		op.Currency = "EUR"
	}
	return op, err
}

// A total that cannot be summed exactly fails closed: the campaign asks a person (whose request
// then refuses to show the amount, so nothing is bought), it is never let through unasked.
func TestReleaseAnUnsummableTotalNeedsAPerson(t *testing.T) {
	f := newFixture(t)
	out, in := checked(t, f, AllOrNothing, workflow.StatusCreating, workflow.StatusCreating, workflow.StatusCreating)
	r := releaseUnder(t, testPolicy(t), otherCurrency{f.store, out.Legs[1].OperationID}, out, in, nil)
	if !r.NeedsApproval || len(r.Legs) != 0 || !strings.Contains(r.Why, "cannot be shown exactly") {
		t.Fatalf("release with a leg in EUR = %+v", r)
	}
}
