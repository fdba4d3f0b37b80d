package campaign

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/buytest"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/workflow"
)

// submitAndEnd submits the example campaign under policy and moves each leg's operation to the
// status given, as the legs' own stages would.
func submitAndEnd(t *testing.T, f fixture, policy Policy, ends ...workflow.Status) api.CampaignSubmitted {
	t.Helper()
	ctx := context.Background()
	m := buytest.Example(t, "campaign.json")
	m["policy"] = string(policy)
	out, err := f.svc.Submit(ctx, acme, "settle-key-"+string(policy), buytest.Marshal(t, m))
	if err != nil {
		t.Fatal(err)
	}
	for i, to := range ends {
		id := out.Legs[i].OperationID
		op, err := f.store.Transition(ctx, "acme", id, workflow.StatusCreating, 1, record.Patch{})
		if err != nil {
			t.Fatal(err)
		}
		reason := "the seller said " + string(to)
		if _, err := f.store.Transition(ctx, "acme", id, to, op.Version, record.Patch{Reason: &reason}); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func settle(t *testing.T, f fixture, out api.CampaignSubmitted) Settled {
	t.Helper()
	raw, _ := json.Marshal(TaskInput{Action: ActionSettle, Tenant: "acme", CampaignID: out.CampaignID})
	got, err := NewSettler(f.store, nil, testPolicy(t)).Handle(context.Background(), raw)
	if err != nil {
		t.Fatal(err)
	}
	return got.(Settled)
}

func TestSettleAllOrNothingNamesThePlacedLegs(t *testing.T) {
	f := newFixture(t)
	out := submitAndEnd(t, f, AllOrNothing, workflow.StatusCompleted, workflow.StatusFailed, workflow.StatusCompleted)
	s := settle(t, f, out)
	if s.Status != PartiallyCompleted || s.Committed != "13500.00" || len(s.Compensate) != 2 ||
		s.Compensate[0].OperationID != out.Legs[0].OperationID || s.Compensate[1].OperationID != out.Legs[2].OperationID {
		t.Fatalf("settled = %+v", s)
	}
	if !strings.Contains(s.Compensate[0].Reason, "sim-seller-2") || !strings.Contains(s.Compensate[0].Reason, "the seller said failed") {
		t.Fatalf("reason %q does not say which leg and why", s.Compensate[0].Reason)
	}
}

func TestSettleBestEffortCancelsNothing(t *testing.T) {
	f := newFixture(t)
	out := submitAndEnd(t, f, BestEffort, workflow.StatusCompleted, workflow.StatusFailed, workflow.StatusCompleted)
	if s := settle(t, f, out); s.Status != PartiallyCompleted || len(s.Compensate) != 0 || s.Committed != "13500.00" {
		t.Fatalf("settled = %+v", s)
	}
}

func TestSettleAllCompleted(t *testing.T) {
	f := newFixture(t)
	out := submitAndEnd(t, f, AllOrNothing, workflow.StatusCompleted, workflow.StatusCompleted, workflow.StatusCompleted)
	if s := settle(t, f, out); s.Status != Completed || len(s.Compensate) != 0 || s.Committed != "22500.00" {
		t.Fatalf("settled = %+v", s)
	}
}

func TestSettlerRefusesBadPayloads(t *testing.T) {
	f := newFixture(t)
	h := NewSettler(f.store, nil, testPolicy(t))
	for _, raw := range []string{`{"action":"nope","tenant":"acme"}`, `{"action":"settle","tenant":"acme","extra":1}`, `[]`} {
		_, err := h.Handle(context.Background(), json.RawMessage(raw))
		var invalid *workflow.InvalidInputError
		if !errors.As(err, &invalid) {
			t.Errorf("%s: err = %v", raw, err)
		}
	}
	_, err := h.Handle(context.Background(), json.RawMessage(`{"action":"settle","tenant":"other","campaign_id":"cp-x"}`))
	var terminal *workflow.TerminalError
	if !errors.As(err, &terminal) {
		t.Errorf("unknown campaign: err = %v", err)
	}
	_, err = h.Handle(context.Background(), json.RawMessage(`{"action":"leg","tenant":"acme","operation_id":"mb-none"}`))
	var nf *workflow.NotFoundError
	if !errors.As(err, &nf) {
		t.Errorf("unknown leg: err = %v", err)
	}
}

// Under all_or_nothing a campaign whose legs ended mixed is still running (its placed legs are
// being canceled) until the Campaign execution records the outcome; best_effort's outcome is
// recorded at the first settle.
func TestOutcomeIsRecordedWhenNothingIsLeftToDo(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	out := submitAndEnd(t, f, AllOrNothing, workflow.StatusCompleted, workflow.StatusFailed, workflow.StatusCompleted)
	settle(t, f, out)
	v, err := f.svc.Get(ctx, "acme", out.CampaignID)
	if err != nil || v.Status != string(Running) || v.Committed != "13500.00" {
		t.Fatalf("while the cancels run: %+v, %v", v, err)
	}
	for _, i := range []int{0, 2} {
		reason := "canceled by the campaign"
		op, _ := f.store.GetOperation(ctx, "acme", out.Legs[i].OperationID)
		if _, err := f.store.Transition(ctx, "acme", op.ID, workflow.StatusCanceled, op.Version, record.Patch{Reason: &reason}); err != nil {
			t.Fatal(err)
		}
	}
	if s := settle(t, f, out); s.Status != Failed || len(s.Compensate) != 0 {
		t.Fatalf("after the cancels: %+v", s)
	}
	rec, err := f.store.GetCampaign(ctx, "acme", out.CampaignID)
	if err != nil || rec.Outcome != string(Failed) {
		t.Fatalf("recorded outcome = %+v, %v", rec, err)
	}
	if v, _ := f.svc.Get(ctx, "acme", out.CampaignID); v.Status != string(Failed) || v.Committed != "0.00" {
		t.Fatalf("after the outcome: %+v", v)
	}

	g := newFixture(t)
	be := submitAndEnd(t, g, BestEffort, workflow.StatusCompleted, workflow.StatusFailed, workflow.StatusCompleted)
	settle(t, g, be)
	if rec, err := g.store.GetCampaign(ctx, "acme", be.CampaignID); err != nil || rec.Outcome != string(PartiallyCompleted) {
		t.Fatalf("best_effort outcome = %+v, %v", rec, err)
	}
}
