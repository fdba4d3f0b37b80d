package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"

	"github.com/buyflow/buyflow/internal/apiclient"
	"github.com/buyflow/buyflow/internal/devstack"
	"github.com/buyflow/buyflow/internal/workflow"
)

// The tests in this file inject faults into the simulated agents and the functions' processes
// of the local stack, and read the execution history through the Step Functions API, as
// finance does in the console. They need the local stack (not BUYFLOW_E2E_ENDPOINT).
// Agent-wide faults (FailNextHTTP) hit whatever call comes next, so those tests do not run in
// parallel: Go runs them before every parallel test starts. Even then the sweep and the polls of
// earlier tests' buys still call the agents, so a test that counts attempts scripts its faults
// for its own PO number (Script) instead.

// localOnly skips unless the suite runs the local stack, and returns a client for a fresh tenant
// without marking the test parallel.
func localOnly(t *testing.T) *apiclient.Client {
	t.Helper()
	if skip != "" {
		t.Skip(skip)
	}
	if suite.local == nil {
		t.Skip("fault injection needs the local stack's simulated agents and processes")
	}
	track(t)
	return client(t, "t"+randomID(t))
}

// history reads the execution history of the operation's first execution with the AWS SDK.
func history(t *testing.T, operationID string) []sfntypes.HistoryEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := sfn.New(sfn.Options{
		Region: "us-east-1", BaseEndpoint: aws.String(suite.local.EmulatorURL),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "local", SecretAccessKey: "local"}, nil
		}),
	})
	arn := strings.Replace(suite.local.StateMachineARN, ":stateMachine:", ":execution:", 1) + ":" + workflow.ExecutionName(operationID, 0)
	var out []sfntypes.HistoryEvent
	p := sfn.NewGetExecutionHistoryPaginator(cl, &sfn.GetExecutionHistoryInput{ExecutionArn: aws.String(arn), MaxResults: 100})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatalf("get-execution-history %s: %v", arn, err)
		}
		out = append(out, page.Events...)
	}
	return out
}

// finalHistory waits until the execution has ended and returns its history.
func finalHistory(t *testing.T, operationID string) []sfntypes.HistoryEvent {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		h := history(t, operationID)
		if len(h) > 0 && strings.HasPrefix(string(h[len(h)-1].Type), "Execution") && h[len(h)-1].Type != sfntypes.HistoryEventTypeExecutionStarted {
			return h
		}
		if time.Now().After(deadline) {
			t.Fatalf("execution of %s still runs after 60 s: %s", operationID, summarize(h))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// taskAttempts returns, for the Task state named state, the outcome of each attempt in order:
// "ok", or the error name of a TaskFailed/TaskTimedOut.
func taskAttempts(h []sfntypes.HistoryEvent, state string) []string {
	var out []string
	in := false
	for _, ev := range h {
		switch {
		case ev.StateEnteredEventDetails != nil:
			in = aws.ToString(ev.StateEnteredEventDetails.Name) == state
		case !in:
		case ev.Type == sfntypes.HistoryEventTypeTaskSucceeded:
			out = append(out, "ok")
		case ev.TaskFailedEventDetails != nil:
			out = append(out, aws.ToString(ev.TaskFailedEventDetails.Error))
		case ev.TaskTimedOutEventDetails != nil:
			out = append(out, aws.ToString(ev.TaskTimedOutEventDetails.Error))
		}
	}
	return out
}

// entered lists the states entered, in order.
func entered(h []sfntypes.HistoryEvent) []string {
	var out []string
	for _, ev := range h {
		if ev.StateEnteredEventDetails != nil {
			out = append(out, aws.ToString(ev.StateEnteredEventDetails.Name))
		}
	}
	return out
}

func summarize(h []sfntypes.HistoryEvent) string {
	var b strings.Builder
	for _, ev := range h {
		fmt.Fprintf(&b, "\n  %d %s", ev.Id, ev.Type)
		switch {
		case ev.StateEnteredEventDetails != nil:
			fmt.Fprintf(&b, " %s", aws.ToString(ev.StateEnteredEventDetails.Name))
		case ev.TaskFailedEventDetails != nil:
			fmt.Fprintf(&b, " %s", aws.ToString(ev.TaskFailedEventDetails.Error))
		case ev.ExecutionFailedEventDetails != nil:
			fmt.Fprintf(&b, " %s: %.200s", aws.ToString(ev.ExecutionFailedEventDetails.Error), aws.ToString(ev.ExecutionFailedEventDetails.Cause))
		}
	}
	return b.String()
}

// wantRetried checks that state failed with TransientError exactly faults times and then
// succeeded, each attempt a TaskScheduled of its own.
func wantRetried(t *testing.T, h []sfntypes.HistoryEvent, state string, faults int) {
	t.Helper()
	want := append(slices.Repeat([]string{"TransientError"}, faults), "ok")
	if got := taskAttempts(h, state); !slices.Equal(got, want) {
		t.Errorf("%s attempts %v, want %v; history:%s", state, got, want, summarize(h))
	}
}

// One and three transient faults at the seller (HTTP 503 on create_media_buy) and at
// governance (HTTP 503 on check_governance): the buy completes, and each retry is in the
// execution history as a failed attempt with the Lambda's own error name, TransientError.
func TestTransientFaultsAreRetried(t *testing.T) {
	for _, tc := range []struct {
		name   string
		faults int
		state  string
		inject func(t *testing.T, po string, n int)
	}{
		{"seller once", 1, "CreateMediaBuy", failSellerCreates},
		{"seller three times", 3, "CreateMediaBuy", failSellerCreates},
		{"governance once", 1, "CheckGovernance", failNextGovernanceCalls},
		{"governance three times", 3, "CheckGovernance", failNextGovernanceCalls},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := localOnly(t)
			order := po(t)
			tc.inject(t, order, tc.faults)
			sub := submit(t, c, buy{PO: order, Sim: "sync"})
			finished(t, c, sub.OperationID, "completed")
			h := finalHistory(t, sub.OperationID)
			if last := h[len(h)-1]; last.Type != sfntypes.HistoryEventTypeExecutionSucceeded {
				t.Errorf("execution ended %s, want ExecutionSucceeded", last.Type)
			}
			wantRetried(t, h, tc.state, tc.faults)
		})
	}
}

