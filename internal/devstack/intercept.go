package devstack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
)

// CallPoint names AWS calls of one function: those whose X-Amz-Target is Target (e.g.
// "DynamoDB_20120810.TransactWriteItems") and whose body contains BodyContains (an operation
// id, so that the parallel tests' calls pass).
type CallPoint struct {
	Function, Target, BodyContains string
}

// FailAt answers the next times calls at p with the AWS error code and HTTP status (e.g.
// "InternalServerError", 500), as the service answers a request it failed, without passing
// them on: a test gives a function an outage of the service it calls at one chosen call. Each
// call it fails has passed the IAM gate (the role allowed it). fired is closed once the last
// of them was answered; disarm (idempotent) stops failing calls.
func (s *Stack) FailAt(p CallPoint, code string, status, times int) (fired <-chan struct{}, disarm func()) {
	return s.proxy.calls.failAt(p, code, status, times)
}

// HoldAt keeps every call at p waiting in the stack, as a slow service keeps its caller
// waiting, until release (idempotent) is called; the calls then go on as sent. held is closed
// when the first call is held. A test that must see what another party does first (the
// seller's webhook, the sweep) holds what would race it (the buy's own poll).
func (s *Stack) HoldAt(p CallPoint) (held <-chan struct{}, release func()) {
	return s.proxy.calls.holdAt(p)
}

// SweepNow runs one reconciliation sweep now and returns when it has ended: the invocation the
// schedule makes, then the shards its plan sent to the queue, delivered here rather than by the
// queue's mapping (HoldSweep's hold stops neither), serialized with the scheduled sweeps. A
// test that holds the schedule decides with it when the sweep reads the sellers.
func (s *Stack) SweepNow(ctx context.Context) error {
	s.sweep.Lock()
	defer s.sweep.Unlock()
	if s.sweepQueue != nil {
		// The mapping takes nothing meanwhile, so every shard of this plan runs before return.
		defer s.sweepQueue.hold()()
	}
	// EventBridge Scheduler sends the schedule's input; the CDK stack sets none.
	failed, out, err := s.invokeFunction(ctx, "reconcile", []byte("{}"))
	switch {
	case err != nil:
		return fmt.Errorf("devstack: sweep: %w", err)
	case failed:
		return fmt.Errorf("devstack: sweep failed: %s", bytes.TrimSpace(out))
	}
	if s.sweepQueue != nil {
		return s.sweepQueue.drain(ctx)
	}
	return nil
}

// intercept is an armed FailAt or HoldAt.
type intercept struct {
	CallPoint
	// fail answers the call; hold, when fail is nil, is closed on release.
	fail *awsFault
	hold chan struct{}
	// left counts the calls a FailAt still fails.
	left  int
	fired chan struct{}
	once  sync.Once
}

// awsFault is an AWS JSON-protocol error answer.
type awsFault struct {
	code   string
	status int
}

// interceptors are the armed intercepts of the emulator proxy.
type interceptors struct {
	mu   sync.Mutex
	list []*intercept
}

func (is *interceptors) failAt(p CallPoint, code string, status, times int) (fired <-chan struct{}, disarm func()) {
	ic := &intercept{CallPoint: p, fail: &awsFault{code: code, status: status}, left: times, fired: make(chan struct{})}
	return ic.fired, is.add(ic)
}

func (is *interceptors) holdAt(p CallPoint) (held <-chan struct{}, release func()) {
	ic := &intercept{CallPoint: p, hold: make(chan struct{}), fired: make(chan struct{})}
	disarm := is.add(ic)
	var once sync.Once
	return ic.fired, func() {
		once.Do(func() {
			disarm()
			close(ic.hold)
		})
	}
}

// add arms ic and returns the func that disarms it.
func (is *interceptors) add(ic *intercept) (disarm func()) {
	is.mu.Lock()
	is.list = append(is.list, ic)
	is.mu.Unlock()
	return func() { is.remove(ic) }
}

func (is *interceptors) remove(ic *intercept) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.list = slices.DeleteFunc(is.list, func(x *intercept) bool { return x == ic })
}

// handle fails or holds r when an armed intercept matches it, and reports whether r was
// answered (a failed call); a held call returns false once released, to go on.
func (is *interceptors) handle(w http.ResponseWriter, r *http.Request) bool {
	is.mu.Lock()
	armed := len(is.list) > 0
	is.mu.Unlock()
	target := r.Header.Get("X-Amz-Target")
	if !armed || target == "" {
		return false
	}
	fn := callerFunction(r)
	body, err := io.ReadAll(r.Body)
	_ = r.Body.Close() // replaced below
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return false // the forwarded call fails the same way
	}
	is.mu.Lock()
	var ic *intercept
	for _, c := range is.list {
		if c.Function == fn && c.Target == target && bytes.Contains(body, []byte(c.BodyContains)) {
			ic = c
			break
		}
	}
	if ic != nil && ic.fail != nil {
		if ic.left--; ic.left <= 0 {
			is.list = slices.DeleteFunc(is.list, func(x *intercept) bool { return x == ic })
			defer close(ic.fired)
		}
	}
	is.mu.Unlock()
	switch {
	case ic == nil:
		return false
	case ic.fail != nil:
		ic.fail.answer(w, target)
		return true
	}
	ic.once.Do(func() { close(ic.fired) })
	select {
	case <-ic.hold:
	case <-r.Context().Done():
	}
	return false
}

// answer writes f as the JSON-protocol services answer an error: the status, the error type
// in X-Amzn-ErrorType and __type, and a message.
func (f *awsFault) answer(w http.ResponseWriter, target string) {
	service, _, _ := strings.Cut(target, ".")
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amzn-ErrorType", f.code)
	w.Header().Set("X-Amzn-Requestid", requestID())
	w.WriteHeader(f.status)
	_ = json.NewEncoder(w).Encode(map[string]string{ // the caller may be gone
		"__type": "com.amazonaws." + strings.ToLower(service) + "#" + f.code, "message": "local stack: fault injected by a test",
	})
}
