package e2etest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/apiclient"
	"github.com/buyflow/buyflow/internal/devstack"
	"github.com/buyflow/buyflow/internal/workflow"
)

// PeerStack is the local stack of a suite that runs against sellers nobody here wrote (the
// official SDK's), started on loopback next to the simulated governance agent.
type PeerStack struct {
	*devstack.Stack
	// LogPath is the functions' log file ("" when they stream to stderr).
	LogPath string

	tmp     string
	logFile *os.File
}

// PeerSkip says why a suite of real Node peers on the local stack cannot run here ("" when it
// can): it needs BUYFLOW_E2E=1 and BUYFLOW_NODE_TESTS=1 (make test sets both), and the local
// stack, since the peers must reach the API on loopback. what names the suite and its peers.
func PeerSkip(what string) string {
	switch {
	case os.Getenv("BUYFLOW_E2E") != "1" || os.Getenv("BUYFLOW_NODE_TESTS") != "1":
		return what + ": set BUYFLOW_E2E=1 and BUYFLOW_NODE_TESTS=1 (make test does); it starts the local stack and Node sellers"
	case os.Getenv("BUYFLOW_E2E_ENDPOINT") != "":
		return what + ": runs on the local stack only (the sellers must reach the API on loopback)"
	}
	return ""
}

// Peer is one real agent of the stack's registry: a seller on MCP, signing its webhooks
// (RFC 9421, key at JWKSURL) when JWKSURL is set. Token is its credential: the bearer token,
// or with Auth (the registry's auth block, e.g. OAuth client credentials) the client secret.
type Peer struct {
	ID, MCPURL, Token, JWKSURL string
	Auth                       map[string]any
}

// StartPeerStack starts the local stack (kumo, the real bootstraps, the same state machine
// and HTTP API) with peers as its sellers and the simulated governance agent. Prebuilt host
// bootstraps are taken from BUYFLOW_E2E_BIN, else built; the functions log to a temporary
// file named after suite (BUYFLOW_E2E_VERBOSE=1 streams them). Close stops it all.
func StartPeerStack(ctx context.Context, suite string, peers []Peer, o devstack.Options) (*PeerStack, error) {
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	root, err := devstack.FindRepoRoot(wd)
	if err != nil {
		return nil, err
	}
	ps := &PeerStack{}
	if ps.tmp, err = os.MkdirTemp("", "buyflow-"+suite+"-"); err != nil {
		return nil, err
	}
	fail := func(err error) (*PeerStack, error) { ps.Close(false); return nil, err }
	agents := []map[string]any{}
	creds := map[string]string{}
	for _, p := range peers {
		a := map[string]any{"id": p.ID, "role": "seller", "mcp_url": p.MCPURL, "credential_ref": devstack.AgentSecretPrefix + p.ID}
		if p.JWKSURL != "" {
			a["webhook"] = map[string]any{"mode": "rfc9421", "jwks_uri": p.JWKSURL}
		}
		if p.Auth != nil {
			a["auth"] = p.Auth
		}
		agents = append(agents, a)
		creds[devstack.AgentSecretPrefix+p.ID] = p.Token
	}
	raw, err := json.Marshal(map[string]any{"agents": agents, "credentials": creds, "simulated": []string{"governance"}})
	if err != nil {
		return fail(err)
	}
	o.AgentsFile = filepath.Join(ps.tmp, "agents.json")
	if err := os.WriteFile(o.AgentsFile, raw, 0o600); err != nil {
		return fail(err)
	}
	o.RepoRoot = root
	if o.BinDir, err = devstack.Bootstraps(ctx, root, filepath.Join(ps.tmp, "bin")); err != nil {
		return fail(err)
	}
	var logw io.Writer = os.Stderr
	if os.Getenv("BUYFLOW_E2E_VERBOSE") != "1" {
		if ps.logFile, err = devstack.NewLogFile("", "buyflow-"+suite+"-functions"); err != nil {
			return fail(err)
		}
		ps.LogPath, logw = ps.logFile.Name(), ps.logFile
	}
	o.Log = logw
	if ps.Stack, err = devstack.Start(ctx, o); err != nil {
		return fail(err)
	}
	return ps, nil
}

