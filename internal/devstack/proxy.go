package devstack

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/buyflow/buyflow/internal/apiclient"
	"github.com/buyflow/buyflow/internal/topology"
)

// defaultEmulatorAddr is where kumo's engines expect to reach Lambda (http://localhost:4566).
const defaultEmulatorAddr = "127.0.0.1:4566"

// errPortTaken reports that the emulator port is owned by another process (another local stack,
// a LocalStack container, a kumo test run).
var errPortTaken = errors.New("devstack: the emulator port is in use")

// server is one loopback HTTP server.
type server struct {
	ln  net.Listener
	srv *http.Server
}

func listen(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("devstack: listen %s: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("devstack: listen %s: not a loopback address", addr)
	}
	return net.Listen("tcp", addr)
}

func serve(ln net.Listener, h http.Handler) *server {
	s := &server{ln: ln, srv: &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}}
	go func() { _ = s.srv.Serve(ln) }() // Serve returns ErrServerClosed on Close
	return s
}

func (s *server) url() string { return "http://" + s.ln.Addr().String() }

func (s *server) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(ctx); err != nil {
		_ = s.srv.Close() // long polls do not end by themselves
	}
}

// MaxInvokePayload is the Lambda Invoke API's limit on a synchronous request's payload.
const MaxInvokePayload = 6 << 20

// statesCallerHeader marks the local Step Functions' Lambda invocations (see live.mjs).
const statesCallerHeader = "X-Buyflow-Local-Caller"

// emulatorProxy forwards Step Functions calls to the local Step Functions and everything else
// to kumo. It turns function errors into HTTP 500 for kumo's API Gateway, counts the
// runtime-API polls of each function, knows which process holds which invocation, and traces
// invocations.
type emulatorProxy struct {
	rp     *httputil.ReverseProxy
	states atomic.Pointer[httputil.ReverseProxy]
	crash  atomic.Pointer[crashPoint]
	trace  *Trace
	kumo   string
	// kms, once set, is the stack's KMS (Options.KMS).
	kms atomic.Pointer[httputil.ReverseProxy]
	// gate, once set, checks the functions' AWS calls against their roles (iamgate.go).
	gate atomic.Pointer[IAMGate]
	// stream taps the ledger table's writes (see streams.go), once the table exists.
	stream atomic.Pointer[ledgerStream]
	// secrets serializes Secrets Manager calls: kumo's GetSecretValue writes LastAccessedDate
	// under a read lock, a data race (and a -race failure) when two functions read a secret
	// at once.
	secrets sync.Mutex
	// calls are the tests' injected faults and holds (intercept.go).
	calls interceptors

	mu      sync.Mutex
	polls   map[string]int
	waiters map[string][]pollWaiter
	first   map[string]time.Time
	// inflight maps a process (its runtime key, fn~n) to the request id of the invocation it
	// took and has not answered yet; dead holds the keys of processes that exited or are
	// being killed.
	inflight map[string]string
	// inflightOp maps a process to the operation its invocation is about (traced handoffs),
	// so a SendTaskSuccess its function signs can be traced with the operation it wakes.
	inflightOp map[string]string
	dead       map[string]bool
	// lifetime ends when the proxy is closed: the runtime polls it forwards end with it.
	lifetime context.Context
	close    context.CancelFunc
}

// errProcessGone is the exit reason given for an invocation handed to a process already dead.
var errProcessGone = errors.New("the process had exited when the invocation reached it")

// runtimeKey is the context key carrying the runtime key of a runtime-API request.
type runtimeKey struct{}

// processConnKey is the context key carrying the context of a process's own poll request: it
// ends when the process's connection does, which the poll forwarded to kumo does not.
type processConnKey struct{}

type pollWaiter struct {
	n  int
	ch chan struct{}
}

