package localstack

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestEmulatorProxy(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "fails") {
			w.Header().Set("X-Amz-Function-Error", "Unhandled")
		}
		_, _ = io.WriteString(w, `{"errorType":"TerminalError","errorMessage":"no"}`)
	}))
	defer upstream.Close()
	trace := newTrace(10)
	p, err := newEmulatorProxy(upstream.URL, trace)
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(p)
	defer front.Close()

	post := func(path, body string) int {
		resp, err := http.Post(front.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		discard(resp)
		return resp.StatusCode
	}
	if got := post("/2015-03-31/functions/fails/invocations", `{"operation_id":"op-1","action":"check"}`); got != http.StatusInternalServerError {
		t.Errorf("function error answered %d, want 500", got)
	}
	if got := post("/2015-03-31/functions/works/invocations", `{}`); got != http.StatusOK {
		t.Errorf("success answered %d, want 200", got)
	}
	evs := trace.For("op-1")
	if len(evs) != 1 || evs[0].Function != "fails" || evs[0].Action != "check" || evs[0].Kind != TraceInvoke {
		t.Errorf("trace = %+v, want one invoke of fails/check for op-1", evs)
	}

	ready := p.expect("submit", 2)
	for range 2 {
		resp, err := http.Get(front.URL + "/_runtime/submit/2018-06-01/runtime/invocation/next")
		if err != nil {
			t.Fatal(err)
		}
		discard(resp)
	}
	select {
	case <-ready:
	case <-time.After(time.Second):
		t.Fatal("two polls did not satisfy expect(submit, 2)")
	}
	if p.firstPoll("submit").IsZero() {
		t.Error("first poll time not recorded")
	}
}
