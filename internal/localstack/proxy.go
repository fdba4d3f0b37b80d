package localstack

import (
	"bytes"
	"context"
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
)

// DefaultEmulatorAddr is where kumo's engines expect to reach Lambda (http://localhost:4566).
const DefaultEmulatorAddr = "127.0.0.1:4566"

// ErrPortTaken reports that the emulator port is owned by another process (another local stack,
// a LocalStack container, a kumo test run).
var ErrPortTaken = errors.New("localstack: the emulator port is in use")

// server is one loopback HTTP server.
type server struct {
	ln  net.Listener
	srv *http.Server
}

func listen(addr string) (net.Listener, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("localstack: listen %s: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("localstack: listen %s: not a loopback address", addr)
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

// emulatorProxy forwards everything to kumo. It turns function errors into HTTP 500, counts
// the runtime-API polls of each function and traces invocations.
type emulatorProxy struct {
	rp    *httputil.ReverseProxy
	trace *Trace
	// secrets serializes Secrets Manager calls: kumo's GetSecretValue writes LastAccessedDate
	// under a read lock, a data race (and a -race failure) when two functions read a secret
	// at once.
	secrets sync.Mutex

	mu      sync.Mutex
	polls   map[string]int
	waiters map[string][]pollWaiter
	first   map[string]time.Time
}

type pollWaiter struct {
	n  int
	ch chan struct{}
}

func newEmulatorProxy(target string, trace *Trace) (*emulatorProxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("localstack: emulator url: %w", err)
	}
	p := &emulatorProxy{trace: trace, polls: map[string]int{}, waiters: map[string][]pollWaiter{}, first: map[string]time.Time{}}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.Out.Host = r.In.Host // kumo routes virtual hosts (execute-api) by Host
		},
		FlushInterval: -1,
		ModifyResponse: func(resp *http.Response) error {
			if resp.Header.Get("X-Amz-Function-Error") != "" && resp.StatusCode == http.StatusOK {
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
	switch {
	case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/runtime/invocation/next"):
		if fn := segmentAfter(r.URL.Path, "_runtime"); fn != "" {
			p.polled(fn)
		}
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/invocations"):
		p.traceInvoke(r)
	case strings.HasPrefix(r.Header.Get("X-Amz-Target"), "secretsmanager."):
		p.secrets.Lock()
		defer p.secrets.Unlock()
	}
	p.rp.ServeHTTP(w, r)
}

// traceInvoke records an invocation with the operation id and action of its payload.
func (p *emulatorProxy) traceInvoke(r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 6<<20))
	_ = r.Body.Close() // replaced below
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return
	}
	var head struct {
		OperationID string `json:"operation_id"`
		Action      string `json:"action"`
	}
	_ = json.Unmarshal(body, &head) // API Gateway events have neither field
	p.trace.add(TraceEvent{Kind: TraceInvoke, Function: segmentAfter(r.URL.Path, "functions"), OperationID: head.OperationID, Action: head.Action})
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
}

func newAPIFront(kumoURL string, trace *Trace) (*apiFront, error) {
	u, err := url.Parse(kumoURL)
	if err != nil {
		return nil, fmt.Errorf("localstack: emulator url: %w", err)
	}
	f := &apiFront{target: u, trace: trace}
	f.apiID.Store("")
	f.rp = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(f.target)
			r.Out.Host = f.apiID.Load().(string) + ".execute-api.localhost"
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
	if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/v1/webhooks/") {
		f.trace.add(TraceEvent{Kind: TraceWebhook, OperationID: r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]})
	}
	f.rp.ServeHTTP(w, r)
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
