package ledger_test

import (
	"context"
	"errors"
	"testing"

	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/workflow"
)

// An event conditioned on the operation's status is written while the operation has it, and
// not once another actor moved it on.
func TestAppendEventWhile(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	op := mustCreate(t, s, newOp("op-1"))
	if _, err := s.Transition(ctx, op.Tenant, op.ID, workflow.StatusCreating, record.AnyVersion, record.Patch{}); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendEventWhile(ctx, op.Tenant, op.ID, workflow.StatusCreating, record.Event{Type: record.EventLapsedClaimCheck, Reason: "while creating"}); err != nil {
		t.Fatalf("append while creating: %v", err)
	}
	if _, err := s.Transition(ctx, op.Tenant, op.ID, workflow.StatusCompleted, record.AnyVersion, record.Patch{}); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendEventWhile(ctx, op.Tenant, op.ID, workflow.StatusCreating, record.Event{Type: record.EventLapsedClaimCheck, Reason: "after completed"}); !errors.Is(err, record.ErrConflict) {
		t.Fatalf("append after the operation moved on: err = %v, want ErrConflict", err)
	}
	if err := s.AppendEventWhile(ctx, op.Tenant, "op-none", workflow.StatusCreating, record.Event{Type: record.EventLapsedClaimCheck}); !errors.Is(err, record.ErrNotFound) {
		t.Fatalf("append to a missing operation: err = %v, want ErrNotFound", err)
	}
	page, err := s.ListEvents(ctx, op.Tenant, op.ID, 100, "")
	if err != nil {
		t.Fatal(err)
	}
	var checks []string
	for _, e := range page.Items {
		if e.Type == record.EventLapsedClaimCheck {
			checks = append(checks, e.Reason)
		}
	}
	if len(checks) != 1 || checks[0] != "while creating" {
		t.Fatalf("lapsed claim checks %q, want only the one written while creating", checks)
	}
}
