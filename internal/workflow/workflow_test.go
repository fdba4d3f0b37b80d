package workflow

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"
)

// Terminal statuses never move, but for a placed buy's changes after placement: between
// completed and paused, and from either to canceled (a cancellation, a compensation).
func TestTerminalStatusesNeverMove(t *testing.T) {
	for _, s := range Statuses {
		if !s.Terminal() {
			continue
		}
		for _, to := range Statuses {
			if CanMove(s, to) && (!s.Placed() || !to.Placed() && to != StatusCanceled) {
				t.Errorf("terminal %s may move to %s", s, to)
			}
		}
	}
}

// A placed buy follows what its changes made of it, and a cancellation is final.
func TestPlacedBuyFollowsItsChanges(t *testing.T) {
	for _, c := range []struct {
		from, to Status
		ok       bool
	}{
		{StatusCompleted, StatusPaused, true},
		{StatusPaused, StatusCompleted, true},
		{StatusPaused, StatusCanceled, true},
		{StatusCompleted, StatusCanceled, true},
		{StatusCompleted, StatusCompleted, false},
		{StatusCanceled, StatusCompleted, false},
		{StatusCanceled, StatusPaused, false},
		{StatusWorking, StatusPaused, false},
		{StatusFailed, StatusPaused, false},
	} {
		if got := FollowsChange(c.from, c.to); got != c.ok {
			t.Errorf("FollowsChange(%s, %s) = %t, want %t", c.from, c.to, got, c.ok)
		}
	}
	// The table is every transition's condition: a late completion of the create task must
	// not resume a paused buy.
	if CanMove(StatusPaused, StatusCompleted) || slices.Contains(Predecessors(StatusCompleted), StatusPaused) {
		t.Error("paused → completed is in the transition table")
	}
	for _, s := range Statuses {
		if s.Placed() != (s == StatusCompleted || s == StatusPaused) {
			t.Errorf("%s placed = %t", s, s.Placed())
		}
	}
	if StatusPaused.Pending() {
		t.Error("a paused buy is pending: the sweep would poll a seller task that ended")
	}
}

func TestEveryLiveStatusCanEndAndReachCompletion(t *testing.T) {
	for _, s := range Statuses {
		if s.Terminal() {
			continue
		}
		for _, end := range []Status{StatusFailed, StatusCanceled, StatusExpired} {
			if !CanMove(s, end) {
				t.Errorf("%s cannot move to %s", s, end)
			}
		}
		if !reachable(s, StatusCompleted) {
			t.Errorf("%s can never reach completed", s)
		}
	}
}

func reachable(from, to Status) bool {
	seen := map[Status]bool{}
	queue := []Status{from}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		if s == to {
			return true
		}
		if seen[s] {
			continue
		}
		seen[s] = true
		queue = append(queue, Transitions[s]...)
	}
	return false
}

func TestTransitionTable(t *testing.T) {
	tests := []struct {
		from, to Status
		ok       bool
	}{
		{StatusRequested, StatusCheckingGovernance, true},
		{StatusCheckingGovernance, StatusCreating, true},
		{StatusAwaitingApproval, StatusCheckingGovernance, true}, // token lapsed during approval
		{StatusCreating, StatusSubmitted, true},
		{StatusSubmitted, StatusWorking, true},
		{StatusWorking, StatusCompleted, true},
		{StatusInputRequired, StatusAwaitingApproval, true},
		{StatusWorking, StatusSubmitted, false}, // a late "submitted" never overwrites "working"
		{StatusCompleted, StatusWorking, false},
		{StatusCreating, StatusCheckingGovernance, false},
		{StatusRequested, StatusCompleted, false},
		{StatusFailed, StatusCompleted, false},
		{Status("bogus"), StatusCompleted, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s->%s", tt.from, tt.to), func(t *testing.T) {
			if got := CanMove(tt.from, tt.to); got != tt.ok {
				t.Fatalf("CanMove = %v, want %v", got, tt.ok)
			}
		})
	}
}

func TestTransitionsNameOnlyDeclaredStatuses(t *testing.T) {
	for from, tos := range Transitions {
		if !from.Valid() {
			t.Errorf("undeclared status %q in table", from)
		}
		for _, to := range tos {
			if !to.Valid() {
				t.Errorf("%s -> undeclared %q", from, to)
			}
			if to == from {
				t.Errorf("%s moves to itself", from)
			}
		}
	}
}

func TestPredecessors(t *testing.T) {
	got := Predecessors(StatusWorking)
	want := []Status{StatusAwaitingApproval, StatusCreating, StatusSubmitted, StatusInputRequired}
	if !slices.Equal(got, want) {
		t.Fatalf("Predecessors(working) = %v, want %v", got, want)
	}
	if p := Predecessors(StatusRequested); len(p) != 0 {
		t.Fatalf("requested has predecessors %v", p)
	}
}

func TestParseStatus(t *testing.T) {
	if s, err := ParseStatus("completed"); err != nil || s != StatusCompleted {
		t.Fatalf("ParseStatus(completed) = %q, %v", s, err)
	}
	if _, err := ParseStatus("done"); err == nil {
		t.Fatal("ParseStatus(done) succeeded")
	}
}

