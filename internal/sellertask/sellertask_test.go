package sellertask_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/sellertask"
	"github.com/buyflow/buyflow/internal/sfn"
	"github.com/buyflow/buyflow/internal/stagetest"
	"github.com/buyflow/buyflow/internal/workflow"
)

// fakeTaskLedger is a function-typed sellertask.Ledger that records what it was asked.
type fakeTaskLedger struct {
	transition func(to workflow.Status, ch record.Patch) (*record.Operation, error)
	clear      func(token string) error

	mu          sync.Mutex
	transitions []record.Patch
	tos         []workflow.Status
	taken       []bool
	events      []record.Event
	cleared     []string
}

func (f *fakeTaskLedger) Transition(_ context.Context, _, _ string, to workflow.Status, _ int64, ch record.Patch) (*record.Operation, error) {
	f.mu.Lock()
	f.transitions, f.tos = append(f.transitions, ch), append(f.tos, to)
	f.mu.Unlock()
	return f.transition(to, ch)
}

// Advance records the move as Transition does (take in taken), and takes the token from what
// transition returns when asked to.
func (f *fakeTaskLedger) Advance(_ context.Context, _ *record.Operation, to workflow.Status, ch record.Patch, take bool) (*record.Operation, error) {
	f.mu.Lock()
	f.transitions, f.tos, f.taken = append(f.transitions, ch), append(f.tos, to), append(f.taken, take)
	f.mu.Unlock()
	op, err := f.transition(to, ch)
	if err == nil && take {
		cur := *op
		cur.TaskToken = ""
		op = &cur
	}
	return op, err
}

func (f *fakeTaskLedger) AppendEvent(_ context.Context, _, _ string, ev record.Event) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, ev)
	return nil
}

func (f *fakeTaskLedger) ClearTaskToken(_ context.Context, _, _, token string) error {
	f.mu.Lock()
	f.cleared = append(f.cleared, token)
	f.mu.Unlock()
	if f.clear != nil {
		return f.clear(token)
	}
	return nil
}

// moves applies every transition to a copy of op.
func moves(op record.Operation) func(workflow.Status, record.Patch) (*record.Operation, error) {
	return func(to workflow.Status, ch record.Patch) (*record.Operation, error) {
		if !workflow.CanMove(op.Status, to) {
			cur := op
			return nil, &record.TransitionError{To: to, Current: &cur}
		}
		op.Status, op.Version = to, op.Version+1
		if ch.MediaBuyID != nil {
			op.MediaBuyID = *ch.MediaBuyID
		}
		if ch.SellerTaskID != nil {
			op.SellerTaskID = *ch.SellerTaskID
		}
		if ch.Reason != nil {
			op.Reason = *ch.Reason
		}
		cur := op
		return &cur, nil
	}
}

var taskNow = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func taskDeps(l *fakeTaskLedger) sellertask.Deps {
	return sellertask.Deps{Ledger: l, Now: func() time.Time { return taskNow }, Log: slog.New(slog.DiscardHandler)}
}

func detailOf(t *testing.T, raw json.RawMessage) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("detail %s: %v", raw, err)
	}
	return m
}

