package e2e

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/apiclient"
	"github.com/buyflow/buyflow/internal/devstack"
	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/motoserver"
	"github.com/buyflow/buyflow/internal/workflow"
)

// suite is what every test uses; skip is set when the suite cannot run.
var (
	suite struct {
		api      string
		slackURL string
		local    *devstack.Stack
		sign     func(*http.Request, []byte) error
		logPath  string
		// kms is true when the functions sign through KMS (moto_server's; devstack Options.KMS)
		// rather than with a file key.
		kms bool
	}
	skip string
)

// runConfig is the workflow timing of the local stack: polls after 2 s (so a webhook, which
// the seller sends about 0.6 s after the create, wins the race), polls at most every 3 s, a
// 30 s approval window, and the sweep's execution check after 1 s of quiet. The approval
// window is the time a test has, as a person would, to read the requester's "waiting for
// approval" before it decides (a request told after its decision is dropped as stale): with
// 10 s, a loaded machine's bus brought that message after the approval had expired.
var runConfig = workflow.RunConfig{
	ApprovalTimeoutSeconds: 30,
	PollInitialSeconds:     2,
	PollMaxSeconds:         3,
	DeadlineSeconds:        120,
	LoopBudget:             100,
	// The sweep checks the execution of a buy quiet for 1 s (production: half an hour), so
	// that its DescribeExecution runs in the suite (TestSweepChecksTheExecutionOfAQuietBuy)
	// whatever the buy's polls (every 3 s) write between two sweeps.
	ExecutionCheckSeconds: 1,
	// The safety net stays the short one while the sweep runs: the suite's tests of the poll
	// function (and the grants they prove) need its polls; the long net is the workflow
	// tests' (statemachine/stagepaths) and the detection benchmark's (e2e/waiting).
	SweepNetSeconds: 3,
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Getenv("BUYFLOW_E2E") != "1" {
		skip = "end-to-end suite: set BUYFLOW_E2E=1 to run it (make test does); it builds the Lambdas and starts the local stack, or uses BUYFLOW_E2E_ENDPOINT"
		return m.Run()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if ep := os.Getenv("BUYFLOW_E2E_ENDPOINT"); ep != "" {
		sign, err := sigV4Signer(ctx)
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
		suite.api, suite.sign, suite.slackURL = ep, sign, os.Getenv("BUYFLOW_E2E_SLACK_URL")
		return m.Run()
	}

	tmp, err := os.MkdirTemp("", "buyflow-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer func() { _ = os.RemoveAll(tmp) }() // temp folder, best effort
	wd, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	root, err := devstack.FindRepoRoot(wd)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	bin, err := devstack.Bootstraps(ctx, root, filepath.Join(tmp, "bin"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	var logw io.Writer = os.Stderr
	if os.Getenv("BUYFLOW_E2E_VERBOSE") != "1" {
		f, err := devstack.NewLogFile("", "buyflow-e2e-functions")
		if err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
		defer func() { _ = f.Close() }() // log file
		suite.logPath, logw = f.Name(), f
	}
	// Least privilege, proven: every AWS call a function makes is checked against its role
	// in the synthesized CDK stack (BUYFLOW_E2E_IAM=0 skips the minute the synthesis takes).
	var tpl []byte
	if os.Getenv("BUYFLOW_E2E_IAM") != "0" {
		if tpl, err = devstack.SynthTemplate(ctx, root, bin, nil); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			return 1
		}
	}
	// The functions sign through KMS, as on AWS, when moto_server is here to be the KMS (CI
	// has it); else with a file key, and the KMS grants' claims go unchecked (checkIAM).
	if err := motoserver.Available(); err != nil {
		if dynamotest.MotoRequired() {
			fmt.Fprintf(os.Stderr, "e2e: %v; CI requires it (the functions sign through its KMS)\n", err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "e2e: the functions sign with a file key, and no test proves the KMS grants: %v\n", err)
	} else {
		suite.kms = true
	}
	// Every request to the simulated agents is signed (sign_requests), so every function
	// that calls agents uses the signing key: its kms:Sign grant is exercised.
	st, err := devstack.Start(ctx, devstack.Options{
		BinDir: bin, RepoRoot: root, Run: runConfig, Instances: 4, Log: logw, PortWait: 5 * time.Minute, IAMTemplate: tpl,
		KMS: suite.kms, SignRequests: true,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer st.Close()
	suite.api, suite.slackURL, suite.local = st.APIURL, st.SlackURL, st
	code := m.Run()
	// The denials are reported after failed tests too: a refused call is often why one failed.
	if c := checkIAM(st.IAM, code == 0); c != 0 {
		code = c
	}
	if suite.logPath != "" {
		// Each run has a log of its own: one of a passing run is not kept.
		if code == 0 {
			_ = os.Remove(suite.logPath) // best effort: a temp file
		} else {
			fmt.Fprintf(os.Stderr, "e2e: the functions' logs are in %s (BUYFLOW_E2E_VERBOSE=1 streams them)\n", suite.logPath)
		}
	}
	return code
}

// begin skips when the suite cannot run and returns a client for a fresh tenant.
func begin(t *testing.T) *apiclient.Client {
	t.Helper()
	if skip != "" {
		t.Skip(skip)
	}
	t.Parallel()
	track(t)
	return client(t, "t"+randomID(t))
}

// track counts the AWS calls the functions make while t runs as exercised by t (its top-level
// test: docs/iam-grants.md names those).
func track(t *testing.T) {
	t.Helper()
	if suite.local != nil && suite.local.IAM != nil {
		name, _, _ := strings.Cut(t.Name(), "/")
		t.Cleanup(suite.local.IAM.Track(name))
	}
}

// client returns a client for tenant (ignored on a deployed stack, where the caller's
// identity is the tenant).
func client(t testing.TB, tenant string) *apiclient.Client {
	t.Helper()
	c := &apiclient.Client{BaseURL: suite.api, Sign: suite.sign, HTTP: &http.Client{Timeout: 30 * time.Second}}
	if suite.local != nil {
		c.TenantHeader, c.Tenant = suite.local.TenantHeader, tenant
	}
	return c
}

// checkIAM fails the suite when a function's role refused one of its calls, naming each, and
// after a passing run when a test that claims a grant (iamClaims) made no such call. A grant no
// test claims is named with the tests that did make the call, to claim it.
func checkIAM(g *devstack.IAMGate, passed bool) int {
	if g == nil {
		return 0
	}
	if err := devstack.DeniedError(g.Denied()); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	code := 0
	for _, gr := range g.Grants() {
		if iamClaims[gr.Key()] == "" && devstack.ServiceSide(gr) == "" {
			if by := g.ExercisedBy(gr); len(by) > 0 {
				fmt.Fprintf(os.Stderr, "e2e: IAM: %q is exercised by %s: claim it in e2e/iamgrants_test.go\n", gr.Key(), strings.Join(by, ", "))
			}
		}
	}
	if passed {
		claims := maps.Clone(iamClaims)
		if f := flag.Lookup("test.run"); f != nil && f.Value.String() != "" {
			// A run of some tests only: the suite's own claims (TestMain) need the whole suite.
			maps.DeleteFunc(claims, func(_, test string) bool { return test == devstack.SuiteRun })
		}
		if !suite.kms {
			// Signed with a file key: no KMS call was made to prove a KMS grant.
			maps.DeleteFunc(claims, func(grant, _ string) bool { return strings.Contains(grant, " kms:") })
			fmt.Fprintln(os.Stderr, "e2e: IAM: the KMS grants' claims are not checked: the stack signed with a file key (no moto_server)")
		}
		for _, p := range g.Unproven(claims) {
			fmt.Fprintln(os.Stderr, "e2e: IAM:", p)
			code = 1
		}
	}
	fmt.Fprintf(os.Stderr, "e2e: IAM: %d distinct calls allowed by the synthesized roles, none denied\n", len(g.Calls()))
	return code
}