func TestFromTaskStatus(t *testing.T) {
	tests := map[string]Status{
		"submitted": StatusSubmitted, "working": StatusWorking, "input-required": StatusInputRequired,
		"completed": StatusCompleted, "failed": StatusFailed, "rejected": StatusRejected,
		"canceled": StatusCanceled, "cancelled": StatusCanceled,
	}
	for in, want := range tests {
		if got, ok := FromTaskStatus(in); !ok || got != want {
			t.Errorf("FromTaskStatus(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{"auth-required", "unknown", "", "COMPLETED"} {
		if _, ok := FromTaskStatus(in); ok {
			t.Errorf("FromTaskStatus(%q) ok", in)
		}
	}
}

// errorType mirrors aws-lambda-go's lambda/errors.go: the reported errorType is the Go type
// name of the returned error, the element's name for a pointer.
func errorType(err error) string {
	t := reflect.TypeOf(err)
	if t.Kind() == reflect.Pointer {
		return t.Elem().Name()
	}
	return t.Name()
}

func TestTaskErrorReturnsBareNamedTypes(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"bare transient", &TransientError{Reason: "x"}, "TransientError"},
		{"wrapped terminal", fmt.Errorf("create: %w", &TerminalError{Code: "INVALID_REQUEST", Reason: "x"}), "TerminalError"},
		{"double wrapped rejected", fmt.Errorf("a: %w", fmt.Errorf("b: %w", &ApprovalRejectedError{By: "u"})), "ApprovalRejectedError"},
		{"joined deadline", errors.Join(errors.New("x"), &DeadlineExceededError{}), "DeadlineExceededError"},
		{"not found", &NotFoundError{OperationID: "op"}, "NotFoundError"},
		{"invalid input", fmt.Errorf("in: %w", &InvalidInputError{Field: "f"}), "InvalidInputError"},
		{"unknown error becomes transient", errors.New("connection reset"), "TransientError"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := TaskError(tt.err)
			if n := errorType(got); n != tt.want {
				t.Fatalf("errorType = %s, want %s", n, tt.want)
			}
			if !slices.Contains(ErrorNames, errorType(got)) {
				t.Fatalf("%s missing from ErrorNames", errorType(got))
			}
		})
	}
	if TaskError(nil) != nil {
		t.Fatal("TaskError(nil) != nil")
	}
}

func TestErrorNamesAreTheTypeNames(t *testing.T) {
	want := []string{"TransientError", "TerminalError", "ApprovalRejectedError", "DeadlineExceededError", "NotFoundError", "InvalidInputError"}
	if !slices.Equal(ErrorNames, want) {
		t.Fatalf("ErrorNames = %v, want %v", ErrorNames, want)
	}
}

func TestWaitSafetyNet(t *testing.T) {
	cfg := RunConfig{PollInitialSeconds: 10, PollMaxSeconds: 400, DeadlineSeconds: 1000, LoopBudget: 10, ApprovalTimeoutSeconds: 1}
	now := time.Unix(1_000_000, 0)
	top := func() float64 { return 0.999999 }
	bottom := func() float64 { return 0 }

	// The first round is a full safety-net round: no short first poll, no backoff.
	w := StartWait(cfg, now, false, bottom)
	if w.IntervalSeconds != 400 || w.DeadlineUnix != now.Unix()+1000 || w.Round != 0 {
		t.Fatalf("StartWait = %+v", w)
	}
	// Jitter takes at most a quarter off.
	if got := StartWait(cfg, now, false, top).IntervalSeconds; got != 300 {
		t.Fatalf("interval with max jitter = %d, want 300", got)
	}
	var seq []int
	for range 3 {
		w = w.Advance(cfg, now, false, bottom)
		seq = append(seq, w.IntervalSeconds)
	}
	if want := []int{400, 400, 400}; !slices.Equal(seq, want) || w.Round != 3 {
		t.Fatalf("intervals = %v (round %d), want %v", seq, w.Round, want)
	}
	for range 200 {
		if got := w.Advance(cfg, now, false, nil).IntervalSeconds; got < 300 || got > 400 {
			t.Fatalf("random jitter gave %d, outside [300, 400]", got)
		}
	}
	one := RunConfig{PollInitialSeconds: 1, PollMaxSeconds: 1, DeadlineSeconds: 100}
	if got := StartWait(one, now, false, top).IntervalSeconds; got != 1 {
		t.Fatalf("a 1 s safety net waits %d, want 1", got)
	}
	// Never past the deadline, never below one second.
	if got := w.Advance(cfg, now.Add(995*time.Second), false, bottom).IntervalSeconds; got != 5 {
		t.Fatalf("interval near deadline = %d, want 5", got)
	}
	if got := w.Advance(cfg, now.Add(2000*time.Second), false, bottom).IntervalSeconds; got != 400 {
		t.Fatalf("interval past the deadline = %d, want 400 (the deadline is decided by Expired)", got)
	}
	if !w.Expired(now.Add(1000*time.Second)) || w.Expired(now) {
		t.Fatal("Expired wrong")
	}
}