// failSellerCreates makes the seller answer 503 to the first n create_media_buy attempts for po:
// the attempts share one idempotency key, which the simulated seller counts by, and no other
// buy's call (the sweep reads earlier tests' pending tasks) can take the faults.
func failSellerCreates(t *testing.T, po string, n int) {
	suite.local.Seller.Script(po, fmt.Sprintf("http_503*%d", n))
	t.Cleanup(func() { suite.local.Seller.Script(po, "") })
}

// failNextGovernanceCalls makes governance answer 503 to its next n calls, whatever they are:
// check_governance gets a fresh idempotency key per call, so a script for po would fail every
// attempt. The sweep, which reads earlier buys' tasks while these tests run, never calls governance.
func failNextGovernanceCalls(_ *testing.T, _ string, n int) {
	suite.local.Governance.FailNextHTTP(n, 503)
}

// A permanent fault (governance refuses the credential: HTTP 403) is not retried: one attempt,
// then the failure path, and the buy fails with a reason.
func TestPermanentFaultFailsOnce(t *testing.T) {
	c := localOnly(t)
	suite.local.Governance.FailNextHTTP(1, 403)
	sub := submit(t, c, buy{PO: po(t), Sim: "sync"})
	op := waitFor(t, c, sub.OperationID, 60*time.Second, nil)
	if op.Status != "failed" {
		t.Errorf("final status %s, want failed", op.Status)
	}
	h := finalHistory(t, sub.OperationID)
	got := taskAttempts(h, "CheckGovernance")
	if len(got) != 1 || got[0] == "ok" || got[0] == "TransientError" {
		t.Errorf("CheckGovernance attempts %v, want one non-transient failure; history:%s", got, summarize(h))
	}
	if last := h[len(h)-1]; last.Type != sfntypes.HistoryEventTypeExecutionFailed || last.ExecutionFailedEventDetails == nil ||
		aws.ToString(last.ExecutionFailedEventDetails.Error) == "" || aws.ToString(last.ExecutionFailedEventDetails.Cause) == "" {
		t.Errorf("last event %s %+v, want ExecutionFailed with error and cause", last.Type, last.ExecutionFailedEventDetails)
	}
	if n := strings.Count(strings.Join(types(settled(t, c, sub.OperationID)), " "), "failure"); n != 1 {
		t.Errorf("%d failure events in the ledger, want 1", n)
	}
}

// The history of a completed and of a failed buy lists every state the execution entered, in
// AWS's event types, with TaskScheduled/TaskStarted and an outcome for every Task attempt;
// the AWS CLI reads it too.
func TestExecutionHistoryListsEveryState(t *testing.T) {
	c := localOnly(t)
	for _, tc := range []struct {
		sim, status, end string
		path             []string
	}{
		{"async_complete", "completed", "ExecutionSucceeded",
			[]string{"IsContinuation", "CheckGovernance", "GovernanceDecision", "CreateMediaBuy", "SellerAvailable", "AwaitSeller", "ReportOutcome", "MediaBuyCompleted"}},
		{"async_fail", "failed", "ExecutionFailed",
			[]string{"IsContinuation", "CheckGovernance", "GovernanceDecision", "CreateMediaBuy", "SellerAvailable", "AwaitSeller", "RecordFailure", "FailureKind"}},
	} {
		t.Run(tc.sim, func(t *testing.T) {
			sub := submit(t, c, buy{PO: po(t), Sim: tc.sim})
			finished(t, c, sub.OperationID, tc.status)
			h := finalHistory(t, sub.OperationID)
			if h[0].Type != sfntypes.HistoryEventTypeExecutionStarted || string(h[len(h)-1].Type) != tc.end {
				t.Errorf("history runs %s … %s, want ExecutionStarted … %s", h[0].Type, h[len(h)-1].Type, tc.end)
			}
			got := entered(h)
			for _, s := range tc.path {
				if !slices.Contains(got, s) {
					t.Errorf("state %s not in the history's entered states %v", s, got)
				}
			}
			checkHistoryShape(t, h)
			if tc.end == "ExecutionFailed" {
				d := h[len(h)-1].ExecutionFailedEventDetails
				if d == nil || aws.ToString(d.Error) == "" || aws.ToString(d.Cause) == "" {
					t.Errorf("ExecutionFailed without error and cause: %+v", d)
				}
			}
			checkWithCLI(t, sub.OperationID, len(h))
		})
	}
}