func newEmulatorProxy(target string, trace *Trace) (*emulatorProxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("devstack: emulator url: %w", err)
	}
	p := &emulatorProxy{trace: trace, kumo: target, polls: map[string]int{}, waiters: map[string][]pollWaiter{}, first: map[string]time.Time{}, inflight: map[string]string{}, inflightOp: map[string]string{}, dead: map[string]bool{}}
	p.lifetime, p.close = context.WithCancel(context.Background())
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.Out.Host = r.In.Host // kumo routes virtual hosts (execute-api) by Host
		},
		FlushInterval: -1,
		ModifyResponse: func(resp *http.Response) error {
			if key, ok := resp.Request.Context().Value(runtimeKey{}).(string); ok && strings.HasSuffix(resp.Request.URL.Path, "/invocation/next") {
				if id := resp.Header.Get("Lambda-Runtime-Aws-Request-Id"); id != "" && resp.StatusCode == http.StatusOK {
					conn, _ := resp.Request.Context().Value(processConnKey{}).(context.Context)
					p.mu.Lock()
					gone := p.dead[key] || (conn != nil && conn.Err() != nil)
					if !gone {
						p.inflight[key] = id
					}
					p.mu.Unlock()
					if !gone {
						p.traceHandoff(key, resp)
					}
					if gone {
						// kumo handed an invocation to the poll of a process that has just
						// died: no sandbox ever started it, so it goes to a live one, as
						// Lambda routes it, not lost until the function's timeout.
						payload, err := io.ReadAll(io.LimitReader(resp.Body, MaxInvokePayload+1))
						if err != nil {
							go p.failInvocation(key, id, fmt.Errorf("%w (its payload could not be read: %w)", errProcessGone, err))
						} else {
							go p.redispatch(key, id, payload)
						}
						return errProcessGone
					}
				}
			}
			// Step Functions reads a function error as the Lambda API reports it; kumo's API
			// Gateway needs a 500 to answer 500, as API Gateway does for a function error.
			if resp.Header.Get("X-Amz-Function-Error") != "" && resp.StatusCode == http.StatusOK && resp.Request.Header.Get(statesCallerHeader) == "" {
				resp.StatusCode = http.StatusInternalServerError
				resp.Status = "500 Internal Server Error"
			}
			return nil
		},
		Transport:    &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second},
		ErrorHandler: proxyError,
	}
	return p, nil
}

