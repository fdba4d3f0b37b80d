package stagepaths

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// lambdaService runs each function's real bootstrap as processes and serves them the Lambda
// runtime API (2018-06-01) at /_runtime/<function>/…, and the Invoke API
// (POST /2015-03-31/functions/<name or ARN>/invocations) to the harness. One process handles
// one invocation at a time, as on AWS; a function's instances are its concurrency.
//
// Faithful to AWS where the workflow can tell: a function error answers 200 with
// X-Amz-Function-Error: Unhandled and the {errorType, errorMessage} document; a function that
// overruns its timeout answers Sandbox.Timedout; an invocation no instance picks up within the
// function timeout answers 429 (TooManyRequestsException). inject() makes the service refuse
// invocations (ServiceException, 500) to exercise the ASL's Lambda retries.
type lambdaService struct {
	mu     sync.Mutex
	fns    map[string]*function
	faults map[string]int // "<function>\x00<tenant>" → service errors still to answer
	procs  []*exec.Cmd
	logs   *logBook
}

type function struct {
	name     string
	arn      string
	timeout  time.Duration
	queue    chan *invocation
	inflight sync.Map // request id → *invocation
}

type invocation struct {
	id      string
	payload []byte
	done    chan outcome
}

type outcome struct {
	body    []byte
	errType string // non-empty: a function error
}

func newLambdaService(logs *logBook) *lambdaService {
	return &lambdaService{fns: map[string]*function{}, faults: map[string]int{}, logs: logs}
}

// add registers a function; start its processes with start.
func (l *lambdaService) add(name, arn string, timeout time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fns[name] = &function{name: name, arn: arn, timeout: timeout, queue: make(chan *invocation)}
}

func (l *lambdaService) fn(nameOrARN string) *function {
	name := nameOrARN
	if i := strings.LastIndexByte(name, ':'); i >= 0 {
		name = name[i+1:]
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fns[name]
}

// inject makes the next n invocations of fn whose payload names tenant fail with a Lambda
// service error before the function sees them.
func (l *lambdaService) inject(fn, tenant string, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.faults[fn+"\x00"+tenant] += n
}

func (l *lambdaService) takeFault(fn, tenant string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := fn + "\x00" + tenant
	if l.faults[k] > 0 {
		l.faults[k]--
		return true
	}
	return false
}

// start runs n processes of the function's bootstrap with env; the runtime API is at
// runtimeAddr (host:port, no scheme).
func (l *lambdaService) start(name, bin, dir, runtimeAddr string, env map[string]string, n int) error {
	f := l.fn(name)
	if f == nil {
		return fmt.Errorf("lambda: %s is not registered", name)
	}
	for i := range n {
		cmd := exec.Command(bin)
		cmd.Dir = dir
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.TempDir()}
		for k, v := range env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		cmd.Env = append(cmd.Env,
			"AWS_LAMBDA_RUNTIME_API="+runtimeAddr+"/_runtime/"+name,
			"AWS_LAMBDA_FUNCTION_NAME="+name,
			"AWS_LAMBDA_FUNCTION_VERSION=$LATEST",
			"AWS_LAMBDA_FUNCTION_TIMEOUT="+strconv.Itoa(int(f.timeout.Seconds())),
			"AWS_LAMBDA_LOG_FORMAT=JSON",
			"AWS_LAMBDA_LOG_STREAM_NAME=instance-"+strconv.Itoa(i),
		)
		w := l.logs.writer(name)
		cmd.Stdout, cmd.Stderr = w, w
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("lambda: start %s: %w", bin, err)
		}
		l.mu.Lock()
		l.procs = append(l.procs, cmd)
		l.mu.Unlock()
	}
	return nil
}

// stop ends every process (SIGTERM, then SIGKILL after grace) and waits for them.
func (l *lambdaService) stop(grace time.Duration) {
	l.mu.Lock()
	procs := l.procs
	l.procs = nil
	l.mu.Unlock()
	var wg sync.WaitGroup
	for _, cmd := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			done := make(chan struct{})
			go func() { _ = cmd.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(grace):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-done
			}
		}()
	}
	wg.Wait()
}

// Invoke runs one invocation and returns the function's answer (errType non-empty for a
// function error). It is what the Invoke API and the API Gateway front call.
func (l *lambdaService) Invoke(ctx context.Context, f *function, payload []byte) (outcome, error) {
	id := newID()
	inv := &invocation{id: id, payload: payload, done: make(chan outcome, 1)}
	timer := time.NewTimer(f.timeout)
	defer timer.Stop()
	select {
	case f.queue <- inv:
	case <-timer.C:
		return outcome{}, errThrottled
	case <-ctx.Done():
		return outcome{}, ctx.Err()
	}
	var out outcome
	select {
	case out = <-inv.done:
	case <-timer.C:
		f.inflight.Delete(id)
		out = outcome{errType: "Sandbox.Timedout", body: fmt.Appendf(nil,
			`{"errorType":"Sandbox.Timedout","errorMessage":"Task timed out after %.2f seconds"}`, f.timeout.Seconds())}
	case <-ctx.Done():
		return outcome{}, ctx.Err()
	}
	return out, nil
}