// checkHistoryShape checks what AWS guarantees of a history: ids 1..n, every Task state entry
// followed by TaskScheduled and TaskStarted, every attempt ended by exactly one outcome, and
// a callback task's TaskSubmitted before its outcome.
func checkHistoryShape(t *testing.T, h []sfntypes.HistoryEvent) {
	t.Helper()
	open := false
	for i, ev := range h {
		if ev.Id != int64(i+1) {
			t.Fatalf("event %d has id %d", i+1, ev.Id)
		}
		switch ev.Type {
		case sfntypes.HistoryEventTypeTaskScheduled:
			if open {
				t.Errorf("event %d: TaskScheduled while an attempt is open:%s", ev.Id, summarize(h))
			}
			if i+1 >= len(h) || h[i+1].Type != sfntypes.HistoryEventTypeTaskStarted {
				t.Errorf("event %d: TaskScheduled not followed by TaskStarted", ev.Id)
			}
			if ev.TaskScheduledEventDetails == nil || aws.ToString(ev.TaskScheduledEventDetails.Resource) == "" || !json.Valid([]byte(aws.ToString(ev.TaskScheduledEventDetails.Parameters))) {
				t.Errorf("event %d: TaskScheduled details %+v", ev.Id, ev.TaskScheduledEventDetails)
			}
			open = true
		case sfntypes.HistoryEventTypeTaskSucceeded, sfntypes.HistoryEventTypeTaskFailed, sfntypes.HistoryEventTypeTaskTimedOut:
			if !open {
				t.Errorf("event %d: %s without an open attempt:%s", ev.Id, ev.Type, summarize(h))
			}
			open = false
		case sfntypes.HistoryEventTypeTaskStateExited:
			if open {
				t.Errorf("event %d: TaskStateExited with an attempt still open", ev.Id)
			}
		}
	}
}

// checkWithCLI reads the same history with the AWS CLI, a client nobody here wrote (skipped
// when it is not installed).
func checkWithCLI(t *testing.T, operationID string, events int) {
	t.Helper()
	cli, err := exec.LookPath("aws")
	if err != nil {
		t.Log("no aws CLI on PATH: the SDK check above stands alone")
		return
	}
	arn := strings.Replace(suite.local.StateMachineARN, ":stateMachine:", ":execution:", 1) + ":" + workflow.ExecutionName(operationID, 0)
	cmd := exec.Command(cli, "--endpoint-url", suite.local.EmulatorURL, "--region", "us-east-1", "--output", "json",
		"stepfunctions", "get-execution-history", "--execution-arn", arn)
	cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID=local", "AWS_SECRET_ACCESS_KEY=local", "AWS_CONFIG_FILE="+os.DevNull, "AWS_SHARED_CREDENTIALS_FILE="+os.DevNull)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("aws stepfunctions get-execution-history: %v", err)
	}
	var doc struct {
		Events []struct {
			Type string `json:"type"`
		} `json:"events"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("aws CLI output: %v", err)
	}
	if len(doc.Events) != events || doc.Events[0].Type != "ExecutionStarted" {
		t.Errorf("the AWS CLI read %d events (first %+v), the SDK %d", len(doc.Events), doc.Events[:min(1, len(doc.Events))], events)
	}
}

// The local stack invokes the reconciliation sweep on a schedule, as EventBridge Scheduler does
// on AWS: two sweeps a whole number of SweepEvery (10 s) ticks apart. Not parallel: the tests
// that hold the sweep make the schedule skip its ticks meanwhile. A tick can still be skipped
// while a sweep runs longer than the cadence on a busy machine (one sweep at a time), so the
// gap is checked against every multiple of the cadence, not the first alone.
func TestSweepIsScheduled(t *testing.T) {
	localOnly(t)
	sweeps := func() []time.Time {
		var at []time.Time
		for _, e := range suite.local.Trace.Events() {
			if e.Kind == devstack.TraceInvoke && e.Function == "reconcile" && e.Source == "" { // not a batch of shards
				at = append(at, e.At)
			}
		}
		return at
	}
	n := len(sweeps())
	deadline := time.Now().Add(time.Minute)
	for len(sweeps()) < n+2 && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
	}
	at := sweeps()
	if len(at) < n+2 {
		t.Fatalf("%d sweeps in a minute, want 2", len(at)-n)
	}
	const every = 10 * time.Second // the suite's SweepEvery (devstack's default)
	gap := at[len(at)-1].Sub(at[len(at)-2])
	ticks := (gap + every/2) / every
	if off := gap - ticks*every; ticks < 1 || off < -2*time.Second || off > 2*time.Second {
		t.Errorf("sweeps %s apart, want a whole number of %s ticks", gap, every)
	}
}