func (p *emulatorProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/_runtime/") {
		r = p.runtimeRequest(r)
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/runtime/invocation/next") {
			// kumo can hand an invocation to a poll in the instant the process behind it dies,
			// before it sees the closed connection; the invocation is then lost until the
			// function's timeout (a click hangs 15 s and fails). The poll to kumo therefore
			// outlives the process's connection, so the proxy always reads what kumo handed
			// over and sends it on (ModifyResponse). A context that can be cancelled keeps
			// ReverseProxy from cancelling it on CloseNotify.
			// The proxy's close ends such polls (kumo's Close waits for them).
			ctx, cancel := context.WithCancel(context.WithValue(context.WithoutCancel(r.Context()), processConnKey{}, r.Context()))
			defer cancel()
			defer context.AfterFunc(p.lifetime, cancel)()
			r = r.WithContext(ctx)
		}
	}
	if g := p.gate.Load(); g != nil && !g.admit(w, r) {
		return
	}
	if cp := p.crash.Load(); cp != nil && r.Header.Get("X-Amz-Target") == cp.Target && callerFunction(r) == cp.Function && p.crashes(w, r, cp) {
		return
	}
	if caller, target := callerProcess(r), r.Header.Get("X-Amz-Target"); caller != "" && target != "" {
		fn, _, _ := strings.Cut(caller, "~")
		ev := TraceEvent{Kind: TraceCall, Function: fn, Action: target, OperationID: p.heldOperation(caller), At: time.Now()}
		defer func() { ev.Took = time.Since(ev.At); p.trace.add(ev) }()
	}
	if p.calls.handle(w, r) {
		return
	}
	switch {
	case strings.HasPrefix(r.Header.Get("X-Amz-Target"), "AWSStepFunctions."):
		if r.Header.Get("X-Amz-Target") == "AWSStepFunctions.SendTaskSuccess" {
			p.traceTaskSuccess(r)
		}
		if sp := p.states.Load(); sp != nil {
			sp.ServeHTTP(w, r)
			return
		}
		http.Error(w, "the local Step Functions is still starting", http.StatusServiceUnavailable)
		return
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/invocations"):
		if !p.traceInvoke(w, r) {
			return
		}
		if r.Header.Get("Authorization") == "" {
			// kumo routes REST calls by the SigV4 credential scope; the local Step
			// Functions does not sign.
			if err := signLambda(r); err != nil {
				http.Error(w, "local stack: "+err.Error(), http.StatusInternalServerError)
				return
			}
		}
	case r.Header.Get("X-Amz-Target") == "AWSEvents.PutEvents":
		p.traceResend(r)
	case strings.HasPrefix(r.Header.Get("X-Amz-Target"), "TrentService."):
		if kp := p.kms.Load(); kp != nil {
			kp.ServeHTTP(w, r)
			return
		}
		http.Error(w, "local stack: no KMS here: start the stack with Options.KMS (moto_server) to sign through KMS", http.StatusNotImplemented)
		return
	case strings.HasPrefix(r.Header.Get("X-Amz-Target"), "secretsmanager."):
		p.secrets.Lock()
		defer p.secrets.Unlock()
	case strings.HasPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810."):
		if s := p.stream.Load(); s != nil && s.tap(w, r, p.rp) {
			return
		}
	}
	p.rp.ServeHTTP(w, r)
}

// callerFunction names the function that signed r: each function's processes sign with the
// access key id "local-<function>~<n>" (lambdaEnv, numbered by procs.start), as each Lambda
// has its own role on AWS.
func callerFunction(r *http.Request) string {
	fn, _, _ := strings.Cut(callerProcess(r), "~")
	return fn
}

// callerProcess names the process that signed r, "<function>~<n>" as its runtime API path
// does (procs.start numbers each process's access key id so), or only the function when the
// key id has no number.
func callerProcess(r *http.Request) string {
	_, rest, ok := strings.Cut(r.Header.Get("Authorization"), "Credential=")
	if !ok {
		return ""
	}
	akid, _, _ := strings.Cut(rest, "/")
	caller, ok := strings.CutPrefix(akid, creds.AccessKeyID+"-")
	if !ok {
		return ""
	}
	return caller
}

// crashes fires cp if r's body matches it, and reports whether it did (r is then handled).
func (p *emulatorProxy) crashes(w http.ResponseWriter, r *http.Request, cp *crashPoint) bool {
	body, err := io.ReadAll(r.Body)
	_ = r.Body.Close() // replaced below
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil || !bytes.Contains(body, []byte(cp.BodyContains)) || !p.crash.CompareAndSwap(cp, nil) {
		return false
	}
	if cp.AfterAnswer {
		p.rp.ServeHTTP(&discardResponse{header: http.Header{}}, r)
	}
	cp.kill()
	close(cp.fired)
	http.Error(w, "local stack: crash injected", http.StatusBadGateway) // nobody is listening any more
	return true
}

// discardResponse is a ResponseWriter that drops the answer (the caller has been killed).
type discardResponse struct{ header http.Header }

func (d *discardResponse) Header() http.Header         { return d.header }
func (d *discardResponse) Write(b []byte) (int, error) { return len(b), nil }
func (d *discardResponse) WriteHeader(int)             {}

// signLambda signs a Lambda API request with the stack's dummy credentials; r.Body must be
// rewindable (traceInvoke made it so).
func signLambda(r *http.Request) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return apiclient.SignV4(credentials.StaticCredentialsProvider{Value: creds}, "lambda", region)(r, body)
}