func TestRecordTaskStatus(t *testing.T) {
	t.Parallel()
	success := json.RawMessage(`{"status":"completed","media_buy_id":"mb-1","packages":[{"package_id":"pkg-1"}]}`)
	failure := json.RawMessage(`{"status":"completed","errors":[{"code":"INVALID_REQUEST","message":"budget too low"}]}`)
	tests := []struct {
		name        string
		from        workflow.Status
		taskID      string // the operation's seller task id
		u           sellertask.Update
		want        sellertask.Outcome
		wantTo      workflow.Status
		wantStatus  workflow.Status
		wantMoves   []workflow.Status
		wantReason  string // prefix of the reason sent with the last transition; "" for none
		wantMediaID string
		wantTaskID  string // SellerTaskID sent with the last transition; "" for none
	}{
		{name: "completion with a media buy", from: workflow.StatusSubmitted, taskID: "task-1",
			u:    sellertask.Update{Status: "completed", TaskID: "task-1", Result: success},
			want: sellertask.Applied, wantTo: workflow.StatusCompleted, wantStatus: workflow.StatusCompleted,
			wantMoves: []workflow.Status{workflow.StatusCompleted}, wantMediaID: "mb-1"},
		{name: "completion with an error result fails", from: workflow.StatusWorking, taskID: "task-1",
			u:    sellertask.Update{Status: "completed", Result: failure},
			want: sellertask.Applied, wantTo: workflow.StatusFailed, wantStatus: workflow.StatusFailed,
			wantMoves: []workflow.Status{workflow.StatusFailed}, wantReason: "the seller completed the task with an error: "},
		{name: "completion without a readable result", from: workflow.StatusWorking, taskID: "task-1",
			u:    sellertask.Update{Status: "completed", Result: json.RawMessage(`{"status":"completed"}`)},
			want: sellertask.Applied, wantTo: workflow.StatusCompleted, wantStatus: workflow.StatusCompleted,
			wantMoves: []workflow.Status{workflow.StatusCompleted}, wantReason: "the seller completed the task without a readable media buy"},
		{name: "completion after an approval goes through working", from: workflow.StatusAwaitingApproval, taskID: "task-1",
			u:    sellertask.Update{Status: "completed", Result: success},
			want: sellertask.Applied, wantTo: workflow.StatusCompleted, wantStatus: workflow.StatusCompleted,
			wantMoves: []workflow.Status{workflow.StatusWorking, workflow.StatusCompleted}, wantMediaID: "mb-1"},
		{name: "ended task carries the message", from: workflow.StatusSubmitted, taskID: "task-1",
			u:    sellertask.Update{Status: "rejected", Message: "not in inventory"},
			want: sellertask.Applied, wantTo: workflow.StatusRejected, wantStatus: workflow.StatusRejected,
			wantMoves: []workflow.Status{workflow.StatusRejected}, wantReason: "the seller ended the task rejected: not in inventory"},
		{name: "a completed task with a rejected buy is rejected", from: workflow.StatusSubmitted, taskID: "task-1",
			u:    sellertask.Update{Status: "completed", Result: json.RawMessage(`{"media_buy_id":"mb-1","status":"rejected"}`)},
			want: sellertask.Applied, wantTo: workflow.StatusRejected, wantStatus: workflow.StatusRejected,
			wantMoves: []workflow.Status{workflow.StatusRejected}, wantReason: "the seller answered media buy mb-1 with status rejected", wantMediaID: "mb-1"},
		{name: "input-required carries the message", from: workflow.StatusWorking, taskID: "task-1",
			u:    sellertask.Update{Status: "input-required", Message: "confirm the flight dates"},
			want: sellertask.Applied, wantTo: workflow.StatusInputRequired, wantStatus: workflow.StatusInputRequired,
			wantMoves: []workflow.Status{workflow.StatusInputRequired}, wantReason: "confirm the flight dates"},
		{name: "the first task id is recorded", from: workflow.StatusCreating,
			u:    sellertask.Update{Status: "working", TaskID: "task-9"},
			want: sellertask.Applied, wantTo: workflow.StatusWorking, wantStatus: workflow.StatusWorking,
			wantMoves: []workflow.Status{workflow.StatusWorking}, wantTaskID: "task-9"},
		{name: "an older status is stale", from: workflow.StatusCompleted, taskID: "task-1",
			u:    sellertask.Update{Status: "working"},
			want: sellertask.Stale, wantTo: workflow.StatusWorking, wantStatus: workflow.StatusCompleted,
			wantMoves: []workflow.Status{workflow.StatusWorking}},
		{name: "a repeat goes to the transition and is stale", from: workflow.StatusWorking, taskID: "task-1",
			u:    sellertask.Update{Status: "working"},
			want: sellertask.Stale, wantTo: workflow.StatusWorking, wantStatus: workflow.StatusWorking},
		{name: "a skipped repeat writes nothing", from: workflow.StatusWorking, taskID: "task-1",
			u:    sellertask.Update{Status: "working", SkipRepeat: true},
			want: sellertask.Repeat, wantTo: workflow.StatusWorking, wantStatus: workflow.StatusWorking},
		{name: "a status without lifecycle meaning writes nothing", from: workflow.StatusWorking, taskID: "task-1",
			u:    sellertask.Update{Status: "auth-required"},
			want: sellertask.Unmapped, wantStatus: workflow.StatusWorking},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			op := record.Operation{Tenant: tenant, ID: "op-1", Status: tc.from, SellerTaskID: tc.taskID, Version: 3}
			l := &fakeTaskLedger{transition: moves(op)}
			tc.u.Actor, tc.u.EventType = "seller:"+sellerID, "test"
			ev := map[string]any{"task_id": "task-1"}
			tc.u.Detail = ev
			rec, err := sellertask.RecordStatus(context.Background(), taskDeps(l), &op, tc.u)
			if err != nil {
				t.Fatal(err)
			}
			if rec.Outcome != tc.want || rec.To != tc.wantTo || rec.Op.Status != tc.wantStatus {
				t.Fatalf("record = %v to %q op %s; want %v to %q op %s", rec.Outcome, rec.To, rec.Op.Status, tc.want, tc.wantTo, tc.wantStatus)
			}
			if fmt.Sprint(l.tos) != fmt.Sprint(tc.wantMoves) {
				t.Fatalf("transitions %v, want %v", l.tos, tc.wantMoves)
			}
			if len(l.events) != 0 {
				t.Fatalf("events %+v; RecordTaskStatus appends none of its own", l.events)
			}
			if len(l.transitions) == 0 {
				return
			}
			ch := l.transitions[len(l.transitions)-1]
			if ch.Actor != "seller:"+sellerID || ch.EventType != "test" {
				t.Errorf("changes labelled %q/%q", ch.Actor, ch.EventType)
			}
			switch {
			case tc.wantReason == "" && ch.Reason != nil:
				t.Errorf("reason %q, want none", *ch.Reason)
			case tc.wantReason != "" && (ch.Reason == nil || !strings.HasPrefix(*ch.Reason, tc.wantReason)):
				t.Errorf("reason %v, want %q…", ch.Reason, tc.wantReason)
			}
			if got := ""; tc.wantMediaID != "" || ch.MediaBuyID != nil {
				if ch.MediaBuyID != nil {
					got = *ch.MediaBuyID
				}
				if got != tc.wantMediaID || ev["media_buy_id"] != tc.wantMediaID || detailOf(t, ch.Detail)["media_buy_id"] != tc.wantMediaID {
					t.Errorf("media buy id %q, detail %v, want %q in both", got, ev, tc.wantMediaID)
				}
			}
			if got := ""; tc.wantTaskID != "" || ch.SellerTaskID != nil {
				if ch.SellerTaskID != nil {
					got = *ch.SellerTaskID
				}
				if got != tc.wantTaskID {
					t.Errorf("seller task id %q, want %q", got, tc.wantTaskID)
				}
			}
		})
	}
}

