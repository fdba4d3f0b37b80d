package devstack

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"syscall"
	"time"
)

// replace handles a process that exited while the stack runs, as Lambda handles a sandbox
// whose runtime died: the invocation it held fails with Runtime.ExitError at once, and the
// function's next invocations go to a new process, which starts cold.
func (s *Stack) replace(ps *procs, proxy *emulatorProxy, dead *instance, log io.Writer) {
	proxy.processExited(dead.key, dead.err)
	why := "exit status 0"
	if dead.err != nil {
		why = dead.err.Error()
	}
	_, _ = fmt.Fprintf(log, "devstack: process %s exited (%s) after %s; starting a new sandbox\n", dead.key, why, time.Since(dead.started).Round(time.Millisecond))
	// A process that dies at start would otherwise be restarted in a tight loop.
	if time.Since(dead.started) < time.Second {
		time.Sleep(time.Second)
	}
	next, err := ps.start(dead.spec)
	if err != nil {
		_, _ = fmt.Fprintf(log, "devstack: no new sandbox for %s: %v\n", dead.spec.fn, err)
		return
	}
	s.mu.Lock()
	s.restarts[dead.spec.fn]++
	s.mu.Unlock()
	select {
	case <-proxy.expect(next.key, 1):
		_, _ = fmt.Fprintf(log, "devstack: new sandbox %s ready (cold start %s)\n", next.key, proxy.firstPoll(next.key).Sub(next.started).Round(time.Millisecond))
	case <-next.done:
	case <-time.After(time.Minute):
		_, _ = fmt.Fprintf(log, "devstack: new sandbox %s did not poll for work within a minute\n", next.key)
	}
}

// Restarts returns how many new processes the stack started for fn after one exited.
func (s *Stack) Restarts(fn string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.restarts[fn]
}

// Kill sends SIGKILL to every running process of fn (a crash of all its sandboxes) and returns
// how many it signalled. The stack replaces them.
func (s *Stack) Kill(fn string) int {
	s.procs.mu.Lock()
	var live []*instance
	for _, in := range s.procs.all {
		select {
		case <-in.done:
		default:
			if in.spec.fn == fn {
				live = append(live, in)
			}
		}
	}
	s.procs.mu.Unlock()
	for _, in := range live {
		s.proxy.markDead(in.key)
		signalGroup(in.cmd, syscall.SIGKILL)
	}
	return len(live)
}

// scheduleSweep invokes the reconcile function every interval, as the EventBridge schedule
// does on AWS, one sweep at a time; the returned func stops it.
func (s *Stack) scheduleSweep(every time.Duration, log io.Writer) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	invoker := restClient{base: s.EmulatorURL, http: &http.Client{Timeout: 5 * time.Minute}}
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			s.sweep.Lock()
			if s.sweepHeld == 0 {
				// EventBridge Scheduler sends the schedule's input; the CDK stack sets none.
				var summary map[string]any
				if err := invoker.call(ctx, "lambda", http.MethodPost, "/2015-03-31/functions/reconcile/invocations", map[string]any{}, &summary); err != nil && ctx.Err() == nil {
					_, _ = fmt.Fprintf(log, "devstack: scheduled sweep failed: %v\n", err)
				}
			}
			s.sweep.Unlock()
		}
	}()
	return func() { cancel(); <-done }
}

// HoldSweep stops the scheduled sweep, as disabling its EventBridge schedule and the shard
// queue's event source mapping does on AWS, until the returned func is called: a plan and the
// shard batches under way finish first, the schedule skips its ticks and the queue keeps its
// shards while any hold lasts. A test that must see what the workflow does alone (a buy's own
// polls) holds it.
func (s *Stack) HoldSweep() (release func()) {
	s.sweep.Lock()
	s.sweepHeld++
	s.sweep.Unlock()
	// The shards of a plan made before the hold: those under way finish, the others wait.
	queue := func() {}
	if s.sweepQueue != nil {
		queue = s.sweepQueue.hold()
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			queue()
			s.sweep.Lock()
			s.sweepHeld--
			s.sweep.Unlock()
		})
	}
}

// CrashPoint names the moment a test crashes a function: the next AWS call of Function whose
// X-Amz-Target is Target (e.g. "AWSStepFunctions.SendTaskSuccess") and whose body contains
// BodyContains. Every process of the function is killed before the call goes out, or, with
// AfterAnswer, once the emulator has answered it and before the answer reaches the process
// (the write happened; the function never learns it).
type CrashPoint struct {
	Function, Target, BodyContains string
	AfterAnswer                    bool
}

// CrashAt arms p (replacing any armed point) and returns a channel closed when it fired.
func (s *Stack) CrashAt(p CrashPoint) <-chan struct{} {
	cp := &crashPoint{CrashPoint: p, fired: make(chan struct{}), kill: func() { s.Kill(p.Function) }}
	s.proxy.crash.Store(cp)
	return cp.fired
}

// crashPoint is an armed CrashPoint.
type crashPoint struct {
	CrashPoint
	fired chan struct{}
	kill  func()
}
