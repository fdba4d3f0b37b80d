package devstack

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestEmulatorProxy(t *testing.T) {
	var mu sync.Mutex
	var upstreamPaths []string
	var exitErrors []string
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		upstreamPaths = append(upstreamPaths, r.URL.Path)
		if strings.HasSuffix(r.URL.Path, "/error") {
			body, _ := io.ReadAll(r.Body)
			exitErrors = append(exitErrors, r.URL.Path+" "+r.Header.Get("Lambda-Runtime-Function-Error-Type")+" "+string(body))
		}
		mu.Unlock()
		if strings.HasSuffix(r.URL.Path, "/invocations") && r.Header.Get("Authorization") == "" {
			http.Error(w, "unsigned", http.StatusBadRequest) // kumo routes REST calls by the signature
			return
		}
		if strings.HasSuffix(r.URL.Path, "/invocation/next") {
			w.Header().Set("Lambda-Runtime-Aws-Request-Id", "req-1")
		}
		if strings.Contains(r.URL.Path, "fails") {
			w.Header().Set("X-Amz-Function-Error", "Unhandled")
		}
		_, _ = io.WriteString(w, `{"errorType":"TerminalError","errorMessage":"no"}`)
	}))
	defer upstream.Close()
	front, p, trace := proxyTo(t, upstream.URL)

	post := func(path, body string, header ...string) int {
		req, err := http.NewRequest(http.MethodPost, front.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		discard(resp)
		return resp.StatusCode
	}
	// kumo's API Gateway answers 500 for a function error only if the invocation does.
	if got := post("/2015-03-31/functions/fails/invocations", `{"operation_id":"op-1","action":"check"}`); got != http.StatusInternalServerError {
		t.Errorf("function error answered %d, want 500", got)
	}
	// Step Functions reads the Lambda API's own answer: 200 with X-Amz-Function-Error.
	if got := post("/2015-03-31/functions/fails/invocations", `{}`, statesCallerHeader, "states"); got != http.StatusOK {
		t.Errorf("function error to Step Functions answered %d, want 200", got)
	}
	if got := post("/2015-03-31/functions/works/invocations", `{}`); got != http.StatusOK {
		t.Errorf("success answered %d, want 200", got)
	}
	if got := post("/2015-03-31/functions/works/invocations", `"`+strings.Repeat("x", MaxInvokePayload)+`"`); got != http.StatusRequestEntityTooLarge {
		t.Errorf("a payload over 6 MB answered %d, want 413", got)
	}
	evs := trace.For("op-1")
	if len(evs) != 1 || evs[0].Function != "fails" || evs[0].Action != "check" || evs[0].Kind != TraceInvoke {
		t.Errorf("trace = %+v, want one invoke of fails/check for op-1", evs)
	}

	ready := p.expect("submit", 2)
	for _, key := range []string{"submit~1", "submit~2"} {
		resp, err := http.Get(front.URL + "/_runtime/" + key + "/2018-06-01/runtime/invocation/next")
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
	if p.firstPoll("submit").IsZero() || p.firstPoll("submit~2").IsZero() {
		t.Error("first poll time not recorded per function and per process")
	}
	// submit~2 answers its invocation; submit~1 dies holding its own: only that one is failed.
	if got := post("/_runtime/submit~2/2018-06-01/runtime/invocation/req-1/response", `{}`); got != http.StatusOK {
		t.Errorf("response answered %d", got)
	}
	p.processExited("submit~2", errors.New("signal: killed"))
	p.processExited("submit~1", errors.New("signal: killed"))
	// A poll of the dead process that kumo still answers: that invocation is sent again (to a
	// live process; here the stand-in answers the invoke) and answered with the result.
	if resp, err := http.Get(front.URL + "/_runtime/submit~1/2018-06-01/runtime/invocation/next"); err == nil {
		discard(resp)
	}
	// submit~2 answered req-1 once above; the stand-in gives every invocation that id.
	answered := func() bool {
		n := 0
		for _, path := range upstreamPaths {
			if path == "/_runtime/submit/2018-06-01/runtime/invocation/req-1/response" {
				n++
			}
		}
		return n == 2 && slices.Contains(upstreamPaths, "/2015-03-31/functions/submit/invocations")
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		mu.Lock()
		done := answered()
		mu.Unlock()
		if done || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, path := range upstreamPaths {
		if strings.Contains(path, "~") {
			t.Errorf("kumo saw the process number in %s", path)
		}
	}
	if len(exitErrors) != 1 || !strings.HasPrefix(exitErrors[0], "/_runtime/submit/2018-06-01/runtime/invocation/req-1/error Runtime.ExitError ") ||
		!strings.Contains(exitErrors[0], `"errorType":"Runtime.ExitError"`) || !strings.Contains(exitErrors[0], "signal: killed") {
		t.Errorf("exit errors posted = %q, want one Runtime.ExitError, for the invocation submit~1 held when it died", exitErrors)
	}
	if !answered() {
		t.Errorf("upstream calls %q: the invocation handed to dead submit~1 was not sent again and answered", upstreamPaths)
	}
}

// FuzzRuntimeAndCaller feeds arbitrary paths and Authorization headers to the proxy's parsing of
// runtime-API paths (/_runtime/<function>~<n>/…) and of the caller's access key id: no panic,
// the process number never reaches kumo, and a caller is named only from a local-<fn> key.
func FuzzRuntimeAndCaller(f *testing.F) {
	f.Add("/_runtime/submit~1/2018-06-01/runtime/invocation/next", "AWS4-HMAC-SHA256 Credential=local-approve/20261201/us-east-1/states/aws4_request, SignedHeaders=host, Signature=x")
	f.Add("/_runtime/~/x", "Credential=")
	f.Add("/_runtime/a~b~c/2018-06-01/runtime/invocation/id/response", "Credential=local-/")
	f.Fuzz(func(t *testing.T, path, auth string) {
		p, err := newEmulatorProxy("http://127.0.0.1:1", newTrace(1))
		if err != nil {
			t.Fatal(err)
		}
		r, err := http.NewRequest(http.MethodGet, "http://127.0.0.1:4566/", nil)
		if err != nil {
			t.Fatal(err)
		}
		r.URL.Path = path
		r.Header.Set("Authorization", auth)
		out := p.runtimeRequest(r)
		key := segmentAfter(path, "_runtime")
		// The segment that named the process is rewritten to the function's name; the rest of
		// the path is the runtime API's own and may repeat any text.
		if fn, _, numbered := strings.Cut(key, "~"); numbered {
			if i := strings.Index(path, "/_runtime/"+key+"/"); i >= 0 && !strings.HasPrefix(out.URL.Path[i:], "/_runtime/"+fn+"/") {
				t.Errorf("path %q still names the process after the rewrite: %q", path, out.URL.Path)
			}
		}
		if fn := callerFunction(r); fn != "" && !strings.Contains(auth, "Credential="+creds.AccessKeyID+"-"+fn) {
			t.Errorf("caller %q read from %q", fn, auth)
		}
	})
}

// A request a specific route matches goes to the API without greedy routes; API Gateway picks
// the most specific route, kumo breaks such a tie at random.
func TestAPIFrontPrefersTheSpecificRoute(t *testing.T) {
	f, err := newAPIFront("http://127.0.0.1:1", newTrace(1))
	if err != nil {
		t.Fatal(err)
	}
	f.apiID.Store("all")
	f.setRoutes([]apiRoute{
		{Method: "GET", Path: "/v1/approvals/{approval_id}"},
		{Method: "POST", Path: "/v1/media-buys"},
	}, "specific")
	for _, tc := range []struct{ method, path, want string }{
		{"GET", "/v1/approvals/ap-1", "specific"},
		{"PUT", "/v1/approvals/ap-1", "all"},   // only ANY /v1/approvals/{proxy+} takes it
		{"GET", "/v1/approvals/ap-1/x", "all"}, // deeper: only the greedy route
		{"GET", "/v1/approvals/", "all"},       // an empty id is no match
		{"POST", "/v1/media-buys", "specific"}, // not the ANY on the same path
		{"DELETE", "/v1/media-buys", "all"},    // only ANY /v1/media-buys takes it
		{"GET", "/v1/media-buys/mb-1", "all"},
	} {
		if got := f.apiFor(tc.method, tc.path); got != tc.want {
			t.Errorf("%s %s went to %s, want %s", tc.method, tc.path, got, tc.want)
		}
	}
}

// A PutEvents the SDK sends again is traced entry by entry with its status event's ids, and
// still reaches the emulator whole; a first attempt is not traced.
func TestEmulatorProxyTracesResentPutEvents(t *testing.T) {
	var got []string
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got = append(got, string(body))
		_, _ = io.WriteString(w, `{"FailedEntryCount":0,"Entries":[]}`)
	}))
	defer upstream.Close()
	front, _, trace := proxyTo(t, upstream.URL)
	body := `{"Entries":[{"Source":"buyflow","Detail":"{\"event_id\":\"media_buy:op-1:2\",\"operation_id\":\"op-1\"}"},{"Source":"other","Detail":"{}"}]}`
	for _, attempt := range []string{"attempt=1; max=3", "attempt=2; max=3"} {
		req, err := http.NewRequest(http.MethodPost, front.URL+"/", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Amz-Target", "AWSEvents.PutEvents")
		req.Header.Set("Amz-Sdk-Request", attempt)
		req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+creds.AccessKeyID+"-publish/20260101/us-east-1/events/aws4_request")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		discard(resp)
	}
	var evs []TraceEvent // the resends; each call is traced as well (TraceCall)
	for _, ev := range trace.Events() {
		if ev.Kind == TraceResend {
			evs = append(evs, ev)
		}
	}
	if len(evs) != 2 || evs[0].Kind != TraceResend || evs[0].EventID != "media_buy:op-1:2" || evs[0].OperationID != "op-1" ||
		evs[0].Function != "publish" || evs[1].Kind != TraceResend || evs[1].EventID != "" {
		t.Errorf("trace = %+v, want the resent attempt's two entries, the first with its ids", evs)
	}
	if len(got) != 2 || got[0] != body || got[1] != body {
		t.Errorf("the emulator got %q, want both attempts whole", got)
	}
}

