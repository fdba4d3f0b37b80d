package devstack

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// The local Step Functions is statemachine/harness/live.mjs: aws-local-stepfunctions runs the ASL
// (Retry and Catch by the Lambda's error name, the declared timeouts, callback tokens) and the
// script serves the Step Functions API with AWS's execution history. kumo's own engine reports
// every Lambda error as States.TaskFailed, gives up on a call after 30 s and keeps a two-event
// history, so the workflow would not retry locally what it retries on AWS.
const (
	statesScript   = "statemachine/harness/live.mjs"
	statesPolyfill = "statemachine/harness/polyfill.cjs"
	statesEngine   = "node_modules/aws-local-stepfunctions"
)

// statesAccount is the account in the ARNs the local Step Functions hands out.
const statesAccount = "000000000000"

// statesMaxStates bounds one execution's states entered, near AWS's 25,000-event history cap
// (about three events per state here); the workflow continues as a new execution long before.
const statesMaxStates = 8000

// statesProcess is the running local Step Functions.
type statesProcess struct {
	url   string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{}
}

// startStates starts the local Step Functions in repoRoot; it calls Lambda at lambdaURL and
// writes its log lines to out. It returns once the engine listens.
func startStates(repoRoot, lambdaURL, cfgDir string, out io.Writer, wait time.Duration) (*statesProcess, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, errors.New("devstack: the local Step Functions runs on Node.js (>= 20), which is not on PATH: install it (Debian: apt-get install nodejs)")
	}
	if st, err := os.Stat(filepath.Join(repoRoot, statesEngine)); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("devstack: the local Step Functions needs %s: run `npm ci` in %s (make local does)", statesEngine, repoRoot)
	}
	cfg, err := json.Marshal(map[string]any{"lambda_url": lambdaURL, "region": region, "account": statesAccount, "max_states": statesMaxStates})
	if err != nil {
		return nil, fmt.Errorf("devstack: states config: %w", err)
	}
	cfgFile := filepath.Join(cfgDir, "states.json")
	if err := os.WriteFile(cfgFile, cfg, 0o600); err != nil {
		return nil, fmt.Errorf("devstack: states config: %w", err)
	}
	cmd := exec.Command(node, "-r", "./"+statesPolyfill, statesScript, cfgFile)
	cmd.Dir = repoRoot
	cmd.Env = environ(nil)
	cmd.Stderr = out
	cmd.SysProcAttr = sysProcAttr()
	stdin, err := cmd.StdinPipe() // closing it stops the engine
	if err != nil {
		return nil, fmt.Errorf("devstack: states: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("devstack: states: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("devstack: start the local Step Functions: %w", err)
	}
	sp := &statesProcess{cmd: cmd, stdin: stdin, done: make(chan struct{})}
	hello := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			var h struct {
				URL string `json:"url"`
			}
			if json.Unmarshal(sc.Bytes(), &h) == nil {
				hello <- h.URL
			}
		}
		_, _ = io.Copy(out, stdout) // the engine prints nothing else; keep the pipe drained
	}()
	go func() {
		_ = cmd.Wait() // its exit status is reported by the log and by failed calls
		close(sp.done)
	}()
	select {
	case sp.url = <-hello:
		return sp, nil
	case <-sp.done:
		return nil, errors.New("devstack: the local Step Functions exited at start (its log is above)")
	case <-time.After(wait):
		sp.close()
		return nil, fmt.Errorf("devstack: the local Step Functions did not listen within %s", wait)
	}
}

// close stops the engine: end of stdin first, SIGKILL after a grace period.
func (sp *statesProcess) close() {
	_ = sp.stdin.Close() // the engine exits when its stdin ends
	select {
	case <-sp.done:
	case <-time.After(2 * time.Second):
		signalGroup(sp.cmd, syscall.SIGKILL)
		<-sp.done
	}
}