// runtimeRequest handles a runtime-API request of one process (/_runtime/<fn>~<n>/...): it
// counts polls, forgets the process's invocation once answered, and strips the process number
// (kumo routes by the function name).
func (p *emulatorProxy) runtimeRequest(r *http.Request) *http.Request {
	key := segmentAfter(r.URL.Path, "_runtime")
	fn, _, numbered := strings.Cut(key, "~")
	if !numbered {
		return r
	}
	switch {
	case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/runtime/invocation/next"):
		p.polled(fn)
		p.polled(key)
	case r.Method == http.MethodPost && (strings.HasSuffix(r.URL.Path, "/response") || strings.HasSuffix(r.URL.Path, "/error")):
		p.mu.Lock()
		delete(p.inflight, key)
		delete(p.inflightOp, key)
		p.mu.Unlock()
	}
	r = r.WithContext(context.WithValue(r.Context(), runtimeKey{}, key))
	r.URL.Path = strings.Replace(r.URL.Path, "/_runtime/"+key+"/", "/_runtime/"+fn+"/", 1)
	r.URL.RawPath = ""
	return r
}

// processExited answers the invocation a dead process held, as Lambda does when a runtime
// exits mid-invocation: a Runtime.ExitError function error, at once (kumo alone would wait
// for the function's timeout).
func (p *emulatorProxy) processExited(key string, exitErr error) {
	p.mu.Lock()
	id, ok := p.inflight[key]
	delete(p.inflight, key)
	p.dead[key] = true
	p.mu.Unlock()
	if ok {
		p.failInvocation(key, id, exitErr)
	}
}

// markDead records that the process named key is about to be killed: an invocation kumo
// hands to its poll from now on fails at once.
func (p *emulatorProxy) markDead(key string) {
	p.mu.Lock()
	p.dead[key] = true
	p.mu.Unlock()
}

// failInvocation answers invocation id, held by the process named key, with Runtime.ExitError.
func (p *emulatorProxy) failInvocation(key, id string, exitErr error) {
	why := "exit status 0"
	if exitErr != nil {
		why = exitErr.Error()
	}
	doc, _ := json.Marshal(map[string]string{
		"errorType":    "Runtime.ExitError",
		"errorMessage": fmt.Sprintf("RequestId: %s Error: Runtime exited with error: %s", id, why),
	})
	p.answerInvocation(key, id, "error", "Runtime.ExitError", doc)
}

// answerInvocation posts the runtime API's response (or, with errorType, error) of
// invocation id of the process named key to kumo, which hands it to the invoker.
func (p *emulatorProxy) answerInvocation(key, id, answer, errorType string, doc []byte) {
	fn, _, _ := strings.Cut(key, "~")
	req, err := http.NewRequest(http.MethodPost, p.kumo+"/_runtime/"+fn+"/2018-06-01/runtime/invocation/"+id+"/"+answer, bytes.NewReader(doc))
	if err != nil {
		return
	}
	if errorType != "" {
		req.Header.Set("Lambda-Runtime-Function-Error-Type", errorType)
	}
	if resp, err := http.DefaultClient.Do(req); err == nil {
		discard(resp)
	}
}

// redispatchClient waits for a sent-again invocation as long as a function may run.
var redispatchClient = &http.Client{Timeout: 16 * time.Minute}

