package campaign

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/buytest"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/workflow"
)

// pushes is a governance agent's sync_plans as the Settler sees it: it records every intent
// it is handed and fails the first ones with fails, then holds the plan active.
type pushes struct {
	plan  string
	fails []error
	sent  []adcp.Intent
	// version is the AdCP version the agent speaks ("" = 3.1).
	version string
}

func (p *pushes) Speaks(context.Context, string) (string, error) {
	if p.version == "" {
		return "3.1", nil
	}
	return p.version, nil
}

func (p *pushes) SyncPlans(_ context.Context, _ string, in adcp.Intent) (*adcp.SyncPlansResult, error) {
	p.sent = append(p.sent, in)
	if len(p.fails) > 0 {
		err := p.fails[0]
		p.fails = p.fails[1:]
		return nil, err
	}
	return &adcp.SyncPlansResult{Plans: []adcp.SyncedPlan{{PlanID: p.plan, Status: "active"}}}, nil
}

// submitted submits the example campaign (it pushes its plan) and returns its stored record.
func submitted(t *testing.T, f fixture) *record.Campaign {
	t.Helper()
	out, err := f.svc.Submit(context.Background(), acme, "plan-key-"+t.Name(), buytest.Marshal(t, buytest.Example(t, "campaign.json")))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := f.store.GetCampaign(context.Background(), "acme", out.CampaignID)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// attempts lists the Attempt of each push.
func (p *pushes) attempts() []int {
	var out []int
	for _, in := range p.sent {
		out = append(out, in.Attempt)
	}
	return out
}

func storedPlanRecord(t *testing.T, f fixture, id string) *record.Intent {
	t.Helper()
	rec, err := f.store.GetCampaign(context.Background(), "acme", id)
	if err != nil {
		t.Fatal(err)
	}
	in, err := rec.PlanIntentRecord()
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// A push whose answer was lost (the agent may hold the plan) is followed by a resend of the
// same key and bytes: an agent without a replay window refuses it rather than apply it twice.
// Before the claims, the second push was a first send again.
func TestPlanPushAfterALostAnswerIsAResend(t *testing.T) {
	f := newFixture(t)
	rec := submitted(t, f)
	agent := &pushes{plan: rec.PlanID, fails: []error{&adcp.Error{Kind: adcp.KindTransport, Tool: adcp.ToolSyncPlans, Recovery: adcp.RecoveryTransient, Message: "connection reset"}}}
	s := NewSettler(f.store, agent, testPolicy(t))
	_, err := s.SyncPlans(context.Background(), "acme", rec.ID)
	var tr *workflow.TransientError
	if !errors.As(err, &tr) {
		t.Fatalf("the push whose answer was lost: %v, want a TransientError", err)
	}
	if got, err := s.SyncPlans(context.Background(), "acme", rec.ID); err != nil || got.Status != "active" {
		t.Fatalf("the retried push: %+v, %v", got, err)
	}
	if len(agent.sent) != 2 || agent.sent[0].Attempt != 0 || agent.sent[1].Attempt != 1 {
		t.Fatalf("push attempts %v, want a first send (0) and a resend (1)", agent.attempts())
	}
	if agent.sent[0].Key != agent.sent[1].Key || string(agent.sent[0].Body) != string(agent.sent[1].Body) || !agent.sent[1].Created.Equal(agent.sent[0].Created) {
		t.Errorf("the resend is not the first send's intent:\n%s %s\n%s %s", agent.sent[0].Key, agent.sent[0].Body, agent.sent[1].Key, agent.sent[1].Body)
	}
	if in := storedPlanRecord(t, f, rec.ID); in.Claims != 2 || in.Unsent {
		t.Errorf("the plan after two pushes: %d claims, unsent %v", in.Claims, in.Unsent)
	}
}

// A push the agent's open breaker refused sent nothing: it is released, and the next push is
// a first send again, its replay window starting then.
func TestPlanPushRefusedByTheBreakerStaysAFirstSend(t *testing.T) {
	f := newFixture(t)
	rec := submitted(t, f)
	agent := &pushes{plan: rec.PlanID, fails: []error{&adcp.UnavailableError{Agent: rec.GovernanceAgentID, Since: time.Now(), RetryAt: time.Now().Add(time.Minute)}}}
	s := NewSettler(f.store, agent, testPolicy(t))
	if _, err := s.SyncPlans(context.Background(), "acme", rec.ID); err == nil {
		t.Fatal("the refused push succeeded")
	}
	if in := storedPlanRecord(t, f, rec.ID); !in.Unsent || in.Claims != 1 {
		t.Fatalf("the plan after the refusal: %d claims, unsent %v; want released", in.Claims, in.Unsent)
	}
	if _, err := s.SyncPlans(context.Background(), "acme", rec.ID); err != nil {
		t.Fatalf("the push after the refusal: %v", err)
	}
	if len(agent.sent) != 2 || agent.sent[1].Attempt != 0 || !agent.sent[1].Created.After(agent.sent[0].Created) {
		t.Fatalf("push attempts %v, want the second a first send (0), its window from then", agent.attempts())
	}
}

// A plan record that does not hold a sync_plans intent is refused, and nothing is pushed.
func TestPlanPushOfAnUnreadablePlanSendsNothing(t *testing.T) {
	f := newFixture(t)
	rec := submitted(t, f)
	for _, bad := range []string{`not json`, `{"task":"create_media_buy","key":"k","body":"e30="}`, `{"task":"sync_plans","key":"","body":"e30="}`} {
		if _, err := storedPlan(&record.Intent{Request: []byte(bad)}); err == nil {
			t.Errorf("plan %s read as an intent", bad)
		}
	}
	agent := &pushes{plan: rec.PlanID}
	if got, err := NewSettler(f.store, agent, testPolicy(t)).SyncPlans(context.Background(), "acme", "cp-missing"); err == nil {
		t.Fatalf("push of a missing campaign: %+v", got)
	}
	if len(agent.sent) != 0 {
		t.Fatalf("%d pushes of a missing campaign", len(agent.sent))
	}
}

// The plan is fixed at submit, before any agent is asked; a governance agent that speaks 3.2
// gets it in 3.2 (a 3.2-only agent refuses a 3.1 request), with the same key and arguments,
// and its resend repeats those bytes. One that speaks 3.1 gets the stored bytes.
func TestPlanPushSpeaksTheGovernanceAgentsVersion(t *testing.T) {
	f := newFixture(t)
	rec := submitted(t, f)
	stored, err := storedPlan(storedPlanRecord(t, f, rec.ID))
	if err != nil {
		t.Fatal(err)
	}
	agent := &pushes{plan: rec.PlanID, version: "3.2", fails: []error{&adcp.Error{Kind: adcp.KindTransport, Tool: adcp.ToolSyncPlans, Recovery: adcp.RecoveryTransient, Message: "connection reset"}}}
	s := NewSettler(f.store, agent, testPolicy(t))
	if _, err := s.SyncPlans(context.Background(), "acme", rec.ID); err == nil {
		t.Fatal("the first push succeeded")
	}
	if got, err := s.SyncPlans(context.Background(), "acme", rec.ID); err != nil || got.Status != "active" {
		t.Fatalf("the resend: %+v, %v", got, err)
	}
	var sent map[string]any
	if err := json.Unmarshal(agent.sent[0].Body, &sent); err != nil {
		t.Fatal(err)
	}
	var orig map[string]any
	if err := json.Unmarshal(stored.Body, &orig); err != nil {
		t.Fatal(err)
	}
	if sent["adcp_version"] != "3.2" || orig["adcp_version"] != "3.1" || agent.sent[0].Key != stored.Key {
		t.Fatalf("sent adcp_version %v key %s; stored %v key %s", sent["adcp_version"], agent.sent[0].Key, orig["adcp_version"], stored.Key)
	}
	delete(sent, "adcp_version")
	delete(orig, "adcp_version")
	if !reflect.DeepEqual(sent, orig) {
		t.Errorf("the arguments changed:\n%v\n%v", sent, orig)
	}
	if string(agent.sent[1].Body) != string(agent.sent[0].Body) || agent.sent[1].Attempt != 1 {
		t.Errorf("the resend is not the first send's bytes:\n%s\n%s", agent.sent[0].Body, agent.sent[1].Body)
	}

	f31 := newFixture(t)
	rec31 := submitted(t, f31)
	stored31, err := storedPlan(storedPlanRecord(t, f31, rec31.ID))
	if err != nil {
		t.Fatal(err)
	}
	agent31 := &pushes{plan: rec31.PlanID}
	if _, err := NewSettler(f31.store, agent31, testPolicy(t)).SyncPlans(context.Background(), "acme", rec31.ID); err != nil {
		t.Fatal(err)
	}
	if string(agent31.sent[0].Body) != string(stored31.Body) {
		t.Errorf("a 3.1 agent got other bytes than the stored plan:\n%s\n%s", agent31.sent[0].Body, stored31.Body)
	}
}
