// Package motoserver runs moto_server (moto 5.2.x, a Python program emulating AWS APIs) on a
// free loopback port, for tests and the local stack: DynamoDB and SQS in internal/dynamotest,
// KMS (the request-signing key) in internal/signingkey's tests and internal/devstack.
//
// moto 5.2.1's KMS differs from AWS in two ways that matter to buyflow, mended at start-up
// by sitecustomize.py (Stock runs moto as shipped, for the tests that pin the gaps): Sign
// ignores MessageType=DIGEST and signs the SHA-256 of the digest, and GetPublicKey answers
// without KeySpec. Nothing else is changed.
package motoserver

import (
	_ "embed" // sitecustomize.py
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Command is the moto server program (moto 5.2.x).
const Command = "moto_server"

// Install says how to get Command.
const Install = "pip install 'moto[server]==5.2.1'"

//go:embed sitecustomize.py
var siteCustomize []byte

// ErrMissing reports that Command is not on PATH.
var ErrMissing = errors.New("motoserver: " + Command + " is not on PATH (" + Install + ")")

// Available returns nil when Command is on PATH, else ErrMissing.
func Available() error {
	if _, err := exec.LookPath(Command); err != nil {
		return ErrMissing
	}
	return nil
}

// Options configures Start.
type Options struct {
	// Wait bounds the wait for the server to answer (default 2 min).
	Wait time.Duration
	// Stock runs moto as shipped, without sitecustomize.py's KMS mends.
	Stock bool
}

// Server is one moto_server process.
type Server struct {
	// URL is its endpoint (http://127.0.0.1:<port>), every service on it.
	URL string

	cmd  *exec.Cmd
	dir  string
	done chan struct{}
	once sync.Once
}

// defaultWait bounds the wait for a moto_server to answer. The wait ends when it answers, or
// at once when it exits, so the bound only ever meets a start that hangs: it is long enough for
// a Python server's start on a machine whose cores are busy with other work (30 s was not).
const defaultWait = 2 * time.Minute

// Start starts Command on a free loopback port and waits until it answers.
func Start(o Options) (*Server, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	if o.Wait <= 0 {
		o.Wait = defaultWait
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(Command, "-H", "127.0.0.1", "-p", strconv.Itoa(port))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setDeathSignal(cmd.SysProcAttr)
	s := &Server{URL: fmt.Sprintf("http://127.0.0.1:%d", port), cmd: cmd, done: make(chan struct{})}
	if !o.Stock {
		if s.dir, err = os.MkdirTemp("", "buyflow-moto-"); err != nil {
			return nil, fmt.Errorf("motoserver: %w", err)
		}
		if err := os.WriteFile(filepath.Join(s.dir, "sitecustomize.py"), siteCustomize, 0o600); err != nil {
			_ = os.RemoveAll(s.dir) // a temp folder
			return nil, fmt.Errorf("motoserver: %w", err)
		}
		path := s.dir
		if p := os.Getenv("PYTHONPATH"); p != "" {
			path += string(os.PathListSeparator) + p
		}
		cmd.Env = append(os.Environ(), "PYTHONPATH="+path)
	}
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(s.dir) // a temp folder, or ""
		return nil, fmt.Errorf("motoserver: start %s: %w", Command, err)
	}
	go func() {
		_ = cmd.Wait() // an early exit is reported by the readiness wait
		close(s.done)
	}()
	hc := &http.Client{Timeout: time.Second}
	for deadline := time.Now().Add(o.Wait); ; {
		resp, err := hc.Get(s.URL + "/moto-api/")
		if err == nil {
			_ = resp.Body.Close()
			return s, nil
		}
		select {
		case <-s.done:
			s.Stop()
			return nil, fmt.Errorf("motoserver: %s exited before it answered on %s", Command, s.URL)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("motoserver: %s did not answer on %s within %s", Command, s.URL, o.Wait)
		}
	}
}

// Stop stops the server (its whole process group) and waits for it to exit.
func (s *Server) Stop() {
	s.once.Do(func() {
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			<-s.done
		}
		if s.dir != "" {
			_ = os.RemoveAll(s.dir) // a temp folder
		}
	})
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("motoserver: free port: %w", err)
	}
	defer func() { _ = ln.Close() }() // only the number was wanted
	addr, ok := ln.Addr().(*net.TCPAddr)
	if !ok {
		return 0, errors.New("motoserver: free port: not a TCP address")
	}
	return addr.Port, nil
}