// redispatch sends invocation id, which kumo handed to the poll of the dead process key, to
// a live process of the same function (kumo hands a new invocation to whichever polls) and
// answers id with its result: the invoker sees one invocation, answered as the function
// answered it.
func (p *emulatorProxy) redispatch(key, id string, payload []byte) {
	fn, _, _ := strings.Cut(key, "~")
	p.trace.add(invocationEvent(TraceRedispatch, fn, payload))
	req, err := http.NewRequestWithContext(p.lifetime, http.MethodPost, p.kumo+"/2015-03-31/functions/"+fn+"/invocations", bytes.NewReader(payload))
	if err == nil {
		err = signLambda(req)
	}
	var resp *http.Response
	if err == nil {
		if resp, err = redispatchClient.Do(req); err == nil {
			defer discard(resp)
		}
	}
	if p.lifetime.Err() != nil {
		return // the stack is closing
	}
	if err != nil {
		p.failInvocation(key, id, fmt.Errorf("%w (sending it again failed: %w)", errProcessGone, err))
		return
	}
	doc, err := io.ReadAll(io.LimitReader(resp.Body, MaxInvokePayload+1))
	switch {
	case err != nil || resp.StatusCode != http.StatusOK:
		p.failInvocation(key, id, fmt.Errorf("%w (sending it again answered %s: %s)", errProcessGone, resp.Status, bytes.TrimSpace(doc)))
	case resp.Header.Get("X-Amz-Function-Error") != "":
		var e struct {
			ErrorType string `json:"errorType"`
		}
		_ = json.Unmarshal(doc, &e) // kumo passes the function's error document through
		p.answerInvocation(key, id, "error", cmp.Or(e.ErrorType, "Unhandled"), doc)
	default:
		p.answerInvocation(key, id, "response", "", doc)
	}
}

// traceInvoke records an invocation with the operation id and action of its payload. A
// payload over MaxInvokePayload gets Lambda's 413 (RequestEntityTooLargeException) and false.
func (p *emulatorProxy) traceInvoke(w http.ResponseWriter, r *http.Request) bool {
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxInvokePayload+1))
	_ = r.Body.Close() // replaced below
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return true // the forwarded call fails the same way
	}
	if len(body) > MaxInvokePayload {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Amzn-Errortype", "RequestEntityTooLargeException")
		w.Header().Set("X-Amzn-Requestid", requestID())
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		_, _ = fmt.Fprintf(w, `{"Type":"User","message":"Request must be smaller than %d bytes for the InvokeFunction operation"}`, MaxInvokePayload)
		return false
	}
	p.trace.add(invocationEvent(TraceInvoke, segmentAfter(r.URL.Path, "functions"), body))
	return true
}

// traceHandoff records the invocation resp hands to process key's poll (its payload read and
// put back), so a trace can tell the runtime API's queue from the function's own time.
func (p *emulatorProxy) traceHandoff(key string, resp *http.Response) {
	payload, err := io.ReadAll(io.LimitReader(resp.Body, MaxInvokePayload+1))
	_ = resp.Body.Close() // replaced below
	resp.Body = io.NopCloser(bytes.NewReader(payload))
	if err != nil {
		return // the process reads the same failure
	}
	fn, _, _ := strings.Cut(key, "~")
	ev := invocationEvent(TraceHandoff, fn, payload)
	p.mu.Lock()
	p.inflightOp[key] = ev.OperationID
	p.mu.Unlock()
	p.trace.add(ev)
}

// traceTaskSuccess records a SendTaskSuccess, so a trace can tell the function's time from the
// engine's: with the operation of the invocation its signer holds (heldOperation; a wake's
// output does not name its operation).
func (p *emulatorProxy) traceTaskSuccess(r *http.Request) {
	caller := callerProcess(r)
	fn, _, _ := strings.Cut(caller, "~")
	p.trace.add(TraceEvent{Kind: TraceTaskSuccess, Function: fn, OperationID: p.heldOperation(caller)})
}

// heldOperation is the operation of the invocation the calling process holds (caller is
// "<function>~<n>"), or, for a caller that names only its function, the one a process of
// that function holds, "" unless exactly one of them holds one.
func (p *emulatorProxy) heldOperation(caller string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, _, numbered := strings.Cut(caller, "~"); numbered {
		return p.inflightOp[caller]
	}
	fn := caller
	held, op := 0, ""
	for key, o := range p.inflightOp {
		if f, _, _ := strings.Cut(key, "~"); f == fn && fn != "" {
			held, op = held+1, o
		}
	}
	if held != 1 {
		return ""
	}
	return op
}

