// Package interop runs seller.mjs, a seller on the official AdCP TypeScript SDK's own server
// framework (@adcp/sdk 6.11.0, AdCP 3.0.6), as a peer nobody here wrote: the client interop
// test (internal/adcp) and the system suite (e2e/sdkseller) start it. It needs Node on PATH
// and node_modules/@adcp/sdk above this folder (make deps installs it).
package interop

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/buyflow/buyflow/internal/logging/logtest"
)

// Options configures the seller (see seller.mjs for what each does).
type Options struct {
	// Token is the bearer credential it accepts (required unless OAuth is set).
	Token string
	// OAuth makes it require OAuth 2.0 client credentials instead: its own authorization
	// server, 60 s tokens, RFC 9728 metadata named in its 401 challenges (see seller.mjs).
	OAuth *OAuthClient
	// Delay is how long an async create stays submitted (default 300 ms).
	Delay time.Duration
	// Webhooks makes it sign and send webhooks (RFC 9421, its framework's emitter) to loopback
	// http URLs, with its key at /.well-known/jwks.json.
	Webhooks bool
}

// OAuthClient is the one OAuth client the seller's authorization server knows.
type OAuthClient struct{ ID, Secret string }

// Seller is a running seller.mjs.
type Seller struct {
	// Base is its root (http://127.0.0.1:<port>); the MCP endpoint is Base + "/mcp".
	Base string

	cmd    *exec.Cmd
	stderr *logtest.Buffer
}

// Start runs the seller and waits (up to 60 s) until it listens.
func Start(o Options) (*Seller, error) {
	if o.Token == "" && o.OAuth == nil {
		return nil, errors.New("interop: a token or an OAuth client is required")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("interop: node is not on PATH: %w", err)
	}
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		return nil, errors.New("interop: cannot locate seller.mjs")
	}
	if o.Delay <= 0 {
		o.Delay = 300 * time.Millisecond
	}
	cmd := exec.Command(node, filepath.Join(filepath.Dir(self), "seller.mjs"))
	cmd.Env = append(os.Environ(), "BUYFLOW_INTEROP_TOKEN="+o.Token, fmt.Sprintf("BUYFLOW_INTEROP_DELAY_MS=%d", o.Delay.Milliseconds()))
	if o.OAuth != nil {
		cmd.Env = append(cmd.Env, "BUYFLOW_INTEROP_OAUTH_CLIENT_ID="+o.OAuth.ID, "BUYFLOW_INTEROP_OAUTH_CLIENT_SECRET="+o.OAuth.Secret)
	}
	if o.Webhooks {
		// NODE_ENV=test: the SDK then takes the loopback webhook URLs without a production warning.
		cmd.Env = append(cmd.Env, "BUYFLOW_INTEROP_WEBHOOKS=1", "ADCP_DECISIONING_ALLOW_HTTP_WEBHOOKS=1", "NODE_ENV=test")
	}
	s := &Seller{cmd: cmd, stderr: &logtest.Buffer{}}
	cmd.Stderr = s.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("interop: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("interop: start seller: %w", err)
	}
	urlc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "LISTENING "); ok {
				urlc <- u
			}
		}
	}()
	select {
	case u := <-urlc:
		s.Base = strings.TrimSuffix(u, "/mcp")
		return s, nil
	case <-time.After(60 * time.Second):
		s.Stop()
		return nil, fmt.Errorf("interop: the seller did not listen within 60 s: %s", s.Stderr())
	}
}

// MCPURL is the seller's MCP endpoint.
func (s *Seller) MCPURL() string { return s.Base + "/mcp" }

// Stderr returns what the seller wrote to stderr so far.
func (s *Seller) Stderr() string { return s.stderr.String() }

// Stop ends the seller (SIGTERM, then a kill after 5 s) and reaps it.
func (s *Seller) Stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM) // best effort; Wait below reaps it
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill() // it ignored SIGTERM
		<-done
	}
}
