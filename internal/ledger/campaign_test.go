package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/buyflow/buyflow/internal/record"
)

func newCampaign(tenant, id string) record.Campaign {
	return record.Campaign{
		ID: id, Tenant: tenant, GovernanceAgentID: "gov", PlanID: "plan-1", Policy: "best_effort",
		BudgetTotal: "30000.00", Currency: "USD", Requester: "dev:" + tenant,
		Legs: []record.CampaignLeg{
			{OperationID: "mb-a", SellerID: "seller-a", PONumber: "PO-A", Amount: "10000.00"},
			{OperationID: "mb-b", SellerID: "seller-b", PONumber: "PO-B", Amount: "20000.00"},
		},
	}
}

func TestCampaignRoundTripAndConflict(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	if _, err := s.CreateCampaign(ctx, newCampaign("acme", "cp-1")); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetCampaign(ctx, "acme", "cp-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Legs) != 2 || got.Legs[1].Amount != "20000.00" || got.Legs[0].OperationID != "mb-a" || got.CreatedAt.IsZero() {
		t.Fatalf("round trip: %+v", got)
	}
	_, err = s.CreateCampaign(ctx, newCampaign("acme", "cp-1"))
	if !errors.Is(err, record.ErrConflict) {
		t.Fatalf("second create: err = %v, want a conflict", err)
	}
}

// Another tenant's campaign, and one whose id tries to spell another key, are not found.
func TestCampaignTenantIsolation(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	if _, err := s.CreateCampaign(ctx, newCampaign("acme", "cp-1")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ tenant, id string }{{"other", "cp-1"}, {"acme", "cp-1#x"}, {"acme#CAMPAIGN", "cp-1"}} {
		if _, err := s.GetCampaign(ctx, c.tenant, c.id); !errors.Is(err, record.ErrNotFound) {
			t.Errorf("get %s/%s: err = %v, want not found", c.tenant, c.id, err)
		}
	}
	page, err := s.ListCampaigns(ctx, "other", 10, "")
	if err != nil || len(page.Items) != 0 {
		t.Fatalf("other tenant's list = %+v, %v", page.Items, err)
	}
	// The campaign listing and the operations listing share an index and never mix.
	ops, err := s.ListOperations(ctx, "acme", record.ListOptions{})
	if err != nil || len(ops.Items) != 0 {
		t.Fatalf("operations of acme = %+v, %v", ops.Items, err)
	}
}