// A transaction race the ledger's own retries lost is the caller's error, not "no change": the
// update was not recorded.
func TestRecordTaskStatusContention(t *testing.T) {
	t.Parallel()
	op := record.Operation{Tenant: tenant, ID: "op-1", Status: workflow.StatusSubmitted, SellerTaskID: "task-1"}
	l := &fakeTaskLedger{transition: func(workflow.Status, record.Patch) (*record.Operation, error) {
		return nil, fmt.Errorf("transact: %w", record.ErrContention)
	}}
	rec, err := sellertask.RecordStatus(context.Background(), taskDeps(l), &op, sellertask.Update{Status: "working"})
	if !errors.Is(err, record.ErrContention) || len(l.tos) != 1 || rec.Outcome == sellertask.Applied {
		t.Fatalf("%v, %v after %d transitions, want ErrContention after 1", rec.Outcome, err, len(l.tos))
	}
}

func TestRecordTaskStatusSellerTaskDuration(t *testing.T) {
	t.Parallel()
	created := taskNow.Add(-90 * time.Second).Format(time.RFC3339)
	tests := []struct {
		name      string
		status    string
		from      workflow.Status
		createdAt string
		want      bool
	}{
		{"terminal", "completed", workflow.StatusWorking, created, true},
		{"ended", "canceled", workflow.StatusWorking, created, true},
		{"not terminal", "working", workflow.StatusSubmitted, created, false},
		{"stale terminal", "completed", workflow.StatusCanceled, created, false},
		{"creation unknown", "completed", workflow.StatusWorking, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			op := record.Operation{Tenant: tenant, ID: "op-1", Status: tc.from, SellerTaskID: "task-1"}
			var buf bytes.Buffer
			rec := metrics.New(&buf, metrics.Namespace, func() time.Time { return taskNow })
			deps := taskDeps(&fakeTaskLedger{transition: moves(op)})
			deps.Metrics = rec
			if _, err := sellertask.RecordStatus(context.Background(), deps, &op, sellertask.Update{Status: tc.status,
				Result: json.RawMessage(`{"status":"completed","media_buy_id":"mb-1"}`), CreatedAt: tc.createdAt}); err != nil {
				t.Fatal(err)
			}
			if err := rec.Flush(); err != nil {
				t.Fatal(err)
			}
			line := buf.String()
			got := strings.Contains(line, `"SellerTaskDuration":90000`) && strings.Contains(line, `"Status":"`+tc.status+`"`)
			if got != tc.want || (!tc.want && line != "") {
				t.Fatalf("metrics %q, want SellerTaskDuration %v", line, tc.want)
			}
		})
	}
	t.Run("no recorder", func(t *testing.T) {
		t.Parallel()
		op := record.Operation{Tenant: tenant, ID: "op-1", Status: workflow.StatusWorking, SellerTaskID: "task-1"}
		if _, err := sellertask.RecordStatus(context.Background(), taskDeps(&fakeTaskLedger{transition: moves(op)}), &op,
			sellertask.Update{Status: "failed", CreatedAt: created}); err != nil {
			t.Fatal(err)
		}
	})
}

