package submit

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/buytest"
	"github.com/buyflow/buyflow/internal/record"
)

func TestGetShowsTheLatestApprovalWithoutLinksOrTokens(t *testing.T) {
	svc, store, _ := newService(t)
	ctx := context.Background()
	out, err := svc.Submit(ctx, acme, "key-appr-01", buytest.Marshal(t, buytest.Example(t, "media-buy.json")))
	if err != nil {
		t.Fatal(err)
	}
	id := out.OperationID
	if v, err := svc.Get(ctx, "acme", id); err != nil || v.Approval != nil {
		t.Fatalf("before any approval: %+v, %v", v.Approval, err)
	}

	// The ledger refuses a decision after the expiry by its own clock (the real one here).
	expires := time.Now().UTC().Add(2 * time.Hour).Truncate(time.Second)
	request := func(apr, tenant, opID string, round int, escalation bool, approvers, escalateTo []string) {
		t.Helper()
		if _, err := store.CreateApproval(ctx, record.Approval{ID: apr, Tenant: tenant, OperationID: opID, TaskToken: "AQB-secret-token-" + apr,
			Approvers: approvers, EscalationApprovers: escalateTo, Amount: "20000.50", Currency: "USD", Reason: "policy_threshold", ExpiresAt: expires}); err != nil {
			t.Fatal(err)
		}
		d, _ := json.Marshal(map[string]any{"approval_id": apr, "round": round, "escalation": escalation})
		if err := store.AppendEvent(ctx, "acme", id, record.Event{Type: record.EventApprovalRequested, Actor: "system", Detail: d}); err != nil {
			t.Fatal(err)
		}
	}
	request("apr_first", "acme", id, 0, false, []string{"U123", "U456"}, []string{"S0FINANCE"})

	v, err := svc.Get(ctx, "acme", id)
	if err != nil {
		t.Fatal(err)
	}
	a := v.Approval
	if a == nil || a.ApprovalID != "apr_first" || a.Status != "pending" || !slices.Equal(a.Approvers, []string{"U123", "U456"}) ||
		a.ExpiresAt != expires.Format(time.RFC3339) || !slices.Equal(a.EscalatesTo, []string{"S0FINANCE"}) || a.Reason != "policy_threshold" ||
		a.RequestedAt == "" || a.DecidedBy != "" {
		t.Fatalf("approval = %+v", a)
	}
	raw, _ := json.Marshal(v)
	if strings.Contains(string(raw), "AQB-secret") || strings.Contains(string(raw), "sig=") {
		t.Fatalf("the projection carries a token or link: %s", raw)
	}

	// The escalation round is the latest; once decided it says who and when.
	request("apr_second", "acme", id, 1, true, []string{"S0FINANCE"}, nil)
	if _, err := store.Decide(ctx, "apr_second", record.Decision{Outcome: record.ApprovalApproved, By: "S0FINANCE"}); err != nil {
		t.Fatal(err)
	}
	v, err = svc.Get(ctx, "acme", id)
	if err != nil {
		t.Fatal(err)
	}
	if a := v.Approval; a == nil || a.ApprovalID != "apr_second" || a.Status != "approved" || !a.Escalation || a.Round != 1 ||
		a.DecidedBy != "S0FINANCE" || a.DecidedAt == "" || len(a.EscalatesTo) != 0 {
		t.Fatalf("after the escalation's decision: %+v", a)
	}

	// An approval that belongs to another tenant's operation is never shown, even when this
	// operation's timeline names it.
	request("apr_other", "globex", "mb-globex", 2, false, []string{"UEVIL"}, nil)
	v, err = svc.Get(ctx, "acme", id)
	if err != nil || v.Approval != nil {
		t.Fatalf("another tenant's approval: %+v, %v", v.Approval, err)
	}
}
