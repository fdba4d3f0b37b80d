package interop

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Example names one of the official SDK's own example sellers, run from the installed package
// (node_modules/@adcp/sdk/examples, TypeScript through tsx), never copied into the repository.
type Example string

// The example sellers.
const (
	// Guaranteed is examples/hello_seller_adapter_guaranteed.ts: a guaranteed seller over an
	// upstream ad server (ExampleOptions.UpstreamURL, see StartUpstream) whose IO review runs
	// inside the create's task (ctx.handoffToTask), polling the upstream's review task. It
	// keeps its tasks in memory, accepts only brand.domain account references (of a network the
	// upstream knows) and its own token.
	Guaranteed Example = "guaranteed"
	// Broadcast is the BroadcastTvSeller of examples/decisioning-platform-broadcast-tv.ts, served
	// by examples/broadcast.cjs: a trafficker review inside the create's task, packages: [] on
	// the buys it places, nothing listed by get_media_buys, a $5,000 minimum per IO.
	Broadcast Example = "broadcast"
)

// GuaranteedToken is the bearer token the guaranteed example accepts unless told otherwise.
const GuaranteedToken = "sk_harness_do_not_use_in_prod"

// ExampleOptions configures StartExample.
type ExampleOptions struct {
	Example Example
	// Token is the bearer credential it accepts (Broadcast: required; Guaranteed: default
	// GuaranteedToken).
	Token string
	// Port is its port on 127.0.0.1 (0: a free one). A seller started again on the port it had
	// is the same seller to its buyers, restarted.
	Port int
	// UpstreamURL is the guaranteed example's upstream ad server (required for Guaranteed).
	UpstreamURL string
	// Webhooks makes it sign and send webhooks (the framework's RFC 9421 emitter) with its key
	// at /.well-known/jwks.json; without it, it sends none and buyers must poll.
	Webhooks bool
}

// StartExample runs an example seller with examples/deploy.cjs preloaded (loopback, optional
// signed webhooks, GET /recorded) and waits (up to two minutes) until it listens.
func StartExample(o ExampleOptions) (*Seller, error) {
	dir, err := here()
	if err != nil {
		return nil, err
	}
	sdk, err := sdkRoot(dir)
	if err != nil {
		return nil, err
	}
	if o.Port == 0 {
		// A port of its own, known before it starts: its agent URL names it, and Restart
		// brings it back there.
		if o.Port, err = freePort(); err != nil {
			return nil, err
		}
	}
	env := []string{"PORT=" + strconv.Itoa(o.Port),
		// Loopback http webhook URLs; NODE_ENV=test also keeps the SDK from warning that
		// allowPrivateWebhookUrls is a production risk.
		"ADCP_DECISIONING_ALLOW_HTTP_WEBHOOKS=1", "NODE_ENV=test"}
	if o.Webhooks {
		env = append(env, "BUYFLOW_EXAMPLE_WEBHOOKS=1")
	}
	var script string
	switch o.Example {
	case Guaranteed:
		if o.UpstreamURL == "" {
			return nil, errors.New("interop: the guaranteed example needs its upstream's URL")
		}
		if o.Token == "" {
			o.Token = GuaranteedToken
		}
		env = append(env, "UPSTREAM_URL="+o.UpstreamURL, "ADCP_AUTH_TOKEN="+o.Token, "PUBLIC_AGENT_URL=http://127.0.0.1:"+strconv.Itoa(o.Port))
		script = filepath.Join(sdk, "examples", "hello_seller_adapter_guaranteed.ts")
	case Broadcast:
		if o.Token == "" {
			return nil, errors.New("interop: a token is required")
		}
		env = append(env, "BUYFLOW_EXAMPLE_TOKEN="+o.Token)
		script = filepath.Join(dir, "examples", "broadcast.cjs")
	default:
		return nil, fmt.Errorf("interop: no example %q", o.Example)
	}
	// Run in examples/ so that node finds tsx (and the SDK) in the repository's node_modules.
	p, u, err := startNode(filepath.Join(dir, "examples"), env, "LISTENING ",
		"--require", filepath.Join(dir, "examples", "deploy.cjs"), "--import", "tsx", script)
	if err != nil {
		return nil, err
	}
	return &Seller{Base: strings.TrimSuffix(u, "/mcp"), proc: p, example: &o}, nil
}

// Restart kills an example seller at once (SIGKILL, as a crash would: every task it held in
// memory is gone) and starts it again on the same port with the same options.
func (s *Seller) Restart() error {
	if s.example == nil {
		return errors.New("interop: only an example seller is restarted")
	}
	s.Kill()
	again, err := StartExample(*s.example)
	if err != nil {
		return err
	}
	s.Base, s.proc = again.Base, again.proc
	return nil
}

// Upstream is the SDK's own fake of the upstream ad server the guaranteed example wraps
// (`adcp mock-server sales-guaranteed`): orders, line items and IO review tasks in memory.
// GET URL+"/_debug/traffic" counts the calls it served by route.
type Upstream struct {
	URL string
	*proc
}

// StartUpstream runs the SDK's sales-guaranteed mock server on a free loopback port and waits
// (up to two minutes) until it listens.
func StartUpstream() (*Upstream, error) {
	dir, err := here()
	if err != nil {
		return nil, err
	}
	sdk, err := sdkRoot(dir)
	if err != nil {
		return nil, err
	}
	port, err := freePort() // the mock server takes no port 0
	if err != nil {
		return nil, err
	}
	want := fmt.Sprintf("http://127.0.0.1:%d", port)
	p, _, err := startNode(dir, nil, "Mock guaranteed-sales platform (GAM-flavored) running at "+want,
		filepath.Join(sdk, "bin", "adcp.js"), "mock-server", "sales-guaranteed", "--port", strconv.Itoa(port))
	if err != nil {
		return nil, err
	}
	return &Upstream{URL: want, proc: p}, nil
}

// Output returns what the upstream wrote so far.
func (u *Upstream) Output() string { return u.output.String() }

// Stop ends the upstream and reaps it.
func (u *Upstream) Stop() { u.stop(sigterm) }

// freePort is a loopback port nothing listens on now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("interop: %w", err)
	}
	defer func() { _ = ln.Close() }() // only its number was needed
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// sdkRoot is node_modules/@adcp/sdk in a folder above dir.
func sdkRoot(dir string) (string, error) {
	for d := dir; ; d = filepath.Dir(d) {
		p := filepath.Join(d, "node_modules", "@adcp", "sdk")
		if _, err := os.Stat(filepath.Join(p, "package.json")); err == nil {
			return p, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("interop: no node_modules/@adcp/sdk above %s (make deps installs it)", dir)
		}
	}
}
