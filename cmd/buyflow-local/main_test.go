//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestInterruptExitsZero runs the built command as `make local-serve` does, waits for its ready
// line and interrupts it like Ctrl-C: it must stop everything and exit 0, so that a clean stop
// does not read as a failure. It starts the whole local stack (127.0.0.1:4566), so it runs with
// the end-to-end suite (BUYFLOW_E2E=1) and takes turns with it for the port.
func TestInterruptExitsZero(t *testing.T) {
	if os.Getenv("BUYFLOW_E2E") != "1" {
		t.Skip("starts the local stack, which owns 127.0.0.1:4566; set BUYFLOW_E2E=1 to run it (make test does)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	exe := filepath.Join(t.TempDir(), "buyflow-local")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", exe, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	args := []string{"--port-wait", "5m"}
	if bin := os.Getenv("BUYFLOW_E2E_BIN"); bin != "" {
		args = append(args, "--bin", bin)
	}
	cmd := exec.CommandContext(ctx, exe, args...)
	// A session of its own: no controlling terminal, so the command leaves the terminal of
	// whoever runs the tests alone.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "buyflow local stack ready ") {
				ready <- sc.Text()
			}
		}
		close(ready)
	}()
	select {
	case line, ok := <-ready:
		if !ok {
			_ = cmd.Wait()
			t.Fatalf("exited before it was ready: %v\n%s", cmd.ProcessState, stderr.String())
		}
		t.Log(line)
	case <-ctx.Done():
		t.Fatalf("not ready in time\n%s", stderr.String())
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("after SIGINT: %v (want exit status 0)\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "stopping") {
		t.Errorf("no 'stopping' line after SIGINT:\n%s", stderr.String())
	}
	// The functions' log is a file of this run's own, named at start and kept after the stop.
	_, rest, ok := strings.Cut(stderr.String(), "function logs: ")
	logPath, _, _ := strings.Cut(rest, " ")
	if !ok || !strings.HasPrefix(filepath.Base(logPath), "buyflow-local-functions-") {
		t.Fatalf("no 'function logs: <file of its own>' line:\n%s", stderr.String())
	}
	defer func() { _ = os.Remove(logPath) }()
	if fi, err := os.Stat(logPath); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("the functions' log %s after the stop: %v, want it kept", logPath, err)
	}
}
