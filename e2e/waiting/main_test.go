// Package waiting holds the local-stack benchmarks of how a buy waits for its seller: how soon
// a seller's webhook resumes a parked buy, how soon the reconciliation sweep notices a seller
// that finished without a webhook, and what each function's cold start costs when it starts
// alone. It runs its own local stack, whose per-buy
// safety net, while the sweep runs, is far longer than the measurement, so that only the sweep
// can notice:
//
//	make build-host
//	BUYFLOW_E2E=1 BUYFLOW_E2E_BIN=$PWD/bin/host go test -run '^$' -bench . -benchtime 50x ./e2e/waiting
package waiting

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/devstack"
	"github.com/buyflow/buyflow/internal/workflow"
)

var (
	stack   *devstack.Stack
	binDir  string
	skip    string
	logPath string
)

// runConfig: the short safety net polls every 3 s, the long one (while the sweep's heartbeat is
// fresh) after 15 minutes, so every buy of the detection benchmark is noticed by the sweep only
// if the stages saw the heartbeat: a buy that got the short net shows as "by a poll" in its table.
var runConfig = workflow.RunConfig{
	ApprovalTimeoutSeconds: 60,
	PollInitialSeconds:     1,
	PollMaxSeconds:         3,
	SweepNetSeconds:        900,
	DeadlineSeconds:        1800,
	LoopBudget:             100,
}

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	if os.Getenv("BUYFLOW_E2E") != "1" {
		skip = "local-stack benchmarks: set BUYFLOW_E2E=1 (make bench-local does)"
		return m.Run()
	}
	// The package holds benchmarks only: without -bench there is nothing to start a stack for.
	flag.Parse()
	if f := flag.Lookup("test.bench"); f == nil || f.Value.String() == "" {
		return m.Run()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	wd, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(os.Stderr, "waiting:", err)
		return 1
	}
	root, err := devstack.FindRepoRoot(wd)
	if err != nil {
		fmt.Fprintln(os.Stderr, "waiting:", err)
		return 1
	}
	tmp, err := os.MkdirTemp("", "buyflow-waiting-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "waiting:", err)
		return 1
	}
	defer func() { _ = os.RemoveAll(tmp) }() // temp folder, best effort
	if binDir, err = devstack.Bootstraps(ctx, root, filepath.Join(tmp, "bin")); err != nil {
		fmt.Fprintln(os.Stderr, "waiting:", err)
		return 1
	}
	cadence, err := localCadence()
	if err != nil {
		fmt.Fprintln(os.Stderr, "waiting:", err)
		return 1
	}
	f, err := devstack.NewLogFile("", "buyflow-waiting-functions")
	if err != nil {
		fmt.Fprintln(os.Stderr, "waiting:", err)
		return 1
	}
	defer func() { _ = f.Close() }() // log file
	logPath = f.Name()
	var logw io.Writer = f
	st, err := devstack.Start(ctx, devstack.Options{
		BinDir: binDir, RepoRoot: root, Run: runConfig, Instances: 2, Log: logw, PortWait: 5 * time.Minute,
		AgentStep: time.Second, SweepEvery: cadence,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "waiting:", err)
		return 1
	}
	defer st.Close()
	stack = st
	code := m.Run()
	if code == 0 {
		_ = os.Remove(logPath) // each run has a log of its own: a passing run's is not kept
	} else {
		fmt.Fprintf(os.Stderr, "waiting: the functions' logs are in %s\n", logPath)
	}
	return code
}