// Close stops the stack and removes its temporary files; the functions' log is kept when the
// suite failed (and its path printed), removed when it passed.
func (ps *PeerStack) Close(passed bool) {
	if ps.Stack != nil {
		ps.Stack.Close()
	}
	if ps.logFile != nil {
		_ = ps.logFile.Close() // written by the stopped functions only
		if passed {
			_ = os.Remove(ps.LogPath) // each run has a log of its own: a passing run's is not kept
		} else {
			fmt.Fprintf(os.Stderr, "the functions' logs are in %s (BUYFLOW_E2E_VERBOSE=1 streams them)\n", ps.LogPath)
		}
	}
	_ = os.RemoveAll(ps.tmp) // a temporary folder
}

// Client is an API client of the stack for a fresh tenant.
func (ps *PeerStack) Client(t testing.TB) *apiclient.Client {
	t.Helper()
	return &apiclient.Client{BaseURL: ps.APIURL, HTTP: &http.Client{Timeout: 30 * time.Second},
		TenantHeader: ps.TenantHeader, Tenant: "t" + RandomID(t)}
}

// ExecutionEnd waits (up to 60 s) for the operation's first execution to end and returns its
// status and error.
func (ps *PeerStack) ExecutionEnd(t testing.TB, id string) (string, string) {
	t.Helper()
	name := workflow.ExecutionName(id, 0)
	deadline := time.Now().Add(60 * time.Second)
	for {
		ex, err := ps.Execution(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		if ex.Status != "RUNNING" || time.Now().After(deadline) {
			return ex.Status, ex.Error
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Place submits a buy and returns its operation id.
func Place(t testing.TB, c *apiclient.Client, key string, b []byte) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sub, _, err := c.Submit(ctx, key, b)
	if err != nil || sub.OperationID == "" {
		t.Fatalf("submit: %+v, %v", sub, err)
	}
	return sub.OperationID
}

// Finished waits (up to 90 s) for a terminal status and checks it. A buy that completes can
// still be canceled (compensation): waiting for canceled waits past completed.
func Finished(t testing.TB, c *apiclient.Client, id, want string) api.MediaBuy {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var until func(api.MediaBuy) bool
	if want == "canceled" {
		until = func(op api.MediaBuy) bool {
			return op.Status == want || (op.Status != "completed" && workflow.Status(op.Status).Terminal())
		}
	}
	op, err := c.Wait(ctx, id, 100*time.Millisecond, until, nil)
	if err != nil {
		t.Fatalf("operation %s: %v", id, err)
	}
	if op.Status != want {
		LogTimeline(t, c, id)
		t.Fatalf("operation %s ended %s (reason %q), want %s", id, op.Status, op.Reason, want)
	}
	return op
}

// Get reads one buy.
func Get(t testing.TB, c *apiclient.Client, id string) api.MediaBuy {
	t.Helper()
	op, err := c.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return op
}

// Reached returns the event that moved the operation to status.
func Reached(t testing.TB, evs []api.Event, status string) api.Event {
	t.Helper()
	i := slices.IndexFunc(evs, func(e api.Event) bool { return e.To == status })
	if i < 0 {
		t.Fatalf("no event reached %s", status)
	}
	return evs[i]
}

// DetailOf is an event's detail as a map (nil for an event without details).
func DetailOf(e api.Event) map[string]any {
	var m map[string]any
	_ = json.Unmarshal(e.Detail, &m) // nil for an event without details
	return m
}

// WithCode reports whether an event of type typ carries error_code code.
func WithCode(evs []api.Event, typ, code string) bool {
	return slices.ContainsFunc(evs, func(e api.Event) bool { return e.Type == typ && DetailOf(e)["error_code"] == code })
}