func TestWake(t *testing.T) {
	t.Parallel()
	boom := errors.New("throttled")
	tests := []struct {
		name       string
		status     workflow.Status
		token      string
		clear      error
		succeed    error
		wakeActor  string
		want       bool
		wantErr    error
		wantCalls  int
		wantEvents int
	}{
		{name: "terminal status wakes", status: workflow.StatusCompleted, token: "tok", want: true, wantCalls: 1},
		{name: "with a wake event", status: workflow.StatusCompleted, token: "tok", wakeActor: "system:test", want: true, wantCalls: 1, wantEvents: 1},
		{name: "no decision needed", status: workflow.StatusWorking, token: "tok"},
		{name: "no parked token", status: workflow.StatusCompleted},
		{name: "another waker cleared it", status: workflow.StatusCompleted, token: "tok", clear: record.ErrTokenMismatch},
		{name: "a failed clear still wakes", status: workflow.StatusCompleted, token: "tok", clear: boom, want: true, wantCalls: 1},
		{name: "a gone token is fine", status: workflow.StatusInputRequired, token: "tok", succeed: fmt.Errorf("send: %w", sfn.ErrTaskGone), wakeActor: "system:test", wantCalls: 1},
		{name: "a failed completion is returned", status: workflow.StatusFailed, token: "tok", succeed: boom, wakeActor: "system:test", wantErr: boom, wantCalls: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			op := &record.Operation{Tenant: tenant, ID: "op-1", Status: tc.status, TaskToken: tc.token}
			l := &fakeTaskLedger{clear: func(string) error { return tc.clear }}
			var calls []stagetest.Completion
			deps := taskDeps(l)
			deps.WakeActor, deps.WakeBy = tc.wakeActor, "test"
			deps.Tasks = stagetest.TasksFunc(func(_ context.Context, token string, output any) error {
				calls = append(calls, stagetest.Completion{Token: token, Output: output.(workflow.SellerOutput)})
				return tc.succeed
			})
			woken, err := sellertask.Wake(context.Background(), deps, op, "", workflow.WaitState{}, cfg(), taskNow)
			if woken != tc.want || !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("Wake = %v, %v; want %v, %v", woken, err, tc.want, tc.wantErr)
			}
			if len(calls) != tc.wantCalls || len(l.events) != tc.wantEvents {
				t.Fatalf("%d completions, %d events; want %d, %d", len(calls), len(l.events), tc.wantCalls, tc.wantEvents)
			}
			if tc.wantCalls > 0 {
				if calls[0].Token != "tok" || calls[0].Output != sellertask.WakeOutput(op, workflow.WaitState{}, cfg(), taskNow) || len(l.cleared) != 1 {
					t.Fatalf("completion %+v, cleared %v", calls[0], l.cleared)
				}
			}
			if tc.wantEvents > 0 {
				ev := l.events[0]
				if d := detailOf(t, ev.Detail); ev.Type != record.EventWake || ev.Actor != tc.wakeActor || d["by"] != "test" || d["status"] != string(tc.status) {
					t.Fatalf("wake event %+v", ev)
				}
			}
		})
	}
}