// proxyTo serves an emulator proxy in front of upstream until the test ends.
func proxyTo(t *testing.T, upstream string) (*httptest.Server, *emulatorProxy, *Trace) {
	t.Helper()
	trace := newTrace(10)
	p, err := newEmulatorProxy(upstream, trace)
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(p)
	t.Cleanup(front.Close)
	return front, p, trace
}

// Two processes of one function hold two invocations at once: each one's calls are traced
// with its own invocation's operation (its access key id is numbered as its runtime path is),
// and a call signed only with the function's key names no operation.
func TestEmulatorProxyTracesACallWithItsProcessOperation(t *testing.T) {
	var mu sync.Mutex
	next := []string{"op-a", "op-b"}
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/invocation/next") {
			mu.Lock()
			op := next[0]
			next = next[1:]
			mu.Unlock()
			w.Header().Set("Lambda-Runtime-Aws-Request-Id", "req-"+op)
			_, _ = io.WriteString(w, `{"operation_id":"`+op+`","action":"wake"}`)
			return
		}
		_, _ = io.WriteString(w, `{}`)
	}))
	defer upstream.Close()
	front, _, trace := proxyTo(t, upstream.URL)
	do := func(method, path, akid string) {
		t.Helper()
		req, err := http.NewRequest(method, front.URL+path, strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		if akid != "" {
			req.Header.Set("X-Amz-Target", "DynamoDB_20120810.GetItem")
			req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+akid+"/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=x")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		discard(resp)
	}
	do(http.MethodGet, "/_runtime/webhook~1/2018-06-01/runtime/invocation/next", "")
	do(http.MethodGet, "/_runtime/webhook~2/2018-06-01/runtime/invocation/next", "")
	do(http.MethodPost, "/", creds.AccessKeyID+"-webhook~2")
	do(http.MethodPost, "/", creds.AccessKeyID+"-webhook~1")
	do(http.MethodPost, "/", creds.AccessKeyID+"-webhook")
	// A call is traced once the proxy has answered it, which its caller may read first.
	var got []string
	for deadline := time.Now().Add(5 * time.Second); len(got) < 3 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		got = got[:0]
		for _, ev := range trace.Events() {
			if ev.Kind == TraceCall {
				got = append(got, ev.Function+":"+ev.OperationID)
			}
		}
	}
	slices.Sort(got) // each is traced as its handler returns, not always in the calls' order
	if want := []string{"webhook:", "webhook:op-a", "webhook:op-b"}; !slices.Equal(got, want) {
		t.Errorf("calls traced as %q, want %q", got, want)
	}
}