// traceResend records each entry of a PutEvents the SDK sends again (attempt 2 or later in
// its Amz-Sdk-Request header), so that a status event delivered twice can be told from one the
// stack produced twice.
func (p *emulatorProxy) traceResend(r *http.Request) {
	attempt := ""
	for field := range strings.SplitSeq(r.Header.Get("Amz-Sdk-Request"), ";") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(field), "attempt="); ok {
			attempt = v
		}
	}
	if attempt == "" || attempt == "1" {
		return
	}
	body, err := io.ReadAll(r.Body)
	_ = r.Body.Close() // replaced below
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return // the forwarded call fails the same way
	}
	var in struct {
		Entries []struct {
			Detail string `json:"Detail"`
		} `json:"Entries"`
	}
	_ = json.Unmarshal(body, &in) // kumo answers a malformed call
	for _, e := range in.Entries {
		var d struct {
			EventID     string `json:"event_id"`
			OperationID string `json:"operation_id"`
		}
		_ = json.Unmarshal([]byte(e.Detail), &d) // another source's events have neither
		p.trace.add(TraceEvent{Kind: TraceResend, Function: callerFunction(r), OperationID: d.OperationID, EventID: d.EventID})
	}
}

// invocationEvent is the trace event of an invocation of fn with the operation id and action
// of its payload.
func invocationEvent(kind, fn string, payload []byte) TraceEvent {
	var head struct {
		OperationID string `json:"operation_id"`
		Action      string `json:"action"`
		// RawPath is an API Gateway event's: a seller webhook's names its operation.
		RawPath string `json:"rawPath"`
		Records []struct {
			EventSource string `json:"eventSource"`
		} `json:"Records"`
	}
	_ = json.Unmarshal(payload, &head) // API Gateway events have none of the fields but rawPath
	if rest, ok := strings.CutPrefix(head.RawPath, topology.WebhookPathPrefix); ok && head.OperationID == "" {
		head.OperationID = rest
	}
	ev := TraceEvent{Kind: kind, Function: fn, OperationID: head.OperationID, Action: head.Action}
	if len(head.Records) > 0 {
		ev.Source = head.Records[0].EventSource
	}
	return ev
}

// expect returns a channel closed once fn has polled n times in all.
func (p *emulatorProxy) expect(fn string, n int) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	ch := make(chan struct{})
	if p.polls[fn] >= n {
		close(ch)
		return ch
	}
	p.waiters[fn] = append(p.waiters[fn], pollWaiter{n: n, ch: ch})
	return ch
}

func (p *emulatorProxy) polled(fn string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.polls[fn]++
	if p.polls[fn] == 1 {
		p.first[fn] = time.Now()
	}
	keep := p.waiters[fn][:0]
	for _, w := range p.waiters[fn] {
		if p.polls[fn] >= w.n {
			close(w.ch)
		} else {
			keep = append(keep, w)
		}
	}
	p.waiters[fn] = keep
}

func (p *emulatorProxy) firstPoll(fn string) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.first[fn]
}

func segmentAfter(path, marker string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i, s := range parts {
		if s == marker && i+1 < len(parts) {
			return parts[i+1]
		}
	}
	return ""
}

// apiFront serves the HTTP API on its own port: kumo's execute-api is virtual-hosted
// ({api}.execute-api.localhost), which the Go resolver cannot resolve. It forwards to kumo with
// that Host once the API exists.
type apiFront struct {
	target *url.URL
	apiID  atomic.Value // string
	rp     *httputil.ReverseProxy
	trace  *Trace
	// specific are the routes without a greedy path segment, served by the API specificID
	// (setRoutes).
	specific   atomic.Pointer[[]apiRoute]
	specificID atomic.Value // string
}

// apiHostKey carries the API id a request is forwarded to.
type apiHostKey struct{}

