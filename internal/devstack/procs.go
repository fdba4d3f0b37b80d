package devstack

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
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
