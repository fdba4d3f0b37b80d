// Package sdkexamples is the system-level suite against the official @adcp/sdk 6.11.0's own
// example sellers, run from the installed package (node_modules/@adcp/sdk/examples, never
// copied into the repository) as peers nobody here wrote, next to the simulated governance
// agent on the local stack, driven through HTTP only:
//
//   - hello_seller_adapter_guaranteed.ts over the SDK's fake upstream ad server (`adcp
//     mock-server sales-guaranteed`), with its IO review inside the create's task. The tests
//     play the seller's IO desk (ioDesk): the review waits until a test approves or refuses it.
//     Two instances run: one of them is restarted mid-review.
//   - the BroadcastTvSeller of decisioning-platform-broadcast-tv.ts (its trafficker review,
//     packages: [] on its buys, nothing listed by get_media_buys).
//
// The deployment the examples leave to whoever runs them (loopback webhooks, signed webhooks,
// a record of their updates) is internal/adcp/interop/examples/deploy.cjs.
//
// It needs BUYFLOW_E2E=1 and BUYFLOW_NODE_TESTS=1 (make test sets both), Node and
// node_modules (tsx, @adcp/sdk); BUYFLOW_E2E_BIN names prebuilt host bootstraps (make
// build-host).
package sdkexamples

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/buyflow/buyflow/e2e/e2etest"
	"github.com/buyflow/buyflow/internal/adcp/interop"
	"github.com/buyflow/buyflow/internal/devstack"
	"github.com/buyflow/buyflow/internal/workflow"
)

// The sellers' ids in the stack's registry, and the broadcast seller's token (the guaranteed
// example's is its own, interop.GuaranteedToken).
const (
	guaranteedID   = "sdk-guaranteed"
	restartedID    = "sdk-guaranteed-restarted"
	broadcastID    = "sdk-broadcast"
	broadcastToken = "tok-sdk-broadcast-0123456789abcdef"
	governanceID   = devstack.GovernanceID
)

// runConfig: the safety-net poll every 2 s (the guaranteed example's completion may come by
// webhook or poll; a restarted seller is only ever polled), and a lost-task grace short enough
// to be seen ending (lostTaskGrace; production's default is 10 minutes).
var runConfig = workflow.RunConfig{
	ApprovalTimeoutSeconds: 30,
	PollInitialSeconds:     2,
	PollMaxSeconds:         2,
	DeadlineSeconds:        300,
	LoopBudget:             200,
	LostTaskGraceSeconds:   int(lostTaskGrace / time.Second),
}

// lostTaskGrace is the suite's lost-task grace.
const lostTaskGrace = 20 * time.Second

var (
	suite struct {
		*e2etest.PeerStack
		desk                             *ioDesk
		upstream                         *interop.Upstream
		guaranteed, restarted, broadcast *interop.Seller
	}
	skip string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	if skip = e2etest.PeerSkip("SDK example sellers suite"); skip != "" {
		return m.Run()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var outputs []func() string
	code := 1
	defer func() {
		if code != 0 {
			for _, out := range outputs {
				fmt.Fprintf(os.Stderr, "sdkexamples: a Node process wrote:\n%s\n", out())
			}
		}
	}()
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "sdkexamples:", err)
		return 1
	}

	up, err := interop.StartUpstream()
	if err != nil {
		return fail(err)
	}
	defer up.Stop()
	suite.upstream, outputs = up, append(outputs, up.Output)
	desk, err := newIODesk(up.URL)
	if err != nil {
		return fail(err)
	}
	deskSrv := httptest.NewServer(desk)
	defer deskSrv.Close()
	defer desk.close() // before the server: its held reviews end first
	suite.desk = desk

	start := func(o interop.ExampleOptions) (*interop.Seller, error) {
		s, err := interop.StartExample(o)
		if err == nil {
			outputs = append(outputs, s.Stderr)
		}
		return s, err
	}
	if suite.guaranteed, err = start(interop.ExampleOptions{Example: interop.Guaranteed, UpstreamURL: deskSrv.URL, Webhooks: true}); err != nil {
		return fail(err)
	}
	defer suite.guaranteed.Stop()
	if suite.restarted, err = start(interop.ExampleOptions{Example: interop.Guaranteed, UpstreamURL: deskSrv.URL, Webhooks: true}); err != nil {
		return fail(err)
	}
	defer func() { suite.restarted.Stop() }() // Restart replaces its process
	if suite.broadcast, err = start(interop.ExampleOptions{Example: interop.Broadcast, Token: broadcastToken, Webhooks: true}); err != nil {
		return fail(err)
	}
	defer suite.broadcast.Stop()

	peer := func(id string, s *interop.Seller, token string) e2etest.Peer {
		return e2etest.Peer{ID: id, MCPURL: s.MCPURL(), Token: token, JWKSURL: s.Base + "/.well-known/jwks.json"}
	}
	peers := []e2etest.Peer{
		peer(guaranteedID, suite.guaranteed, interop.GuaranteedToken),
		peer(restartedID, suite.restarted, interop.GuaranteedToken),
		peer(broadcastID, suite.broadcast, broadcastToken),
	}
	// No test here needs the reconciliation sweep: the production cadence keeps it out of the
	// way of the paths (webhook, the buy's own poll) the tests assert.
	st, err := e2etest.StartPeerStack(ctx, "sdkexamples", peers, devstack.Options{Run: runConfig, Instances: 3,
		PortWait: 8 * time.Minute, SweepEvery: time.Minute})
	if err != nil {
		return fail(err)
	}
	suite.PeerStack = st
	code = m.Run()
	st.Close(code == 0)
	return code
}
