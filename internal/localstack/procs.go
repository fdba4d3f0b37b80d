package localstack

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

// instance is one running bootstrap process.
type instance struct {
	fn      string
	cmd     *exec.Cmd
	started time.Time
	done    chan struct{}
	err     error // set before done closes
}

// procs owns every child process of the stack.
type procs struct {
	mu      sync.Mutex
	all     []*instance
	closing bool
}

// start runs bin with env (and nothing inherited but PATH and HOME) in its own process group,
// with its output to out.
func (p *procs) start(fn, bin, dir string, env map[string]string, out io.Writer) (*instance, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closing {
		return nil, errors.New("localstack: stack is closing")
	}
	cmd := exec.Command(bin)
	cmd.Dir = dir
	cmd.Env = environ(env)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = sysProcAttr()
	inst := &instance{fn: fn, cmd: cmd, done: make(chan struct{})}
	inst.started = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("localstack: start %s (%s): %w", fn, bin, err)
	}
	go func() {
		inst.err = cmd.Wait()
		close(inst.done)
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