// While the sweep's heartbeat is fresh the net is the long one, and a long net that reaches
// the deadline waits exactly until it: one round for the whole wait (two transitions) instead
// of one every PollMaxSeconds. With a stale heartbeat, or no long net configured, it is the
// short net as before.
func TestWaitSafetyNetWhileSweepRuns(t *testing.T) {
	cfg := RunConfig{PollInitialSeconds: 10, PollMaxSeconds: 400, SweepNetSeconds: 5000, DeadlineSeconds: 1000, LoopBudget: 10, ApprovalTimeoutSeconds: 1}
	now := time.Unix(1_000_000, 0)
	top := func() float64 { return 0.999999 }
	if got := StartWait(cfg, now, true, top).IntervalSeconds; got != 1000 {
		t.Fatalf("sweep up: first interval %d, want 1000 (until the deadline, no jitter)", got)
	}
	if got := StartWait(cfg, now, false, top).IntervalSeconds; got != 300 {
		t.Fatalf("sweep down: first interval %d, want the short net's 300", got)
	}
	w := StartWait(cfg, now, false, top)
	if got := w.Advance(cfg, now.Add(300*time.Second), true, top).IntervalSeconds; got != 700 {
		t.Fatalf("sweep back up: interval %d, want the 700 s left to the deadline", got)
	}
	long := cfg
	long.DeadlineSeconds = 100_000
	if got := StartWait(long, now, true, top).IntervalSeconds; got < 3750 || got > 5000 {
		t.Fatalf("sweep up, deadline far: interval %d, want the long net jittered into [3750, 5000]", got)
	}
	off := cfg
	off.SweepNetSeconds = 0
	if got := StartWait(off, now, true, top).IntervalSeconds; got != 300 {
		t.Fatalf("no long net configured: interval %d, want the short net's 300", got)
	}
	if d := DefaultRunConfig(); d.NetSeconds(true) < d.DeadlineSeconds {
		t.Fatalf("production's long net %d s is shorter than its deadline %d s", d.NetSeconds(true), d.DeadlineSeconds)
	}
}

func TestRunConfigValidate(t *testing.T) {
	if err := DefaultRunConfig().Validate(); err != nil {
		t.Fatalf("default config invalid: %v", err)
	}
	bad := DefaultRunConfig()
	bad.LoopBudget = 0
	var inv *InvalidInputError
	if err := bad.Validate(); !errors.As(err, &inv) || inv.Field != "config.loop_budget" {
		t.Fatalf("Validate = %v", err)
	}
	// The lost-task grace: absent is the default ten minutes, negative is refused.
	if g := DefaultRunConfig().LostTaskGrace(); g != 10*time.Minute {
		t.Errorf("default lost-task grace %v", g)
	}
	bad = DefaultRunConfig()
	bad.LostTaskGraceSeconds = -1
	if err := bad.Validate(); !errors.As(err, &inv) || inv.Field != "config.lost_task_grace_seconds" {
		t.Fatalf("Validate = %v", err)
	}
	bad.LostTaskGraceSeconds = 90
	if err := bad.Validate(); err != nil || bad.LostTaskGrace() != 90*time.Second {
		t.Fatalf("a 90 s grace: %v, %v", err, bad.LostTaskGrace())
	}
	// The long net: negative, or shorter than the short one, is refused.
	for _, v := range []int{-1, DefaultRunConfig().PollMaxSeconds - 1} {
		bad = DefaultRunConfig()
		bad.SweepNetSeconds = v
		if err := bad.Validate(); !errors.As(err, &inv) || inv.Field != "config.sweep_net_seconds" {
			t.Fatalf("sweep_net_seconds %d: Validate = %v", v, err)
		}
	}
	// The sweep's execution check: absent is the sweep's default, negative is refused.
	bad = DefaultRunConfig()
	bad.ExecutionCheckSeconds = -1
	if err := bad.Validate(); !errors.As(err, &inv) || inv.Field != "config.execution_check_seconds" {
		t.Fatalf("Validate = %v", err)
	}
}

func TestExecutionName(t *testing.T) {
	if ExecutionName("op-1", 0) != "op-1" || ExecutionName("op-1", 3) != "op-1-g3" {
		t.Fatal("ExecutionName wrong")
	}
}

func TestTerminalErrorCode(t *testing.T) {
	for msg, want := range map[string]string{
		(&TerminalError{Code: "BUDGET_TOO_LOW", Reason: "create_media_buy: adcp: low"}).Error(): "BUDGET_TOO_LOW",
		(&TerminalError{Reason: "no code: here"}).Error():                                       "",
		"transient: RATE_LIMITED: slow":                                                         "",
		"terminal: ":                                                                            "",
	} {
		if got := TerminalErrorCode(msg); got != want {
			t.Errorf("TerminalErrorCode(%q) = %q, want %q", msg, got, want)
		}
	}
}
