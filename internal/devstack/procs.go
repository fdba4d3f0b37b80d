package devstack

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// instance is one running bootstrap process (one Lambda sandbox).
type instance struct {
	spec procSpec
	// key names the process in the runtime API (<function>~<n>): the emulator proxy knows
	// which invocation it holds.
	key     string
	cmd     *exec.Cmd
	started time.Time
	done    chan struct{}
	err     error // set before done closes
}

// procSpec is how to start a function's processes.
type procSpec struct {
	fn, bin, dir string
	// env is the process environment but AWS_LAMBDA_RUNTIME_API, which start derives from
	// runtimeAddr and the process key.
	env         map[string]string
	runtimeAddr string
	out         io.Writer
}

// procs owns every child process of the stack.
type procs struct {
	mu      sync.Mutex
	all     []*instance
	closing bool
	n       int
	// exited, when set, is called (in its own goroutine) for every process that exits while
	// the stack is not closing.
	exited func(*instance)
}

// start runs a new process of spec (nothing inherited but PATH, HOME and TMPDIR) in its own
// process group.
func (p *procs) start(spec procSpec) (*instance, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closing {
		return nil, errors.New("devstack: stack is closing")
	}
	p.n++
	key := fmt.Sprintf("%s~%d", spec.fn, p.n)
	env := make(map[string]string, len(spec.env)+1)
	for k, v := range spec.env {
		env[k] = v
	}
	env["AWS_LAMBDA_RUNTIME_API"] = spec.runtimeAddr + "/_runtime/" + key
	if akid, ok := env["AWS_ACCESS_KEY_ID"]; ok {
		// Numbered as the runtime API path is, so the proxy can tell which process made a
		// call (callerProcess): two processes of a function may hold two invocations at once.
		env["AWS_ACCESS_KEY_ID"] = akid + "~" + strconv.Itoa(p.n)
	}
	cmd := exec.Command(spec.bin)
	cmd.Dir = spec.dir
	cmd.Env = environ(env)
	cmd.Stdout, cmd.Stderr = spec.out, spec.out
	cmd.SysProcAttr = sysProcAttr()
	inst := &instance{spec: spec, key: key, cmd: cmd, done: make(chan struct{})}
	inst.started = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("devstack: start %s (%s): %w", spec.fn, spec.bin, err)
	}
	go func() {
		inst.err = cmd.Wait()
		close(inst.done)
		p.mu.Lock()
		hook := p.exited
		if p.closing {
			hook = nil
		}
		p.mu.Unlock()
		if hook != nil {
			hook(inst)
		}
	}()
	p.all = append(p.all, inst)
	return inst, nil
}

// environ builds a child's environment: PATH, HOME and TMPDIR from ours, then env, sorted.
func environ(env map[string]string) []string {
	out := []string{}
	for _, k := range []string{"PATH", "HOME", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			if _, set := env[k]; !set {
				out = append(out, k+"="+v)
			}
		}
	}
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// stopAll sends SIGTERM to every process group, waits up to grace, then SIGKILLs what is left
// and waits for it.
func (p *procs) stopAll(grace time.Duration) {
	p.mu.Lock()
	p.closing = true
	all := append([]*instance(nil), p.all...)
	p.mu.Unlock()
	for _, in := range all {
		signalGroup(in.cmd, syscall.SIGTERM)
	}
	deadline := time.After(grace)
	for _, in := range all {
		select {
		case <-in.done:
		case <-deadline:
		}
	}
	for _, in := range all {
		select {
		case <-in.done:
		default:
			signalGroup(in.cmd, syscall.SIGKILL)
			<-in.done
		}
	}
}

func signalGroup(cmd *exec.Cmd, sig syscall.Signal) {
	if cmd.Process == nil {
		return
	}
	// A negative pid names the process group (Setpgid made the child its leader).
	if err := syscall.Kill(-cmd.Process.Pid, sig); err != nil {
		_ = cmd.Process.Signal(sig) // the group is gone; try the process itself
	}
}

// BootstrapPath returns binDir/<fn>/bootstrap.
func BootstrapPath(binDir, fn string) string { return filepath.Join(binDir, fn, "bootstrap") }

// noiseChecksum marks the AWS SDK's warning about kumo's DynamoDB CRC32 header, logged on every
// call; it says nothing about buyflow.
var noiseChecksum = []byte("response did not match expected checksum")

// prefixWriter prefixes each line written to w with prefix. It is safe for concurrent use
// through one shared mutex.
type prefixWriter struct {
	mu     *sync.Mutex
	w      io.Writer
	prefix string
	buf    []byte
}

