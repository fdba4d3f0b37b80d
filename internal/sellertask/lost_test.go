package sellertask_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/sellertask"
	"github.com/buyflow/buyflow/internal/workflow"
)

// timelineLedger is a fakeTaskLedger whose timeline is events, then whatever was appended.
type timelineLedger struct {
	*fakeTaskLedger
	timeline []record.Event
	err      error
}

func (l *timelineLedger) ListEvents(context.Context, string, string, int, string) (record.Page[record.Event], error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return record.Page[record.Event]{Items: append(append([]record.Event(nil), l.timeline...), l.events...)}, l.err
}

// lostMark is the event a first REFERENCE_NOT_FOUND leaves, written at at.
func lostMark(at time.Time) record.Event {
	return record.Event{At: at, Type: record.EventPoll, Detail: record.EventDetail(map[string]any{
		"error_code": "REFERENCE_NOT_FOUND", "lost_since": at.Format(time.RFC3339Nano)})}
}

func TestTaskLost(t *testing.T) {
	t.Parallel()
	lost := &adcp.Error{Kind: adcp.KindAdCP, Code: "REFERENCE_NOT_FOUND", Recovery: adcp.RecoveryCorrectable}
	if !sellertask.TaskLost(lost) || sellertask.TaskLost(&adcp.Error{Kind: adcp.KindAdCP, Code: "MEDIA_BUY_NOT_FOUND"}) ||
		sellertask.TaskLost(errors.New("REFERENCE_NOT_FOUND")) || sellertask.TaskLost(nil) {
		t.Fatal("TaskLost must match the seller's REFERENCE_NOT_FOUND error, and nothing else")
	}
}

// TestRecordLost: the grace runs from the first REFERENCE_NOT_FOUND since the operation last
// changed; past it the operation fails with the finding.
func TestRecordLost(t *testing.T) {
	t.Parallel()
	changed := taskNow.Add(-3 * time.Hour) // the operation's last change: hours of a seller's review
	tests := []struct {
		name     string
		timeline []record.Event
		refuse   bool // the ledger already holds a newer status
		want     sellertask.LostOutcome
		since    time.Time
		marks    int // events appended
	}{
		{name: "the first answer starts the grace", want: sellertask.LostWaiting, since: taskNow, marks: 1},
		{name: "within the grace", timeline: []record.Event{lostMark(taskNow.Add(-9 * time.Minute))},
			want: sellertask.LostWaiting, since: taskNow.Add(-9 * time.Minute)},
		{name: "an answer before the last change does not count", timeline: []record.Event{lostMark(changed.Add(-time.Hour))},
			want: sellertask.LostWaiting, since: taskNow, marks: 1},
		{name: "past the grace", timeline: []record.Event{lostMark(taskNow.Add(-11 * time.Minute))},
			want: sellertask.LostFailed, since: taskNow.Add(-11 * time.Minute)},
		{name: "past the grace, already moved on", timeline: []record.Event{lostMark(taskNow.Add(-11 * time.Minute))}, refuse: true,
			want: sellertask.LostStale, since: taskNow.Add(-11 * time.Minute)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			op := record.Operation{Tenant: tenant, ID: "op-1", Status: workflow.StatusWorking, SellerTaskID: "task-1",
				PONumber: "PO-77", UpdatedAt: changed}
			f := &fakeTaskLedger{transition: moves(op)}
			if tc.refuse {
				done := op
				done.Status = workflow.StatusCompleted
				f.transition = moves(done)
			}
			l := &timelineLedger{fakeTaskLedger: f, timeline: tc.timeline}
			var buf bytes.Buffer
			deps := taskDeps(f)
			deps.Ledger, deps.Timeline = l, l
			deps.Metrics = metrics.New(&buf, metrics.Namespace, func() time.Time { return taskNow })
			rec, err := sellertask.RecordLost(context.Background(), deps, &op, sellertask.Lost{Seller: sellerID, Actor: "seller:" + sellerID, EventType: record.EventPoll})
			if err != nil {
				t.Fatal(err)
			}
			if rec.Outcome != tc.want || !rec.Since.Equal(tc.since) || len(f.events) != tc.marks {
				t.Fatalf("%v since %s, %d events; want %v since %s, %d", rec.Outcome, rec.Since, len(f.events), tc.want, tc.since, tc.marks)
			}
			if tc.marks > 0 {
				if d := detailOf(t, f.events[0].Detail); d["lost_since"] != taskNow.Format(time.RFC3339Nano) || d["error_code"] != "REFERENCE_NOT_FOUND" ||
					f.events[0].Type != record.EventPoll || !strings.Contains(f.events[0].Reason, "waits until") {
					t.Errorf("first answer's event %+v", f.events[0])
				}
			}
			if err := deps.Metrics.Flush(); err != nil {
				t.Fatal(err)
			}
			if tc.want != sellertask.LostFailed {
				if tc.want == sellertask.LostWaiting && len(f.transitions) != 0 || buf.Len() != 0 {
					t.Errorf("within the grace: %d transitions, metrics %q", len(f.transitions), buf.String())
				}
				return
			}
			ch := f.transitions[len(f.transitions)-1]
			if f.tos[len(f.tos)-1] != workflow.StatusFailed || ch.EventType != record.EventLostTask || ch.ErrorCode == nil || *ch.ErrorCode != "REFERENCE_NOT_FOUND" {
				t.Fatalf("transition to %v %+v", f.tos, ch)
			}
			for _, want := range []string{sellerID, "PO-77", "task-1", "may hold", "get_media_buys", "nothing was canceled", "10-minute grace"} {
				if !strings.Contains(*ch.Reason, want) {
					t.Errorf("reason %q lacks %q", *ch.Reason, want)
				}
			}
			d := detailOf(t, ch.Detail)
			if d["seller"] != sellerID || d["po_number"] != "PO-77" || d["task_id"] != "task-1" || d["lost_since"] != tc.since.Format(time.RFC3339Nano) ||
				d["waited_seconds"] != float64(11*60) || d["may_exist"] == "" || d["check"] == "" {
				t.Errorf("finding detail %v", d)
			}
			var lines []map[string]any
			for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
				var m map[string]any
				if err := json.Unmarshal([]byte(line), &m); err != nil {
					t.Fatal(err)
				}
				lines = append(lines, m)
			}
			if len(lines) != 2 || lines[0]["LostSellerTasks"] != 1.0 || lines[0]["Seller"] != sellerID || lines[1]["LostSellerTasks"] != 1.0 {
				t.Errorf("metrics %s, want LostSellerTasks by Seller and with no dimension", buf.String())
			}
		})
	}
	t.Run("a change's lost task points at the buy it changes", func(t *testing.T) {
		t.Parallel()
		op := record.Operation{Tenant: tenant, ID: "chg-1", Kind: record.KindModification, ParentID: "op-1", MediaBuyID: "mb-9",
			Status: workflow.StatusWorking, SellerTaskID: "task-2", PONumber: "PO-77", UpdatedAt: changed}
		f := &fakeTaskLedger{transition: moves(op)}
		l := &timelineLedger{fakeTaskLedger: f, timeline: []record.Event{lostMark(taskNow.Add(-11 * time.Minute))}}
		deps := taskDeps(f)
		deps.Ledger, deps.Timeline = l, l
		rec, err := sellertask.RecordLost(context.Background(), deps, &op, sellertask.Lost{Seller: sellerID, Actor: "seller:" + sellerID, EventType: record.EventPoll})
		if err != nil || rec.Outcome != sellertask.LostFailed {
			t.Fatalf("%v, %v", rec.Outcome, err)
		}
		ch := f.transitions[len(f.transitions)-1]
		for _, want := range []string{"media buy mb-9 with this change applied", "compare it with buyflow's record of buy op-1"} {
			if !strings.Contains(*ch.Reason, want) {
				t.Errorf("reason %q lacks %q", *ch.Reason, want)
			}
		}
		if d := detailOf(t, ch.Detail); d["kind"] != record.KindModification || d["parent_id"] != "op-1" || d["media_buy_id"] != "mb-9" {
			t.Errorf("detail %v", d)
		}
	})
	t.Run("a timeline it cannot read is an error", func(t *testing.T) {
		t.Parallel()
		op := record.Operation{Tenant: tenant, ID: "op-1", Status: workflow.StatusWorking, SellerTaskID: "task-1"}
		f := &fakeTaskLedger{transition: moves(op)}
		deps := taskDeps(f)
		deps.Timeline = &timelineLedger{fakeTaskLedger: f, err: errors.New("throttled")}
		if _, err := sellertask.RecordLost(context.Background(), deps, &op, sellertask.Lost{Seller: sellerID}); err == nil || !strings.HasPrefix(err.Error(), "sellertask: ") {
			t.Fatalf("err %v", err)
		}
		if _, err := sellertask.RecordLost(context.Background(), taskDeps(f), &op, sellertask.Lost{Seller: sellerID}); err == nil {
			t.Fatal("no timeline, no error")
		}
	})
}

