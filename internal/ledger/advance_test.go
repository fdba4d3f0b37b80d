package ledger_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/workflow"
)

// working returns the tenant's operation id moved to working, with token parked when set.
func working(t *testing.T, s *ledger.Store, id, token string) *record.Operation {
	t.Helper()
	ctx := context.Background()
	mustCreate(t, s, newOp(id))
	for _, to := range []workflow.Status{workflow.StatusCreating, workflow.StatusSubmitted, workflow.StatusWorking} {
		if _, err := s.Transition(ctx, "acme", id, to, record.AnyVersion, record.Patch{Actor: "test"}); err != nil {
			t.Fatalf("to %s: %v", to, err)
		}
	}
	if token != "" {
		if _, err := s.SetTaskToken(ctx, "acme", id, token); err != nil {
			t.Fatal(err)
		}
	}
	op, err := s.GetOperation(ctx, "acme", id)
	if err != nil {
		t.Fatal(err)
	}
	return op
}

// fullPatch sets every field a Patch can change, so that ApplyTo is held to all of them: a
// field added to Patch and written by the ledger but not applied fails the comparison below.
func fullPatch(t *testing.T) record.Patch {
	t.Helper()
	s := func(v string) *string { return &v }
	at := time.Date(2099, 3, 4, 5, 6, 7, 890, time.FixedZone("x", 3600))
	p := record.Patch{
		SellerTaskID: s("task-9"), MediaBuyID: s("mb-9"), GovernanceCheckID: s("chk-9"), GovernanceContext: s("ctx-9"),
		GovernanceExpiresAt: &at, WebhookTokenHash: s("hash-9"), Reason: s("done"), ErrorCode: s("E9"), Deadline: &at,
		ExecutionName: s("exec-9"), SellerPackages: []record.PackageBudget{{PackageID: "pkg-9", Budget: "10.00"}},
		BudgetTotal: s("1400.00"), EventCurrency: "USD", SellerState: s("active"),
		Actor: "test", EventType: record.EventWebhook, Detail: []byte(`{"a":1}`),
	}
	v := reflect.ValueOf(p)
	for i := range v.NumField() {
		if name := v.Type().Field(i).Name; name != "From" && v.Field(i).IsZero() {
			t.Fatalf("fullPatch leaves %s unset", name)
		}
	}
	return p
}

// Advance returns exactly what a read after it would, without that read, and takes the token.
func TestAdvanceReturnsWhatItWrote(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	op := working(t, s, "op-a", "tok-a")

	got, err := s.Advance(ctx, op, workflow.StatusCompleted, fullPatch(t), true)
	if err != nil {
		t.Fatal(err)
	}
	read, err := s.GetOperation(ctx, "acme", "op-a")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, read) {
		t.Fatalf("Advance returned\n%+v\nthe table holds\n%+v", got, read)
	}
	if got.TaskToken != "" || got.Status != workflow.StatusCompleted || got.Version != op.Version+1 {
		t.Fatalf("advanced: status %s version %d token %q", got.Status, got.Version, got.TaskToken)
	}
	// The token is taken: another waker's clear finds it gone.
	if err := s.ClearTaskToken(ctx, "acme", "op-a", "tok-a"); !errors.Is(err, record.ErrTokenMismatch) {
		t.Fatalf("clear after the take: err = %v, want ErrTokenMismatch", err)
	}
	evs, err := s.ListEvents(ctx, "acme", "op-a", 100, "")
	if err != nil {
		t.Fatal(err)
	}
	last := evs.Items[len(evs.Items)-1]
	if last.Type != record.EventWebhook || last.To != workflow.StatusCompleted || last.Version != got.Version || last.Amount != "1400.00" {
		t.Fatalf("event = %+v", last)
	}
	// Without take the token stays.
	other := working(t, s, "op-b", "tok-b")
	if got, err := s.Advance(ctx, other, workflow.StatusInputRequired, record.Patch{Actor: "test"}, false); err != nil || got.TaskToken != "tok-b" {
		t.Fatalf("advance keeping the token: %+v, %v", got, err)
	}
	if read, _ := s.GetOperation(ctx, "acme", "op-b"); read.TaskToken != "tok-b" {
		t.Fatalf("token %q stored, want tok-b", read.TaskToken)
	}
}

// Advance refuses when anything it did not see changed, and says from what to try again.
func TestAdvanceRefusesWhatItDidNotSee(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := context.Background()
	op := working(t, s, "op-c", "")

	// A token parked after the read: the advance must not miss it (the lost-wakeup race).
	if _, err := s.SetTaskToken(ctx, "acme", "op-c", "tok-late"); err != nil {
		t.Fatal(err)
	}
	_, err := s.Advance(ctx, op, workflow.StatusCompleted, record.Patch{Actor: "test"}, false)
	te, ok := errors.AsType[*record.TransitionError](err)
	if !ok || te.Kind != record.ConflictVersion || te.Current.TaskToken != "tok-late" {
		t.Fatalf("advance over a token it did not see: %v, want a version conflict with the token", err)
	}
	// Another writer's update since the read.
	reason := "r"
	if _, err := s.UpdateFields(ctx, "acme", "op-c", te.Current.Version, record.Patch{Reason: &reason}); err != nil {
		t.Fatal(err)
	}
	_, err = s.Advance(ctx, te.Current, workflow.StatusCompleted, record.Patch{Actor: "test"}, true)
	if te, ok = errors.AsType[*record.TransitionError](err); !ok || te.Kind != record.ConflictVersion || te.Current.Reason != "r" {
		t.Fatalf("advance over an update it did not see: %v, want a version conflict", err)
	}
	done, err := s.Advance(ctx, te.Current, workflow.StatusCompleted, record.Patch{Actor: "test"}, true)
	if err != nil || done.Reason != "r" || done.TaskToken != "" {
		t.Fatalf("advance from the current operation: %+v, %v", done, err)
	}
	// Moved on by another writer: terminal, not to be tried again.
	_, err = s.Advance(ctx, te.Current, workflow.StatusCompleted, record.Patch{Actor: "test"}, false)
	if te, ok = errors.AsType[*record.TransitionError](err); !ok || te.Kind != record.ConflictTerminal {
		t.Fatalf("advance of a completed operation: %v, want a terminal conflict", err)
	}
	if _, err := s.Advance(ctx, done, workflow.StatusWorking, record.Patch{}, false); !errors.Is(err, record.ErrInvalidArgument) {
		t.Fatalf("an illegal move: err = %v", err)
	}
	gone := *done
	gone.ID = "op-none"
	gone.Status = workflow.StatusWorking
	if _, err := s.Advance(ctx, &gone, workflow.StatusCompleted, record.Patch{}, false); !errors.Is(err, record.ErrNotFound) {
		t.Fatalf("a missing operation: err = %v, want ErrNotFound", err)
	}
}