func TestListCampaignsNewestFirstWithCursor(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	for i := range 3 {
		if _, err := s.CreateCampaign(ctx, newCampaign("acme", fmt.Sprintf("cp-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	mustCreate(t, s, newOp("op-1"))
	first, err := s.ListCampaigns(ctx, "acme", 2, "")
	if err != nil || len(first.Items) != 2 || first.Cursor == "" || first.Items[0].ID != "cp-2" {
		t.Fatalf("first page = %+v, %v", first, err)
	}
	second, err := s.ListCampaigns(ctx, "acme", 2, first.Cursor)
	if err != nil || len(second.Items) != 1 || second.Items[0].ID != "cp-0" {
		t.Fatalf("second page = %+v, %v", second, err)
	}
	if _, err := s.ListCampaigns(ctx, "other", 2, first.Cursor); !errors.Is(err, record.ErrInvalidCursor) {
		t.Fatalf("another tenant's cursor: err = %v", err)
	}
	if _, err := s.ListOperations(ctx, "acme", record.ListOptions{Cursor: first.Cursor}); !errors.Is(err, record.ErrInvalidCursor) {
		t.Fatalf("a campaign cursor in the operations listing: err = %v", err)
	}
}

// The outcome is recorded once: the same again is a retry, another one a conflict, and an
// unknown campaign is not created by it.
func TestSettleCampaignOnce(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	if _, err := s.CreateCampaign(ctx, newCampaign("acme", "cp-1")); err != nil {
		t.Fatal(err)
	}
	if err := s.SettleCampaign(ctx, "acme", "cp-1", "failed", "0.00"); err != nil {
		t.Fatal(err)
	}
	if err := s.SettleCampaign(ctx, "acme", "cp-1", "failed", "0.00"); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if err := s.SettleCampaign(ctx, "acme", "cp-1", "completed", "30000.00"); !errors.Is(err, record.ErrConflict) {
		t.Fatalf("another outcome: err = %v", err)
	}
	got, err := s.GetCampaign(ctx, "acme", "cp-1")
	if err != nil || got.Outcome != "failed" || got.Committed != "0.00" || got.SettledAt.IsZero() {
		t.Fatalf("campaign = %+v, %v", got, err)
	}
	if err := s.SettleCampaign(ctx, "other", "cp-1", "failed", "0.00"); !errors.Is(err, record.ErrConflict) {
		t.Fatalf("another tenant's campaign: err = %v", err)
	}
	if _, err := s.GetCampaign(ctx, "other", "cp-1"); !errors.Is(err, record.ErrNotFound) {
		t.Fatalf("settle created another tenant's item: %v", err)
	}
}

// A campaign whose own step failed records failed with its reason and what its legs committed,
// once; a campaign already settled keeps its outcome and gets no reason.
func TestFailCampaignRecordsTheReason(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	for _, id := range []string{"cp-f", "cp-s"} {
		if _, err := s.CreateCampaign(ctx, newCampaign("acme", id)); err != nil {
			t.Fatal(err)
		}
	}
	why := "The campaign stopped before its legs were placed."
	if err := s.FailCampaign(ctx, "acme", "cp-f", "1000.00", why); err != nil {
		t.Fatal(err)
	}
	if err := s.FailCampaign(ctx, "acme", "cp-f", "1000.00", why); err != nil {
		t.Fatalf("retry: %v", err)
	}
	got, err := s.GetCampaign(ctx, "acme", "cp-f")
	if err != nil || got.Outcome != "failed" || got.Reason != why || got.Committed != "1000.00" || got.SettledAt.IsZero() || got.Version < 2 {
		t.Fatalf("campaign = %+v, %v", got, err)
	}
	if err := s.FailCampaign(ctx, "acme", "cp-f", "0.00", " "); !errors.Is(err, record.ErrInvalidArgument) {
		t.Fatalf("no reason: err = %v", err)
	}
	if err := s.SettleCampaign(ctx, "acme", "cp-s", "completed", "30000.00"); err != nil {
		t.Fatal(err)
	}
	if err := s.FailCampaign(ctx, "acme", "cp-s", "30000.00", why); !errors.Is(err, record.ErrConflict) {
		t.Fatalf("a settled campaign: err = %v", err)
	}
	if got, err := s.GetCampaign(ctx, "acme", "cp-s"); err != nil || got.Outcome != "completed" || got.Reason != "" {
		t.Fatalf("settled campaign = %+v, %v", got, err)
	}
}

// The campaign names its latest approval; another tenant's campaign and a missing one are not
// found and nothing is written for them.
func TestSetCampaignApproval(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	if _, err := s.CreateCampaign(ctx, newCampaign("acme", "cp-1")); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"apr_first", "apr_escalated"} {
		if err := s.SetCampaignApproval(ctx, "acme", "cp-1", id); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.GetCampaign(ctx, "acme", "cp-1")
	if err != nil || got.ApprovalID != "apr_escalated" || len(got.Legs) != 2 {
		t.Fatalf("campaign = %+v, %v", got, err)
	}
	for _, c := range []struct{ tenant, id string }{{"other", "cp-1"}, {"acme", "cp-missing"}} {
		if err := s.SetCampaignApproval(ctx, c.tenant, c.id, "apr_x"); !errors.Is(err, record.ErrNotFound) {
			t.Errorf("set approval of %s/%s: err = %v, want not found", c.tenant, c.id, err)
		}
	}
	if _, err := s.GetCampaign(ctx, "other", "cp-1"); !errors.Is(err, record.ErrNotFound) {
		t.Errorf("the refused write created another tenant's campaign: %v", err)
	}
	if err := s.SetCampaignApproval(ctx, "acme", "cp-1", ""); !errors.Is(err, record.ErrInvalidArgument) {
		t.Errorf("empty approval id: err = %v", err)
	}
}

// A campaign's own timeline is read under its id, by its tenant only.
func TestCampaignTimeline(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	if _, err := s.CreateCampaign(ctx, newCampaign("acme", "cp-1")); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendEvent(ctx, "acme", "cp-1", record.Event{Type: record.EventApprovalRequested, Actor: "system"}); err != nil {
		t.Fatal(err)
	}
	page, err := s.ListEvents(ctx, "acme", "cp-1", 10, "")
	if err != nil || len(page.Items) != 1 || page.Items[0].Type != record.EventApprovalRequested {
		t.Fatalf("campaign timeline = %+v, %v", page.Items, err)
	}
	for _, c := range []struct{ tenant, id string }{{"other", "cp-1"}, {"acme", "cp-none"}} {
		if _, err := s.ListEvents(ctx, c.tenant, c.id, 10, ""); !errors.Is(err, record.ErrNotFound) {
			t.Errorf("timeline of %s/%s: err = %v, want not found", c.tenant, c.id, err)
		}
	}
}

// The campaign's version orders its status events: 1 when created, and one more for naming its
// approval and for its outcome (a campaign stored before it counted starts from 1).
func TestCampaignVersionCountsItsWrites(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	c := newCampaign("acme", "cp-v")
	c.NotifySlack = "U024BE7LH"
	if _, err := s.CreateCampaign(ctx, c); err != nil {
		t.Fatal(err)
	}
	version := func() int64 {
		t.Helper()
		got, err := s.GetCampaign(ctx, "acme", "cp-v")
		if err != nil {
			t.Fatal(err)
		}
		if got.NotifySlack != "U024BE7LH" {
			t.Errorf("notify_slack = %q", got.NotifySlack)
		}
		return got.Version
	}
	if v := version(); v != 1 {
		t.Fatalf("created at version %d", v)
	}
	if err := s.SetCampaignApproval(ctx, "acme", "cp-v", "apr_1"); err != nil {
		t.Fatal(err)
	}
	if v := version(); v != 2 {
		t.Fatalf("after the approval, version %d", v)
	}
	if err := s.SettleCampaign(ctx, "acme", "cp-v", "completed", "30000.00"); err != nil {
		t.Fatal(err)
	}
	if v := version(); v != 3 {
		t.Fatalf("after the outcome, version %d", v)
	}
}