// The first answer's mark keeps its time to the nanosecond, and the grace is read back from it:
// cut to the second, the grace ended up to a second early (a workflow test with a 4 s grace saw
// a buy failed 3.2 s after the first REFERENCE_NOT_FOUND).
func TestLostGraceRunsFromTheFirstAnswerExactly(t *testing.T) {
	t.Parallel()
	first := taskNow.Add(875 * time.Millisecond)
	op := record.Operation{Tenant: tenant, ID: "op-1", Status: workflow.StatusWorking, SellerTaskID: "task-1", UpdatedAt: taskNow.Add(-time.Hour)}
	f := &fakeTaskLedger{transition: moves(op)}
	l := &timelineLedger{fakeTaskLedger: f}
	now := first
	deps := taskDeps(f)
	deps.Ledger, deps.Timeline, deps.Now = l, l, func() time.Time { return now }
	lost := sellertask.Lost{Seller: sellerID, Actor: "seller:" + sellerID, EventType: record.EventPoll}
	if rec, err := sellertask.RecordLost(context.Background(), deps, &op, lost); err != nil || rec.Outcome != sellertask.LostWaiting {
		t.Fatalf("first answer: %+v, %v", rec, err)
	}
	// The mark as the ledger keeps it (the store stamps At), then an answer 9 m 59.5 s after
	// the first: past ten minutes from the second the first began in.
	mark := f.events[0]
	mark.At = first
	l.timeline, f.events = []record.Event{mark}, nil
	now = first.Add(10*time.Minute - 500*time.Millisecond)
	rec, err := sellertask.RecordLost(context.Background(), deps, &op, lost)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Outcome != sellertask.LostWaiting || !rec.Since.Equal(first) {
		t.Fatalf("%v since %s, want waiting since %s", rec.Outcome, rec.Since, first)
	}
}
