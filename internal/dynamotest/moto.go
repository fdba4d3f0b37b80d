package dynamotest

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Backend names a DynamoDB stand-in that Start creates tables in.
type Backend string

// The stand-ins. Kumo runs in-process and is fast; moto's DynamoDB (moto_server, a Python
// program) validates expressions as AWS does (unaliased reserved words, unused or undefined
// placeholders, overlapping paths, newline-separated clauses) and returns ALL_OLD on a failed
// condition, which kumo does not.
const (
	Kumo Backend = "kumo"
	Moto Backend = "moto"
)

// motoCommand is the moto server program RunBoth starts (moto 5.2.x).
const motoCommand = "moto_server"

var backend atomic.Value // Backend; Kumo unless RunBoth switched it

// Current returns the backend Start uses now.
func Current() Backend {
	if b, ok := backend.Load().(Backend); ok {
		return b
	}
	return Kumo
}

// RunBoth runs a package's tests twice, from its TestMain: against kumo, then against moto's
// DynamoDB on a free loopback port. Without moto_server on PATH the second run is skipped with
// one line, unless CI=true, where it is a failure (CI's machine has moto). It returns the exit
// code for os.Exit.
func RunBoth(m *testing.M) int {
	code := m.Run()
	if _, err := exec.LookPath(motoCommand); err != nil {
		if os.Getenv("CI") == "true" {
			fmt.Fprintf(os.Stderr, "dynamotest: %s is not on PATH; CI requires it (pip install 'moto[server]==5.2.1')\n", motoCommand)
			return 1
		}
		fmt.Fprintf(os.Stderr, "dynamotest: SKIP the second run against moto's DynamoDB: %s is not on PATH (pip install 'moto[server]==5.2.1')\n", motoCommand)
		return code
	}
	srv, err := startMoto(30 * time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dynamotest:", err)
		return 1
	}
	defer srv.stop()
	fmt.Fprintf(os.Stderr, "dynamotest: the same tests again, against moto's DynamoDB at %s\n", srv.url)
	motoURL.Store(srv.url)
	backend.Store(Moto)
	defer backend.Store(Kumo)
	if c := m.Run(); c != 0 {
		fmt.Fprintln(os.Stderr, "dynamotest: FAIL against moto's DynamoDB (the run above)")
		return c
	}
	return code
}

var motoURL atomic.Value // string

// motoServer is one moto_server process.
type motoServer struct {
	url  string
	cmd  *exec.Cmd
	done chan struct{}
	once sync.Once
}

// startMoto starts moto_server on a free loopback port and waits until it answers.
func startMoto(wait time.Duration) (*motoServer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(motoCommand, "-H", "127.0.0.1", "-p", strconv.Itoa(port))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setDeathSignal(cmd.SysProcAttr)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", motoCommand, err)
	}
	s := &motoServer{url: fmt.Sprintf("http://127.0.0.1:%d", port), cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // an early exit is reported by the readiness wait
		close(s.done)
	}()
	hc := &http.Client{Timeout: time.Second}
	for deadline := time.Now().Add(wait); ; {
		resp, err := hc.Get(s.url + "/moto-api/")
		if err == nil {
			_ = resp.Body.Close()
			return s, nil
		}
		select {
		case <-s.done:
			return nil, fmt.Errorf("%s exited before it answered on %s", motoCommand, s.url)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("%s did not answer on %s within %s", motoCommand, s.url, wait)
		}
	}
}

func (s *motoServer) stop() {
	s.once.Do(func() {
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			<-s.done
		}
	})
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("dynamotest: free port: %w", err)
	}
	defer func() { _ = ln.Close() }() // only the number was wanted
	addr, ok := ln.Addr().(*net.TCPAddr)
	if !ok {
		return 0, errors.New("dynamotest: free port: not a TCP address")
	}
	return addr.Port, nil
}

// SkipOnMoto skips t during the moto run of [RunBoth], for a behaviour of AWS that moto does
// not reproduce (why says which).
func SkipOnMoto(t testing.TB, why string) {
	t.Helper()
	if Current() == Moto {
		t.Skip("not on moto's DynamoDB: " + why)
	}
}

// MotoServer starts a moto_server of t's own (every moto service, SQS included) and returns
// its URL; it stops with t. Without moto_server on PATH t is skipped, unless CI=true.
func MotoServer(t testing.TB) string {
	t.Helper()
	if _, err := exec.LookPath(motoCommand); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not on PATH; CI requires it (pip install 'moto[server]==5.2.1')", motoCommand)
		}
		t.Skipf("%s is not on PATH (pip install 'moto[server]==5.2.1')", motoCommand)
	}
	srv, err := startMoto(30 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.stop)
	return srv.url
}