// setRoutes records the method routes on literal paths and the API that has only those.
func (f *apiFront) setRoutes(specific []apiRoute, apiID string) {
	f.specific.Store(&specific)
	f.specificID.Store(apiID)
}

// apiFor returns the API a request goes to: the one without greedy routes when a more
// specific route matches it (API Gateway prefers it; kumo would choose at random).
func (f *apiFront) apiFor(method, path string) string {
	if rs := f.specific.Load(); rs != nil {
		for _, r := range *rs {
			if r.Method == method && templateMatches(r.Path, path) {
				return f.specificID.Load().(string)
			}
		}
	}
	return f.apiID.Load().(string)
}

// greedy reports whether a route path ends in a greedy {name+} segment.
func greedy(template string) bool { return strings.HasSuffix(template, "+}") }

// templateMatches reports whether a non-greedy route path (/v1/x/{id}) matches path segment by
// segment.
func templateMatches(template, path string) bool {
	ts := strings.Split(strings.Trim(template, "/"), "/")
	ps := strings.Split(strings.Trim(path, "/"), "/")
	if len(ts) != len(ps) {
		return false
	}
	for i, t := range ts {
		if strings.HasPrefix(t, "{") && strings.HasSuffix(t, "}") {
			if ps[i] == "" {
				return false
			}
			continue
		}
		if t != ps[i] {
			return false
		}
	}
	return true
}

func newAPIFront(kumoURL string, trace *Trace) (*apiFront, error) {
	u, err := url.Parse(kumoURL)
	if err != nil {
		return nil, fmt.Errorf("devstack: emulator url: %w", err)
	}
	f := &apiFront{target: u, trace: trace}
	f.apiID.Store("")
	f.rp = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(f.target)
			id, _ := r.In.Context().Value(apiHostKey{}).(string)
			r.Out.Host = id + ".execute-api.localhost"
			r.SetXForwarded()
		},
		Transport:    &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second},
		ErrorHandler: proxyError,
	}
	return f, nil
}

func (f *apiFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.apiID.Load().(string) == "" {
		http.Error(w, "the local stack is still starting", http.StatusServiceUnavailable)
		return
	}
	// A Lambda event carries the body, and Lambda refuses events over 6 MB: API Gateway answers
	// without invoking the function (kumo's would answer "Internal server error").
	if r.ContentLength > MaxInvokePayload {
		tooLarge(w)
		return
	}
	if r.Body != nil && r.ContentLength < 0 {
		body, err := io.ReadAll(io.LimitReader(r.Body, MaxInvokePayload+1))
		_ = r.Body.Close() // replaced below
		if err != nil {
			http.Error(w, "local stack: reading the request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		if len(body) > MaxInvokePayload {
			tooLarge(w)
			return
		}
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	}
	if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/v1/webhooks/") {
		f.trace.add(TraceEvent{Kind: TraceWebhook, OperationID: r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]})
	}
	f.rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), apiHostKey{}, f.apiFor(r.Method, r.URL.Path))))
}

// tooLarge answers as API Gateway does for a request it cannot pass to Lambda for its size.
func tooLarge(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Apigw-Requestid", requestID())
	w.WriteHeader(http.StatusRequestEntityTooLarge)
	_, _ = io.WriteString(w, `{"message":"Request Entity Too Large"}`)
}

// requestID returns a random AWS-style request id.
func requestID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand does not fail on Linux
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// discard reads and closes a response body.
func discard(resp *http.Response) {
	_, _ = io.Copy(io.Discard, resp.Body) // nothing to do with a failed drain
	_ = resp.Body.Close()
}

// proxyError answers 502 for a failed upstream call, quietly when the client went away (long
// polls end that way on shutdown).
func proxyError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) || r.Context().Err() != nil {
		return
	}
	http.Error(w, "local stack: emulator unreachable: "+err.Error(), http.StatusBadGateway)
}