// TestRecordTaskStatusKeepsTheSellersCode: an ended task's error code and recovery reach the
// reason and the event detail, whether the error came from a poll's error object or from the
// result a webhook carries (either error shape).
func TestRecordTaskStatusKeepsTheSellersCode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		u    sellertask.Update
		want workflow.Status
	}{
		{"webhook result with errors[]", sellertask.Update{Status: "failed", Message: "could not book",
			Result: json.RawMessage(`{"errors":[{"code":"PRODUCT_UNAVAILABLE","message":"sold out","recovery":"correctable"}]}`)}, workflow.StatusFailed},
		{"webhook result with adcp_error", sellertask.Update{Status: "rejected",
			Result: json.RawMessage(`{"adcp_error":{"code":"PRODUCT_UNAVAILABLE","message":"sold out"}}`)}, workflow.StatusRejected},
		{"poll error object", sellertask.Update{Status: "failed",
			Failure: &adcp.Error{Kind: adcp.KindAdCP, Code: "PRODUCT_UNAVAILABLE", Recovery: adcp.RecoveryCorrectable, Message: "sold out"}}, workflow.StatusFailed},
		{"completion whose result is the Error arm", sellertask.Update{Status: "completed",
			Result: json.RawMessage(`{"errors":[{"code":"PRODUCT_UNAVAILABLE","message":"sold out"}]}`)}, workflow.StatusFailed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			op := record.Operation{Tenant: tenant, ID: "op-1", Status: workflow.StatusSubmitted, SellerTaskID: "task-1", Version: 3}
			l := &fakeTaskLedger{transition: moves(op)}
			tc.u.Actor, tc.u.EventType = "seller:"+sellerID, "webhook"
			rec, err := sellertask.RecordStatus(context.Background(), taskDeps(l), &op, tc.u)
			if err != nil {
				t.Fatal(err)
			}
			if rec.To != tc.want || len(l.transitions) == 0 {
				t.Fatalf("to %s (%d transitions), want %s", rec.To, len(l.transitions), tc.want)
			}
			ch := l.transitions[len(l.transitions)-1]
			if ch.Reason == nil || !strings.Contains(*ch.Reason, "PRODUCT_UNAVAILABLE") || !strings.Contains(*ch.Reason, "sold out") {
				t.Errorf("reason %v lacks the seller's code and message", ch.Reason)
			}
			if got := detailOf(t, ch.Detail)["error_code"]; got != "PRODUCT_UNAVAILABLE" {
				t.Errorf("detail error_code %v", got)
			}
		})
	}
}

