package stagepaths

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/adcpschemas"
	"github.com/buyflow/buyflow/internal/adcptest"
	"github.com/buyflow/buyflow/internal/devstack"
	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/registry"
	"github.com/buyflow/buyflow/internal/slack"
	"github.com/buyflow/buyflow/internal/topology"
	"github.com/buyflow/buyflow/internal/workflow"
)

const (
	region          = "us-east-1"
	account         = "123456789012"
	stateMachineARN = "arn:aws:states:" + region + ":" + account + ":stateMachine:MediaBuy"
	campaignsARN    = "arn:aws:states:" + region + ":" + account + ":stateMachine:Campaign"
	approver        = "U0STAGEPATHS"
)

// baseRun is the deployment's timing (BUYFLOW_RUN_CONFIG); scenarios patch it per tenant.
var baseRun = workflow.RunConfig{
	ApprovalTimeoutSeconds: 30, PollInitialSeconds: 1, PollMaxSeconds: 2,
	DeadlineSeconds: 60, LoopBudget: 100,
}

// approvalPolicy asks a person for every buy of 10,000 USD or more and rejects on timeout.
var approvalPolicy = `{"threshold":"10000.00","currency":"USD","approvers":["` + approver + `"],"on_timeout":"reject"}`

// instances is each function's concurrency (scenarios run in parallel).
var instances = map[string]int{"submit": 2, "campaign": 2, "governance": 3, "notify": 2, "approve": 2, "create": 3, "poll": 3, "webhook": 3, "modify": 2}

// sys is the running system every scenario shares.
type system struct {
	root      string
	apiURL    string // the HTTP API (API Gateway front)
	harness   string // the live harness (Step Functions)
	slackURL  string
	table     string
	ddb       *dynamodb.Client
	lambda    *lambdaService
	logs      *logBook
	agents    *devstack.SimulatedAgents
	sink      *slack.Sink
	closeFunc []func()
}

var (
	sys     *system
	skipWhy string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if os.Getenv("BUYFLOW_NODE_TESTS") != "1" {
		skipWhy = "set BUYFLOW_NODE_TESTS=1 (make test does): these tests build the bootstraps and run Node"
		return m.Run()
	}
	s, err := start()
	if s != nil {
		defer s.close()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "stagepaths: start:", err)
		return 1
	}
	sys = s
	code := m.Run()
	// Every call the shared 3.2 agents heard, whichever scenario sent it (versions_test.go).
	if testing.Verbose() {
		fmt.Fprintln(os.Stderr, "stagepaths: the shared 3.2 agents heard", heardByTool(s.agents))
	}
	if refused := unclaimedRefusals(s.agents); len(refused) > 0 {
		fmt.Fprintf(os.Stderr, "stagepaths: %d calls the 3.2 agents did not hear as AdCP 3.2:\n%s\n", len(refused), strings.Join(refused, "\n"))
		return 1
	}
	return code
}

func (s *system) close() {
	for i := len(s.closeFunc) - 1; i >= 0; i-- {
		s.closeFunc[i]()
	}
}

func (s *system) onClose(f func()) { s.closeFunc = append(s.closeFunc, f) }

