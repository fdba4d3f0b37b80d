package devstack

import (
	"sync"
	"time"
)

// The kinds of trace events.
const (
	// TraceWebhook is a POST to the seller webhook route, as the API received it.
	TraceWebhook = "webhook"
	// TraceInvoke is a Lambda invocation, as kumo's engines or API asked for it.
	TraceInvoke = "invoke"
	// TraceRedispatch is an invocation kumo handed to the poll of a process that had just
	// died, sent again to a live process of the function.
	TraceRedispatch = "redispatch"
	// TraceResend is one entry of a PutEvents the AWS SDK sent again (its Amz-Sdk-Request
	// attempt is not the first): the first attempt may have been applied with its answer lost,
	// so the entry's event may reach the bus twice, as on AWS.
	TraceResend = "resend"
	// TraceHandoff is the runtime API handing an invocation to a function's process (the
	// answer to its poll for the next one), as the proxy passed it on.
	TraceHandoff = "handoff"
	// TraceTaskSuccess is a SendTaskSuccess reaching the local Step Functions, with the
	// operation id of its output.
	TraceTaskSuccess = "task_success"
	// TraceCall is an AWS call a function signed (its X-Amz-Target in Action), at its start,
	// with how long the stack took to answer it (Took), attributed to an operation as
	// TraceTaskSuccess is.
	TraceCall = "call"
)

// TraceEvent is one traced request.
type TraceEvent struct {
	At   time.Time
	Kind string
	// Function is the invoked function (invocations and redispatches only).
	Function string
	// OperationID is the operation the webhook is for, the operation_id of a stage
	// invocation's payload, or that of a resent status event.
	OperationID string
	// Action is a stage invocation's action (workflow.Action).
	Action string
	// Source is the event source of an invocation with records (aws:sqs: a batch of the sweep
	// queue), "" for the others.
	Source string
	// EventID is a resent status event's event_id (resends only).
	EventID string
	// Took is how long a traced call took to answer (calls only).
	Took time.Duration
}

// Trace is a bounded, concurrency-safe log of TraceEvents.
type Trace struct {
	mu       sync.Mutex
	max      int
	events   []TraceEvent
	watchers map[*traceWatcher]struct{}
}

// traceWatcher is one Watch: the first event match accepts goes to found.
type traceWatcher struct {
	match func(TraceEvent) bool
	found chan TraceEvent
}

func newTrace(max int) *Trace { return &Trace{max: max} }

func (t *Trace) add(e TraceEvent) {
	if e.At.IsZero() {
		e.At = time.Now()
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.events = appendBounded(t.events, e, t.max)
	for w := range t.watchers {
		if w.match(e) {
			w.found <- e // buffered, and sent at most once: the watcher leaves the set now
			delete(t.watchers, w)
		}
	}
}

// Watch returns a channel that receives the first event added from now on that match
// accepts, and a stop func that ends the watch (the channel then never receives). A benchmark
// that waits for one event watches rather than reading Events in a loop: a copy of the whole
// trace per look would load the stack it measures. match runs under the trace's lock: it must
// be quick and must not call the trace.
func (t *Trace) Watch(match func(TraceEvent) bool) (found <-chan TraceEvent, stop func()) {
	w := &traceWatcher{match: match, found: make(chan TraceEvent, 1)}
	t.mu.Lock()
	if t.watchers == nil {
		t.watchers = map[*traceWatcher]struct{}{}
	}
	t.watchers[w] = struct{}{}
	t.mu.Unlock()
	return w.found, func() {
		t.mu.Lock()
		delete(t.watchers, w)
		t.mu.Unlock()
	}
}

// appendBounded appends v to s and drops the oldest entries beyond max, so a log the stack
// keeps for as long as it runs stays bounded (docs/local-stack.md#memory). The dropped entries
// stay in s's array only until an append outgrows it: the array holds at most about 2*max.
func appendBounded[T any](s []T, v T, max int) []T {
	if over := len(s) + 1 - max; over > 0 {
		s = s[over:]
	}
	return append(s, v)
}

// Events returns a copy of the events so far, oldest first.
func (t *Trace) Events() []TraceEvent {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]TraceEvent(nil), t.events...)
}

// For returns the events of one operation, oldest first.
func (t *Trace) For(operationID string) []TraceEvent {
	var out []TraceEvent
	for _, e := range t.Events() {
		if e.OperationID == operationID {
			out = append(out, e)
		}
	}
	return out
}