// TestRecordTaskStatusTakesTheTokenItWakes: with Take, a move to a status that needs the state
// machine takes the parked token in its own write and hands it over; nothing else takes it.
func TestRecordTaskStatusTakesTheTokenItWakes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, status, token string
		take                bool
		want                string
	}{
		{"a completion with Take", "completed", "tok", true, "tok"},
		{"input required with Take", "input-required", "tok", true, "tok"},
		{"a failure with Take", "failed", "tok", true, "tok"},
		{"working needs no decision", "working", "tok", true, ""},
		{"without Take", "completed", "tok", false, ""},
		{"nothing parked", "completed", "", true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			op := record.Operation{Tenant: tenant, ID: "op-1", Status: workflow.StatusSubmitted, SellerTaskID: "task-1", TaskToken: tc.token}
			l := &fakeTaskLedger{transition: moves(op)}
			rec, err := sellertask.RecordStatus(context.Background(), taskDeps(l), &op, sellertask.Update{Status: tc.status,
				Result: json.RawMessage(`{"status":"completed","media_buy_id":"mb-1"}`), Take: tc.take})
			if err != nil || rec.Outcome != sellertask.Applied {
				t.Fatalf("%v, %v", rec.Outcome, err)
			}
			if rec.Token != tc.want || l.taken[len(l.taken)-1] != (tc.want != "") {
				t.Fatalf("token %q (take asked: %v), want %q", rec.Token, l.taken, tc.want)
			}
			if tc.want != "" && rec.Op.TaskToken != "" {
				t.Fatalf("the operation still holds token %q after the take", rec.Op.TaskToken)
			}
		})
	}
}

// TestRecordTaskStatusTriesAgainAfterAnotherWriter: a move refused because another writer
// changed the operation since it was read (a token parked meanwhile) is tried again from the
// operation the refusal returned, and takes that token; a writer that never stops is contention.
func TestRecordTaskStatusTriesAgainAfterAnotherWriter(t *testing.T) {
	t.Parallel()
	read := record.Operation{Tenant: tenant, ID: "op-1", Status: workflow.StatusWorking, SellerTaskID: "task-1", Version: 4}
	parked := read
	parked.TaskToken = "tok-late"
	refusals := 1
	l := &fakeTaskLedger{}
	l.transition = func(to workflow.Status, ch record.Patch) (*record.Operation, error) {
		if refusals > 0 {
			refusals--
			cur := parked
			return nil, &record.TransitionError{To: to, Current: &cur, Kind: record.ConflictVersion}
		}
		return moves(parked)(to, ch)
	}
	rec, err := sellertask.RecordStatus(context.Background(), taskDeps(l), &read, sellertask.Update{Status: "completed",
		Result: json.RawMessage(`{"status":"completed","media_buy_id":"mb-1"}`), Take: true})
	if err != nil || rec.Outcome != sellertask.Applied || rec.Token != "tok-late" || len(l.tos) != 2 || !l.taken[1] || l.taken[0] {
		t.Fatalf("%v token %q after %d moves (take %v), %v; want applied with tok-late after 2", rec.Outcome, rec.Token, len(l.tos), l.taken, err)
	}

	refusals = 100
	l.tos = nil
	rec, err = sellertask.RecordStatus(context.Background(), taskDeps(l), &read, sellertask.Update{Status: "completed", Take: true})
	if !errors.Is(err, record.ErrContention) || rec.Outcome == sellertask.Applied || len(l.tos) != 4 {
		t.Fatalf("%v, %v after %d moves; want ErrContention after 4", rec.Outcome, err, len(l.tos))
	}
}

// TestWakeTakenToken: a token the caller's update took is completed as it is, without a clear.
func TestWakeTakenToken(t *testing.T) {
	t.Parallel()
	op := &record.Operation{Tenant: tenant, ID: "op-1", Status: workflow.StatusCompleted}
	l := &fakeTaskLedger{}
	var calls []stagetest.Completion
	deps := taskDeps(l)
	deps.Tasks = stagetest.TasksFunc(func(_ context.Context, token string, output any) error {
		calls = append(calls, stagetest.Completion{Token: token, Output: output.(workflow.SellerOutput)})
		return nil
	})
	woken, err := sellertask.Wake(context.Background(), deps, op, "tok-taken", workflow.WaitState{}, cfg(), taskNow)
	if !woken || err != nil || len(calls) != 1 || calls[0].Token != "tok-taken" || len(l.cleared) != 0 {
		t.Fatalf("Wake = %v, %v; completions %+v, cleared %v", woken, err, calls, l.cleared)
	}
}