var errThrottled = errors.New("no instance took the invocation within the function timeout")

func (l *lambdaService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case strings.HasPrefix(r.URL.Path, "/_runtime/"):
		l.runtime(w, r)
	case strings.HasPrefix(r.URL.Path, "/2015-03-31/functions/") && strings.HasSuffix(r.URL.Path, "/invocations") && r.Method == http.MethodPost:
		l.invokeAPI(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (l *lambdaService) invokeAPI(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/2015-03-31/functions/"), "/invocations")
	f := l.fn(name)
	if f == nil {
		lambdaError(w, http.StatusNotFound, "ResourceNotFoundException", "Function not found: "+name)
		return
	}
	payload, err := io.ReadAll(io.LimitReader(r.Body, 6<<20))
	if err != nil {
		lambdaError(w, http.StatusBadRequest, "InvalidRequestContentException", err.Error())
		return
	}
	var head struct {
		Tenant string `json:"tenant"`
	}
	_ = json.Unmarshal(payload, &head)
	if head.Tenant != "" && l.takeFault(f.name, head.Tenant) {
		lambdaError(w, http.StatusInternalServerError, "ServiceException", "injected by the test: the Lambda service failed")
		return
	}
	out, err := l.Invoke(r.Context(), f, payload)
	switch {
	case errors.Is(err, errThrottled):
		lambdaError(w, http.StatusTooManyRequests, "TooManyRequestsException", "Rate Exceeded.")
		return
	case err != nil:
		return // the caller went away
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amz-Executed-Version", "$LATEST")
	if out.errType != "" {
		w.Header().Set("X-Amz-Function-Error", "Unhandled")
	}
	_, _ = w.Write(out.body)
}

func lambdaError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-ErrorType", typ)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"Type": "User", "message": msg})
}

// runtime serves /_runtime/<fn>/2018-06-01/runtime/….
func (l *lambdaService) runtime(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, "/_runtime/")
	name, path, _ := strings.Cut(rest, "/")
	f := l.fn(name)
	if f == nil {
		http.NotFound(w, r)
		return
	}
	path = strings.TrimPrefix(path, "2018-06-01/runtime/")
	switch {
	case r.Method == http.MethodGet && path == "invocation/next":
		select {
		case inv := <-f.queue:
			f.inflight.Store(inv.id, inv)
			h := w.Header()
			h.Set("Lambda-Runtime-Aws-Request-Id", inv.id)
			h.Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(time.Now().Add(f.timeout).UnixMilli(), 10))
			h.Set("Lambda-Runtime-Invoked-Function-Arn", f.arn)
			h.Set("Lambda-Runtime-Trace-Id", "Root=1-"+newID()[:8]+"-"+newID()[:24]+";Sampled=0")
			h.Set("Content-Type", "application/json")
			_, _ = w.Write(inv.payload)
		case <-r.Context().Done():
		}
	case r.Method == http.MethodPost && strings.HasPrefix(path, "invocation/"):
		id, kind, _ := strings.Cut(strings.TrimPrefix(path, "invocation/"), "/")
		v, ok := f.inflight.LoadAndDelete(id)
		if !ok {
			http.Error(w, `{"errorType":"InvalidRequestID"}`, http.StatusBadRequest)
			return
		}
		body, _ := io.ReadAll(io.LimitReader(r.Body, 6<<20))
		inv := v.(*invocation)
		switch kind {
		case "response":
			inv.done <- outcome{body: body}
		case "error":
			var doc struct {
				ErrorType string `json:"errorType"`
			}
			_ = json.Unmarshal(body, &doc)
			if doc.ErrorType == "" {
				doc.ErrorType = r.Header.Get("Lambda-Runtime-Function-Error-Type")
			}
			if doc.ErrorType == "" {
				doc.ErrorType = "Runtime.Unknown"
			}
			inv.done <- outcome{body: body, errType: doc.ErrorType}
		default:
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	case r.Method == http.MethodPost && path == "init/error":
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		_, _ = fmt.Fprintf(l.logs.writer(name), "INIT ERROR: %s\n", body)
		w.WriteHeader(http.StatusAccepted)
	default:
		http.NotFound(w, r)
	}
}

func newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// logBook keeps every function's output lines, to show a failed test the lines of its
// operation.
type logBook struct {
	mu    sync.Mutex
	lines []string
}

func (b *logBook) writer(fn string) io.Writer {
	return &logWriter{book: b, prefix: fmt.Sprintf("%-10s| ", fn)}
}

// matching returns the lines containing s.
func (b *logBook) matching(s string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, l := range b.lines {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

type logWriter struct {
	book   *logBook
	prefix string
	mu     sync.Mutex
	buf    []byte
}

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			break
		}
		line := w.prefix + string(w.buf[:i])
		w.buf = w.buf[i+1:]
		w.book.mu.Lock()
		if len(w.book.lines) < 200_000 {
			w.book.lines = append(w.book.lines, line)
		}
		w.book.mu.Unlock()
	}
	return len(p), nil
}
