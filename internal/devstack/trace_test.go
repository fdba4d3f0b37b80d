package devstack

import (
	"testing"
	"time"
)

// A watch receives the first matching event added after it began, once; a stopped watch
// receives nothing and leaves the trace.
func TestWatchReceivesTheFirstMatchOnly(t *testing.T) {
	tr := newTrace(10)
	tr.add(TraceEvent{Kind: TraceInvoke, OperationID: "op-1", Action: "report"}) // before the watch
	isReport := func(id string) func(TraceEvent) bool {
		return func(e TraceEvent) bool { return e.OperationID == id && e.Kind == TraceInvoke && e.Action == "report" }
	}
	found, stop := tr.Watch(isReport("op-1"))
	defer stop()
	stopped, stopNow := tr.Watch(isReport("op-1"))
	stopNow()
	tr.add(TraceEvent{Kind: TraceCall, OperationID: "op-1"})
	tr.add(TraceEvent{Kind: TraceInvoke, OperationID: "op-1", Action: "report", Function: "first"})
	tr.add(TraceEvent{Kind: TraceInvoke, OperationID: "op-1", Action: "report", Function: "second"})
	select {
	case e := <-found:
		if e.Function != "first" {
			t.Errorf("watch got %+v, want the first report after it began", e)
		}
	case <-time.After(time.Second):
		t.Fatal("the watch received nothing")
	}
	select {
	case e := <-found:
		t.Errorf("the watch received a second event %+v", e)
	case e := <-stopped:
		t.Errorf("a stopped watch received %+v", e)
	default:
	}
	if n := len(tr.watchers); n != 0 {
		t.Errorf("%d watchers left in the trace, want 0", n)
	}
}