func start() (*system, error) {
	ctx := context.Background()
	wd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	root, err := devstack.FindRepoRoot(wd)
	if err != nil {
		return nil, err
	}
	s := &system{root: root, logs: &logBook{}}

	// The real bootstraps, built for this host.
	tmp, err := os.MkdirTemp("", "buyflow-stagepaths-")
	if err != nil {
		return s, err
	}
	s.onClose(func() { _ = os.RemoveAll(tmp) }) // a temporary folder
	bin, err := devstack.Bootstraps(ctx, root, filepath.Join(tmp, "bin"))
	if err != nil {
		return s, err
	}

	// DynamoDB and Secrets Manager: kumo, in this process.
	kumoURL := dynamotest.Endpoint()
	s.ddb = dynamodb.NewFromConfig(dynamotest.AWSConfig(), ledger.EmulatorCompat)
	sm := secretsmanager.NewFromConfig(dynamotest.AWSConfig())
	suffix := randomHex(4)
	s.table = "buyflow-stagepaths-" + suffix
	if err := dynamotest.CreateTable(ctx, s.ddb, s.table); err != nil {
		return s, err
	}

	// The agents and Slack. The agents speak only AdCP 3.2 (adcptest.Version32): every path
	// reaches a seller and a governance agent that check each request against the 3.2.3
	// schemas and refuse what 3.2 refuses; versions_test.go keeps 3.1 and 3.0 agents on the
	// paths whose shapes differ.
	s.agents, err = devstack.StartSimulatedAgents(adcptest.SellerOptions{Version: adcptest.Version32}, adcptest.GovernanceOptions{Version: adcptest.Version32}, 300*time.Millisecond)
	if err != nil {
		return s, err
	}
	s.onClose(s.agents.Close)
	if err := devstack.SeedAgents(ctx, s.ddb, s.table, s.agents.Registry); err != nil {
		return s, err
	}
	if err := tolerateFaults(ctx, s.ddb, s.table, s.agents.Registry); err != nil {
		return s, err
	}
	s.sink = slack.NewSink(nil)
	slackSrv := httptest.NewServer(s.sink)
	s.onClose(slackSrv.Close)
	s.slackURL = slackSrv.URL

	linkKey := make([]byte, 32)
	_, _ = rand.Read(linkKey)
	linkKeys, _ := json.Marshal(map[string]any{"current": "k1", "keys": map[string]string{"k1": base64.StdEncoding.EncodeToString(linkKey)}})
	slackCfg, _ := json.Marshal(map[string]string{"bot_token": "xoxb-stagepaths", "base_url": s.slackURL + "/api/"})
	routeKey := make([]byte, 48)
	_, _ = rand.Read(routeKey)
	secrets := map[string]string{"buyflow/link-keys-" + suffix: string(linkKeys), "buyflow/slack-" + suffix: string(slackCfg),
		"buyflow/webhook-route-key-" + suffix: base64.RawURLEncoding.EncodeToString(routeKey)}
	for k, v := range s.agents.Credentials {
		secrets[k] = v // kumo's secrets are shared by the process; agent secrets carry random tokens
	}
	for name, v := range secrets {
		_, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(name), SecretString: aws.String(v)})
		if err != nil && !strings.Contains(err.Error(), "ResourceExists") {
			return s, fmt.Errorf("secret %s: %w", name, err)
		}
	}

	// The Lambda service and the AWS endpoint the functions call: Step Functions calls go to the
	// harness, everything else to kumo.
	s.lambda = newLambdaService(s.logs)
	harnessURL := make(chan string, 1)
	var sfnProxy atomic.Pointer[httputil.ReverseProxy] // set once the harness runs
	kumoTarget, _ := url.Parse(kumoURL)
	kumoProxy := httputil.NewSingleHostReverseProxy(kumoTarget)
	var secretsMu sync.Mutex
	awsMux := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/_runtime/"), strings.HasPrefix(r.URL.Path, "/2015-03-31/functions/"):
			s.lambda.ServeHTTP(w, r)
		case strings.HasPrefix(r.Header.Get("X-Amz-Target"), "secretsmanager."):
			// kumo's GetSecretValue writes LastAccessedDate under a read lock: concurrent reads
			// are a data race (a -race failure in this process). The local stack serializes
			// them the same way (internal/devstack/proxy.go).
			secretsMu.Lock()
			defer secretsMu.Unlock()
			kumoProxy.ServeHTTP(w, r)
		case strings.HasPrefix(r.Header.Get("X-Amz-Target"), "AWSStepFunctions."):
			if p := sfnProxy.Load(); p != nil {
				p.ServeHTTP(w, r)
			} else {
				http.Error(w, "the harness is not running yet", http.StatusServiceUnavailable)
			}
		default:
			kumoProxy.ServeHTTP(w, r)
		}
	})
	awsSrv := httptest.NewServer(awsMux)
	s.onClose(awsSrv.Close)
	awsAddr := strings.TrimPrefix(awsSrv.URL, "http://")

	front := &apiFront{lambda: s.lambda, apiID: "stagepaths"}
	apiSrv := httptest.NewServer(front)
	s.onClose(apiSrv.Close)
	s.apiURL = apiSrv.URL

	functions := map[string]string{}
	for _, f := range topology.App.Functions {
		arn := "arn:aws:lambda:" + region + ":" + account + ":function:" + f.Name
		s.lambda.add(f.Name, arn, time.Duration(f.TimeoutSeconds)*time.Second)
		if f.Placeholder != "" {
			functions[f.Placeholder] = arn
		}
	}

	// The live harness: aws-local-stepfunctions with every Task calling the Lambda service.
	cfgFile := filepath.Join(tmp, "harness.json")
	cfg, _ := json.Marshal(map[string]any{
		"lambda_url": awsSrv.URL, "state_machine_arn": stateMachineARN, "campaign_state_machine_arn": campaignsARN,
		"functions": functions, "retry_interval_ms": 20,
	})
	if err := os.WriteFile(cfgFile, cfg, 0o600); err != nil {
		return s, err
	}
	node := exec.Command("node", "-r", "./statemachine/harness/polyfill.cjs", "statemachine/harness/live.mjs", cfgFile)
	node.Dir = root
	node.Stderr = s.logs.writer("harness")
	stdin, err := node.StdinPipe()
	if err != nil {
		return s, err
	}
	stdout, err := node.StdoutPipe()
	if err != nil {
		return s, err
	}
	if err := node.Start(); err != nil {
		return s, fmt.Errorf("start the harness (is Node on PATH?): %w", err)
	}
	s.onClose(func() { _ = stdin.Close(); _ = node.Wait() })
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			var hello struct {
				URL string `json:"url"`
			}
			if json.Unmarshal(sc.Bytes(), &hello) == nil {
				harnessURL <- hello.URL
			}
		}
		_, _ = io.Copy(s.logs.writer("harness"), stdout)
	}()
	select {
	case s.harness = <-harnessURL:
	case <-time.After(60 * time.Second):
		return s, errors.New("the harness did not print its URL within 60 s: " + strings.Join(s.logs.matching("harness"), "\n"))
	}
	hTarget, _ := url.Parse(s.harness)
	sfnProxy.Store(httputil.NewSingleHostReverseProxy(hTarget))

	// The functions' processes.
	runCfg, _ := json.Marshal(baseRun)
	values := map[string]string{
		topology.EnvTableName:          s.table,
		topology.EnvStateMachineARN:    stateMachineARN,
		topology.EnvCampaignsARN:       campaignsARN,
		topology.EnvOperators:          `["` + devstack.LocalOperator + `"]`,
		topology.EnvAgentsSecretPrefix: devstack.AgentSecretPrefix,
		topology.EnvLinkKeySecret:      "buyflow/link-keys-" + suffix,
		topology.EnvSlackSecret:        "buyflow/slack-" + suffix,
		topology.EnvRouteKeySecret:     "buyflow/webhook-route-key-" + suffix,
		topology.EnvPublicBaseURL:      s.apiURL,
		topology.EnvApprovalPolicy:     approvalPolicy,
		topology.EnvCallerURI:          s.apiURL,
		topology.EnvLocalTenantHeader:  "", // tenants come from the IAM identity, as on AWS
		topology.EnvRunConfig:          string(runCfg),
		// No request-signing key: the workflow's paths at sellers that require no signatures
		// (the signing paths are e2e/sdkseller's and e2e/unsigned's).
		topology.EnvSigningKey:           "",
		topology.EnvSigningKeysPublished: "",
	}
	s.onClose(func() { s.lambda.stop(3 * time.Second) })
	for _, f := range topology.App.Functions {
		n, ok := instances[f.Name]
		if !ok {
			continue // not on any path of the state machine or the HTTP API these tests use
		}
		env := map[string]string{
			"AWS_ENDPOINT_URL": awsSrv.URL, "AWS_REGION": region, "AWS_DEFAULT_REGION": region,
			"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_EC2_METADATA_DISABLED": "true",
			"AWS_CONFIG_FILE": os.DevNull, "AWS_SHARED_CREDENTIALS_FILE": os.DevNull, "TZ": "UTC",
		}
		if dir := os.Getenv(adcpschemas.EnvOverride); dir != "" {
			env[adcpschemas.EnvOverride] = dir
		}
		for _, name := range f.Env {
			v, ok := values[name]
			if !ok {
				return s, fmt.Errorf("function %s reads %s, which these tests have no value for", f.Name, name)
			}
			env[name] = v
		}
		if err := s.lambda.start(f.Name, devstack.BootstrapPath(bin, f.Name), root, awsAddr, env, n); err != nil {
			return s, err
		}
	}
	return s, nil
}

// tolerateFaults raises the circuit breaker threshold of the shared simulated agents: the
// scenarios inject faults at them in parallel (a plan push failing a hundred times, 503s on a
// create), and a breaker one scenario opened would make every other one wait, as it should in
// production. The breaker's own scenarios break agents of their own (breaker_test.go).
func tolerateFaults(ctx context.Context, ddb *dynamodb.Client, table string, doc []byte) error {
	var reg adcp.RegistryConfig
	if err := json.Unmarshal(doc, &reg); err != nil {
		return err
	}
	store := registry.NewStore(ddb, table)
	for _, a := range reg.Agents {
		_, err := store.Update(ctx, a.ID, devstack.LocalOperator, func(r *registry.Record) (string, string, error) {
			r.Settings = json.RawMessage(`{"circuit_breaker":{"failures":1000}}`)
			return registry.ActionUpdated, "settings", nil
		}, nil)
		if err != nil {
			return fmt.Errorf("settings of %s: %w", a.ID, err)
		}
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