func (pw *prefixWriter) Write(b []byte) (int, error) {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	pw.buf = append(pw.buf, b...)
	for {
		i := strings.IndexByte(string(pw.buf), '\n')
		if i < 0 {
			break
		}
		line := pw.buf[:i]
		if bytes.Contains(line, noiseChecksum) {
			pw.buf = pw.buf[i+1:]
			continue
		}
		if _, err := fmt.Fprintf(pw.w, "%s%s\n", pw.prefix, line); err != nil {
			return len(b), nil // a failed log write must not kill the child's pipe
		}
		pw.buf = pw.buf[i+1:]
	}
	return len(b), nil
}

// The local Step Functions is statemachine/harness/live.mjs: aws-local-stepfunctions runs the ASL
// (Retry and Catch by the Lambda's error name, the declared timeouts, callback tokens) and the
// script serves the Step Functions API with AWS's execution history. kumo's own engine reports
// every Lambda error as States.TaskFailed, gives up on a call after 30 s and keeps a two-event
// history, so the workflow would not retry locally what it retries on AWS.
const (
	statesScript   = "statemachine/harness/live.mjs"
	statesPolyfill = "statemachine/harness/polyfill.cjs"
	statesEngine   = "node_modules/aws-local-stepfunctions"
)

// statesAccount is the account in the ARNs the local Step Functions hands out.
const statesAccount = "000000000000"

// statesMaxStates bounds one execution's states entered, near AWS's 25,000-event history cap
// (about three events per state here); the workflow continues as a new execution long before.
const statesMaxStates = 8000

// statesProcess is the running local Step Functions.
type statesProcess struct {
	url   string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{}
}

// startStates starts the local Step Functions in repoRoot; it calls Lambda at lambdaURL and
// writes its log lines to out. It returns once the engine listens.
func startStates(repoRoot, lambdaURL, cfgDir string, out io.Writer, wait time.Duration) (*statesProcess, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, errors.New("devstack: the local Step Functions runs on Node.js (>= 20), which is not on PATH: install it (Debian: apt-get install nodejs)")
	}
	if st, err := os.Stat(filepath.Join(repoRoot, statesEngine)); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("devstack: the local Step Functions needs %s: run `npm ci` in %s (make local does)", statesEngine, repoRoot)
	}
	cfg, err := json.Marshal(map[string]any{"lambda_url": lambdaURL, "region": region, "account": statesAccount, "max_states": statesMaxStates})
	if err != nil {
		return nil, fmt.Errorf("devstack: states config: %w", err)
	}
	cfgFile := filepath.Join(cfgDir, "states.json")
	if err := os.WriteFile(cfgFile, cfg, 0o600); err != nil {
		return nil, fmt.Errorf("devstack: states config: %w", err)
	}
	cmd := exec.Command(node, "-r", "./"+statesPolyfill, statesScript, cfgFile)
	cmd.Dir = repoRoot
	cmd.Env = environ(nil)
	cmd.Stderr = out
	cmd.SysProcAttr = sysProcAttr()
	stdin, err := cmd.StdinPipe() // closing it stops the engine
	if err != nil {
		return nil, fmt.Errorf("devstack: states: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("devstack: states: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("devstack: start the local Step Functions: %w", err)
	}
	sp := &statesProcess{cmd: cmd, stdin: stdin, done: make(chan struct{})}
	hello := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			var h struct {
				URL string `json:"url"`
			}
			if json.Unmarshal(sc.Bytes(), &h) == nil {
				hello <- h.URL
			}
		}
		_, _ = io.Copy(out, stdout) // the engine prints nothing else; keep the pipe drained
	}()
	go func() {
		_ = cmd.Wait() // its exit status is reported by the log and by failed calls
		close(sp.done)
	}()
	select {
	case sp.url = <-hello:
		return sp, nil
	case <-sp.done:
		return nil, errors.New("devstack: the local Step Functions exited at start (its log is above)")
	case <-time.After(wait):
		sp.close()
		return nil, fmt.Errorf("devstack: the local Step Functions did not listen within %s", wait)
	}
}

// close stops the engine: end of stdin first, SIGKILL after a grace period.
func (sp *statesProcess) close() {
	_ = sp.stdin.Close() // the engine exits when its stdin ends
	select {
	case <-sp.done:
	case <-time.After(2 * time.Second):
		signalGroup(sp.cmd, syscall.SIGKILL)
		<-sp.done
	}
}
