package devstack

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sivchari/kumo"
)

// TestInvocationHandedToADeadProcessReachesALiveOne runs the race that lost an approver's click
// on a loaded machine, against kumo itself: a process is killed while its poll waits in kumo,
// kumo hands the next invocation to that poll before it sees the closed connection, and the
// invocation must still reach a live process and be answered, not hang until the function's
// timeout. The window is held open here: one process is marked dead with its poll still
// connected (Kill marks a process before it signals it), another has its connection closed;
// only after both absorbed the invocation does a live process poll.
func TestInvocationHandedToADeadProcessReachesALiveOne(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	emu := kumo.NewServer()
	defer emu.Close()
	p, err := newEmulatorProxy(emu.URL, newTrace(10))
	if err != nil {
		t.Fatal(err)
	}
	defer p.close() // before kumo's Close, as in Stack: it ends the polls kumo waits for
	front := httptest.NewServer(p)
	defer front.Close()
	// kumo keeps its state per process, not per server: a name of this run's own, deleted
	// after (TestStackPlumbing counts the functions kumo has).
	fn := "redispatch-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	rest := restClient{base: front.URL, http: http.DefaultClient}
	if _, err := rest.createFunction(ctx, fn, "", 128, 10, nil); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := rest.call(context.Background(), "lambda", http.MethodDelete, "/2015-03-31/functions/"+fn, nil, nil); err != nil {
			t.Error(err)
		}
	}()

	poll := func(ctx context.Context, key string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, front.URL+"/_runtime/"+key+"/2018-06-01/runtime/invocation/next", nil)
		if err != nil {
			return nil, err
		}
		return http.DefaultClient.Do(req)
	}
	waitPoll := func(key string) {
		t.Helper()
		select {
		case <-p.expect(key, 1):
		case <-ctx.Done():
			t.Fatalf("%s never polled", key)
		}
	}
	// fn~1 is being killed: marked dead, its poll still connected.
	p.markDead(fn + "~1")
	go func() {
		if resp, err := poll(ctx, fn+"~1"); err == nil {
			discard(resp)
		}
	}()
	waitPoll(fn + "~1")
	// fn~2 was killed: its connection is closed, kumo may not have seen it yet.
	closed, kill := context.WithCancel(ctx)
	go func() {
		if resp, err := poll(closed, fn+"~2"); err == nil {
			discard(resp)
		}
	}()
	waitPoll(fn + "~2")
	kill()
	time.Sleep(100 * time.Millisecond) // the proxy sees the closed connection

	type result struct {
		status int
		body   string
		err    error
	}
	invoked := make(chan result, 1)
	go func() {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, front.URL+"/2015-03-31/functions/"+fn+"/invocations", strings.NewReader(`{"operation_id":"op-1","action":"approve"}`))
		if err == nil {
			var resp *http.Response
			if resp, err = http.DefaultClient.Do(req); err == nil {
				body, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				invoked <- result{status: resp.StatusCode, body: string(body)}
				return
			}
		}
		invoked <- result{err: err}
	}()
	for len(traced(p.trace, TraceRedispatch)) < 2 {
		select {
		case r := <-invoked:
			t.Fatalf("the invocation was answered %d %q (%v) before both dead processes had it", r.status, r.body, r.err)
		case <-ctx.Done():
			t.Fatalf("redispatches %+v, want both dead processes' invocations sent again", traced(p.trace, TraceRedispatch))
		case <-time.After(20 * time.Millisecond):
		}
	}

	resp, err := poll(ctx, fn+"~3")
	if err != nil {
		t.Fatal(err)
	}
	payload, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	id := resp.Header.Get("Lambda-Runtime-Aws-Request-Id")
	if id == "" || string(payload) != `{"operation_id":"op-1","action":"approve"}` {
		t.Fatalf("the live process got %q (request id %q), want the invocation's payload", payload, id)
	}
	answer, err := http.Post(front.URL+"/_runtime/"+fn+"~3/2018-06-01/runtime/invocation/"+id+"/response", "application/json", strings.NewReader(`{"decided":true}`))
	if err != nil {
		t.Fatal(err)
	}
	discard(answer)
	select {
	case r := <-invoked:
		if r.err != nil || r.status != http.StatusOK || r.body != `{"decided":true}` {
			t.Errorf("the invoker got %d %q (%v), want 200 and the live process's answer", r.status, r.body, r.err)
		}
	case <-ctx.Done():
		t.Fatal("the invoker never got the live process's answer")
	}
	for _, e := range traced(p.trace, TraceRedispatch) {
		if e.Function != fn || e.OperationID != "op-1" || e.Action != "approve" {
			t.Errorf("redispatch traced as %+v", e)
		}
	}
}

func traced(tr *Trace, kind string) []TraceEvent {
	var out []TraceEvent
	for _, e := range tr.Events() {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}
