// Package interop runs sellers built on the official AdCP TypeScript SDK (@adcp/sdk 6.11.0,
// AdCP 3.0.6) as peers nobody here wrote: seller.mjs, on the SDK's own server framework, which
// the client interop test (internal/adcp) and the system suite (e2e/sdkseller) start; and the
// SDK's own example sellers, run from the installed package (examples.go), with the mock
// upstream ad server one of them wraps, for e2e/sdkexamples. It needs Node on PATH and
// node_modules (@adcp/sdk, tsx) above this folder (make deps installs them).
package interop

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
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
	// Signing makes it require signed create_media_buy, verified by the SDK's own verifier
	// against the buyer's JWKS (Seller.SetSigning names it).
	Signing bool
}

// OAuthClient is the one OAuth client the seller's authorization server knows.
type OAuthClient struct{ ID, Secret string }

// Seller is a running seller.mjs.
type Seller struct {
	// Base is its root (http://127.0.0.1:<port>); the MCP endpoint is Base + "/mcp".
	Base string

	*proc
	// example is how an example seller was started (StartExample), for Restart.
	example *ExampleOptions
}

// Start runs the seller and waits (up to two minutes) until it listens.
func Start(o Options) (*Seller, error) {
	if o.Token == "" && o.OAuth == nil {
		return nil, errors.New("interop: a token or an OAuth client is required")
	}
	dir, err := here()
	if err != nil {
		return nil, err
	}
	if o.Delay <= 0 {
		o.Delay = 300 * time.Millisecond
	}
	env := []string{"BUYFLOW_INTEROP_TOKEN=" + o.Token, fmt.Sprintf("BUYFLOW_INTEROP_DELAY_MS=%d", o.Delay.Milliseconds())}
	if o.OAuth != nil {
		env = append(env, "BUYFLOW_INTEROP_OAUTH_CLIENT_ID="+o.OAuth.ID, "BUYFLOW_INTEROP_OAUTH_CLIENT_SECRET="+o.OAuth.Secret)
	}
	if o.Webhooks {
		// NODE_ENV=test: the SDK then takes the loopback webhook URLs without a production warning.
		env = append(env, "BUYFLOW_INTEROP_WEBHOOKS=1", "ADCP_DECISIONING_ALLOW_HTTP_WEBHOOKS=1", "NODE_ENV=test")
	}
	if o.Signing {
		env = append(env, "BUYFLOW_INTEROP_SIGNING=1")
	}
	p, u, err := startNode(dir, env, "LISTENING ", filepath.Join(dir, "seller.mjs"))
	if err != nil {
		return nil, err
	}
	return &Seller{Base: strings.TrimSuffix(u, "/mcp"), proc: p}, nil
}

// StartForTest starts a seller for t: t is skipped unless BUYFLOW_NODE_TESTS=1 (the seller
// needs Node and node_modules/@adcp/sdk; make test sets it), fails if the seller does not
// start, and at its end stops the seller, logging what it wrote when t failed.
func StartForTest(t testing.TB, o Options) *Seller {
	t.Helper()
	if os.Getenv("BUYFLOW_NODE_TESTS") != "1" {
		t.Skip("needs Node and node_modules/@adcp/sdk; set BUYFLOW_NODE_TESTS=1 (make test does)")
	}
	s, err := Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seller stderr:\n%s", s.Stderr())
		}
		s.Stop()
	})
	return s
}

// SetSigning tells a Signing seller where the buyer's JWKS is and which of its key ids it
// refuses as revoked (nil: keep the list).
func (s *Seller) SetSigning(jwksURL string, revoked []string) error {
	cfg := map[string]any{}
	if jwksURL != "" {
		cfg["jwks_url"] = jwksURL
	}
	if revoked != nil {
		cfg["revoked_kids"] = revoked
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	resp, err := http.Post(s.Base+"/signing", "application/json", bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("interop: set signing: %w", err)
	}
	_ = resp.Body.Close() // 204, no body
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("interop: set signing answered %d", resp.StatusCode)
	}
	return nil
}

// here is this package's folder, where the Node files are.
func here() (string, error) {
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("interop: cannot locate this package's folder")
	}
	return filepath.Dir(self), nil
}

// proc is a Node process this package started, in its own process group (tsx and the SDK may
// start children of their own: stopping the group leaves none behind).
type proc struct {
	cmd    *exec.Cmd
	output *logtest.Buffer
}

// startNode runs node with args in dir, its stdout and stderr kept, and waits (up to two
// minutes: tsx compiles an example first, about 6 s on an idle machine, far longer on a busy
// one) for a stdout line starting with ready; it returns the rest of that line.
func startNode(dir string, env []string, ready string, args ...string) (*proc, string, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, "", fmt.Errorf("interop: node is not on PATH: %w", err)
	}
	cmd := exec.Command(node, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &proc{cmd: cmd, output: &logtest.Buffer{}}
	cmd.Stderr = p.output
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", fmt.Errorf("interop: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, "", fmt.Errorf("interop: start %s: %w", strings.Join(args, " "), err)
	}
	linec := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			_, _ = fmt.Fprintln(p.output, sc.Text())
			if rest, ok := strings.CutPrefix(sc.Text(), ready); ok {
				select {
				case linec <- rest:
				default:
				}
			}
		}
	}()
	select {
	case line := <-linec:
		return p, line, nil
	case <-time.After(2 * time.Minute):
		p.stop(syscall.SIGKILL)
		return nil, "", fmt.Errorf("interop: %s did not start within two minutes: %s", strings.Join(args, " "), p.output)
	}
}

// stop signals the process group (SIGKILL after 5 s if it is still there) and reaps it.
func (p *proc) stop(sig syscall.Signal) {
	_ = syscall.Kill(-p.cmd.Process.Pid, sig) // best effort; Wait below reaps it
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) // it ignored the signal
		<-done
	}
}

// MCPURL is the seller's MCP endpoint.
func (s *Seller) MCPURL() string { return s.Base + "/mcp" }

// Stderr returns what the seller wrote so far (stderr, and stdout after its first line).
func (s *Seller) Stderr() string { return s.output.String() }

// Stop ends the seller (SIGTERM, then a kill after 5 s) and reaps it.
func (s *Seller) Stop() { s.stop(sigterm) }

// Kill ends the seller at once (SIGKILL), as a crash would, and reaps it: whatever it held
// only in memory is gone.
func (s *Seller) Kill() { s.stop(syscall.SIGKILL) }

// sigterm asks a process group to end.
const sigterm = syscall.SIGTERM
