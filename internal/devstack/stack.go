package devstack

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	sfntypes "github.com/aws/aws-sdk-go-v2/service/sfn/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/sivchari/kumo"

	"github.com/buyflow/buyflow/internal/adcpschemas"
	"github.com/buyflow/buyflow/internal/adcptest"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/slack"
	"github.com/buyflow/buyflow/internal/topology"
	"github.com/buyflow/buyflow/internal/workflow"
	"github.com/buyflow/buyflow/statemachine"
)

// defaultTenantHeader names the dev-only header the local stack's submit function takes the
// tenant from (kumo's API Gateway carries no IAM identity).
const defaultTenantHeader = "X-Buyflow-Tenant"

// defaultApprovalPolicy makes every buy of 10,000 USD or more wait for a person; the principal
// dev:approver (X-Buyflow-Principal) is that person on the approver routes.
const defaultApprovalPolicy = `{"threshold":"10000.00","currency":"USD","approvers":["U0LOCALAPPROVER"],"on_timeout":"reject","identities":{"dev:approver":"U0LOCALAPPROVER"}}`

// localRunConfig returns timings that make a buy finish in seconds: a safety-net poll every
// 3 s (without waiting for the sweep), a 60 s approval window and a 5 min seller deadline.
func localRunConfig() workflow.RunConfig {
	return workflow.RunConfig{
		ApprovalTimeoutSeconds: 60,
		PollInitialSeconds:     1,
		PollMaxSeconds:         3,
		DeadlineSeconds:        300,
		LoopBudget:             100,
	}
}

// Options configures Start. The zero value, with BinDir set, runs the simulated agents.
type Options struct {
	// BinDir holds <function>/bootstrap for every topology function, built for this host
	// (Build writes them). Required.
	BinDir string
	// RepoRoot is the repository root the functions run in (default: found above the working
	// directory).
	RepoRoot string
	// EmulatorAddr is where kumo's engines call Lambda (default 127.0.0.1:4566; they always
	// call localhost:4566, so only tests of this package should change it).
	EmulatorAddr string
	// APIAddr is the HTTP API's listen address (default 127.0.0.1:0, a free port).
	APIAddr string
	// AgentsFile, when set, names an AgentsFile with real agents; the simulated agents are not
	// started, except those the file keeps (AgentsFile.Simulated).
	AgentsFile string
	// Run is the workflow timing (default LocalRunConfig).
	Run workflow.RunConfig
	// ApprovalPolicy is the approval policy JSON (default DefaultApprovalPolicy).
	ApprovalPolicy string
	// TenantHeader is the dev-only tenant header (default DefaultTenantHeader).
	TenantHeader string
	// Instances is the number of bootstrap processes per function (default 2): kumo gives each
	// waiting process one invocation, so this is each function's concurrency.
	Instances int
	// Log receives the functions' output, one line per log line prefixed with the function
	// name (default: discarded).
	Log io.Writer
	// Seller and Governance are the simulated agents' options; Start sets their tokens and
	// webhook key. The seller defaults to async_complete; both advance a task step every
	// AgentStep (default 300 ms).
	Seller     adcptest.SellerOptions
	Governance adcptest.GovernanceOptions
	AgentStep  time.Duration
	// StartTimeout bounds the wait for every function to poll (default 60 s).
	StartTimeout time.Duration
	// SweepEvery is the cadence of the reconciliation sweep (the reconcile function), as the
	// EventBridge schedule runs it on AWS (default 10 s; negative: never).
	SweepEvery time.Duration
	// IAMTemplate, when set, is a synthesized CDK template (SynthTemplate): every AWS call a
	// function makes is checked against that function's role in it and refused as AWS refuses
	// it (Stack.IAM records the decisions).
	IAMTemplate []byte
	// SigningKey is the request-signing key the functions sign with ("file:<PKCS #8 PEM>"; the
	// JWKS route publishes it); empty: Start writes a fresh P-256 key. NoSigningKey starts the
	// stack without one, as a deployment that signs nothing. SigningKeysPublished adds keys to
	// the JWKS (comma-separated), as buyflow:signingKeysPublished does on AWS.
	SigningKey           string
	NoSigningKey         bool
	SigningKeysPublished string
	// KMS signs through KMS, as on AWS: Start runs moto_server (internal/motoserver; it must
	// be on PATH) as the stack's KMS, creates an ECC_NIST_P256 key there as the CDK stack
	// creates RequestSigningKey, and gives the functions kms:<its ARN>. Their GetPublicKey and
	// Sign calls go through the emulator proxy, so the IAM gate checks each against the
	// caller's role. It takes the place of SigningKey.
	KMS bool
	// SignRequests sets sign_requests on the simulated agents: buyflow signs every request to
	// them (they accept signed and unsigned alike), so every function that calls agents signs.
	SignRequests bool
	// PortWait, when positive, waits up to that long for a taken emulator port to become free
	// (test packages that each start a stack then take turns) instead of failing at once.
	PortWait time.Duration
}

// Stack is a running local stack.
type Stack struct {
	// APIURL is the HTTP API's base URL (no trailing slash).
	APIURL string
	// SlackURL is the fake Slack's base URL; GET SlackURL+"/messages" lists what was posted.
	SlackURL string
	// EventBusName is the status event bus; Events receives what it delivers to the stack's
	// own rule (every buyflow event), at EventSinkURL.
	EventBusName string
	Events       *EventSink
	EventSinkURL string
	// SellerURL and GovernanceURL are the agents' MCP endpoints.
	SellerURL, GovernanceURL string
	// EmulatorURL is the AWS endpoint of the stack (DynamoDB, Secrets Manager, Lambda and API
	// Gateway in kumo, Step Functions in the local engine): AWS SDK clients and
	// `aws --endpoint-url` may use it.
	EmulatorURL string
	// TenantHeader names the dev-only tenant header.
	TenantHeader string
	// SigningKeyID is the kid of the request-signing key the functions sign with ("" with
	// Options.NoSigningKey); its public key is served at APIURL + /v1/jwks.json.
	SigningKeyID string
	// KMSURL is the stack's KMS (moto_server) with Options.KMS, else "".
	KMSURL string
	// TableName, StateMachineARN, CampaignStateMachineARN and APIID name what Start created.
	TableName, StateMachineARN, CampaignStateMachineARN, APIID string
	// Seller, Governance and Slack are the in-process stand-ins (Seller and Governance are nil
	// with real agents).
	Seller     *adcptest.Seller
	Governance *adcptest.Governance
	Slack      *slack.Sink
	// OtherSellers are the other simulated sellers, by id (OtherSellerIDs and NoReplaySellerID;
	// nil with real agents).
	OtherSellers map[string]*adcptest.Seller
	// ColdStarts is, per function, the time from starting its first process to its first poll
	// of the runtime API (the bootstrap's init).
	ColdStarts map[string]time.Duration
	// Trace records webhooks received and Lambda invocations, for latency measurements.
	Trace *Trace
	// IAM is the enforcement of Options.IAMTemplate (nil without one).
	IAM *IAMGate

	rest  restClient
	sfn   *sfn.Client
	procs *procs
	proxy *emulatorProxy
	// streamMapping delivers the ledger stream to the function that reads it; sweepQueue the
	// sweep's shards to the function that sweeps them.
	streamMapping *streamMapping
	sweepQueue    *queueMapping

	mu       sync.Mutex
	restarts map[string]int

	// sweep is held by each scheduled sweep while it runs; sweepHeld counts HoldSweep's
	// holders, during whose hold the schedule skips its ticks.
	sweep     sync.Mutex
	sweepHeld int

	closeOnce sync.Once
	closers   []func()
}

// Close stops every process and server of the stack and waits for the processes to exit.
func (s *Stack) Close() {
	s.closeOnce.Do(func() {
		for i := len(s.closers) - 1; i >= 0; i-- {
			s.closers[i]()
		}
	})
}

// Start builds the whole local stack; on error, everything it started is stopped again.
func Start(ctx context.Context, o Options) (_ *Stack, err error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	st := &Stack{TenantHeader: o.TenantHeader, Trace: newTrace(20000), ColdStarts: map[string]time.Duration{}, restarts: map[string]int{}}
	// Each step below either adds what it started to st.closers or stops it itself before it
	// returns an error, so this one Close stops everything started so far.
	defer func() {
		if err != nil {
			st.Close()
		}
	}()

	emuURL, err := st.startEmulator(ctx, o)
	if err != nil {
		return nil, err
	}
	var logMu sync.Mutex
	logTo := func(name string) io.Writer {
		return &prefixWriter{mu: &logMu, w: o.Log, prefix: fmt.Sprintf("%-10s| ", name)}
	}
	if err := st.startStepFunctions(o, logTo("states")); err != nil {
		return nil, err
	}
	front, err := st.startAPIFront(o, emuURL)
	if err != nil {
		return nil, err
	}
	if err := st.startSlack(); err != nil {
		return nil, err
	}
	if err := st.startEventSink(); err != nil {
		return nil, err
	}
	ag, err := st.startAgents(o)
	if err != nil {
		return nil, err
	}

	suffix, err := randomHex(4)
	if err != nil {
		return nil, err
	}
	names := stackNames{
		"buyflow-ledger-" + suffix, "buyflow/link-keys-" + suffix, "buyflow/slack-" + suffix, "buyflow/webhook-route-key-" + suffix,
		topology.App.StateMachineName + "-" + suffix, topology.App.CampaignStateMachineName + "-" + suffix, "buyflow-" + suffix,
		"buyflow-status-events-" + suffix,
	}
	st.TableName, st.EventBusName = names.table, names.bus
	ddb, sm, eb, sq := st.newClients(emuURL)
	// The ledger stream's tap is in place before anything writes the table.
	stream := newLedgerStream(emuURL, names.table, topology.App.LedgerStream)
	st.proxy.stream.Store(stream)
	if err := st.createLedgerAndSecrets(ctx, ddb, sm, names, ag); err != nil {
		return nil, err
	}
	if err := createEventBus(ctx, eb, names.bus, st.EventSinkURL); err != nil {
		return nil, err
	}
	values, err := st.functionValues(ctx, o, names)
	if err != nil {
		return nil, err
	}
	queueURL, queueARN, err := createSweepQueue(ctx, sq, "buyflow-sweep-shards-"+suffix, topology.App.SweepQueue)
	if err != nil {
		return nil, err
	}
	values[topology.EnvSweepQueueURL] = queueURL

	// Functions: registered in kumo (it needs them for invoke routing), then the state machine
	// from their ARNs, then the processes, which need the state machine's ARN.
	arns, err := st.createFunctions(ctx, values)
	if err != nil {
		return nil, err
	}
	if err := createRequesterRule(ctx, eb, names.bus, arns); err != nil {
		return nil, err
	}
	if err := st.createStateMachines(ctx, names, arns, values); err != nil {
		return nil, err
	}
	if len(o.IAMTemplate) > 0 {
		// Before the functions start: their first call is already checked.
		if st.IAM, err = newIAMGate(o.IAMTemplate, values); err != nil {
			return nil, err
		}
		st.proxy.gate.Store(st.IAM)
	}
	if err := st.createAPI(ctx, front, names.api, arns); err != nil {
		return nil, err
	}
	if err := st.startFunctions(ctx, o, values, logTo); err != nil {
		return nil, err
	}
	if err := st.startStreamMapping(stream, logTo("stream")); err != nil {
		return nil, err
	}
	if err := st.startQueueMapping(sq, queueURL, queueARN, logTo("queue")); err != nil {
		return nil, err
	}
	if o.SweepEvery > 0 {
		st.closers = append(st.closers, st.scheduleSweep(o.SweepEvery, logTo("schedule")))
	}
	return st, nil
}

// startEventSink serves the status event sink on a free port.
func (st *Stack) startEventSink() error {
	st.Events = newEventSink(maxSinkEvents)
	ln, err := listen("127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := serve(ln, st.Events)
	st.closers = append(st.closers, srv.close)
	st.EventSinkURL = srv.url() + "/events"
	return nil
}

// startStreamMapping runs the emulated event source mapping of the ledger stream (see
// streams.go) until the stack closes.
func (st *Stack) startStreamMapping(stream *ledgerStream, out io.Writer) error {
	fn, err := streamFunction()
	if err != nil {
		return err
	}
	m, err := newStreamMapping(stream, topology.App.LedgerStream, st.invoker(fn), logfTo(out))
	if err != nil {
		return err
	}
	st.streamMapping = m
	st.runUntilClose(m.run)
	return nil
}

// startQueueMapping runs the emulated event source mapping of the sweep's shard queue (see
// sweepqueue.go) until the stack closes.
func (st *Stack) startQueueMapping(api *sqs.Client, url, arn string, out io.Writer) error {
	var fn string
	for _, f := range topology.App.Functions {
		if f.SweepsShards {
			fn = f.Name
		}
	}
	if fn == "" {
		return errors.New("devstack: no function sweeps the sweep queue's shards")
	}
	m := newQueueMapping(api, url, arn, topology.App.SweepQueue, st.invoker(fn), logfTo(out))
	st.sweepQueue = m
	st.runUntilClose(m.run)
	return nil
}

// runUntilClose runs run in its own goroutine until the stack closes, and waits for it then.
func (st *Stack) runUntilClose(run func(context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(ctx)
	}()
	st.closers = append(st.closers, func() { cancel(); <-done })
}

// invoker invokes fn synchronously, as an event source mapping's poller does.
func (st *Stack) invoker(fn string) func(context.Context, []byte) (bool, []byte, error) {
	return func(ctx context.Context, payload []byte) (bool, []byte, error) {
		return st.invokeFunction(ctx, fn, payload)
	}
}

// logfTo writes one line per call to out.
func logfTo(out io.Writer) func(string, ...any) {
	return func(format string, args ...any) { _, _ = fmt.Fprintf(out, format+"\n", args...) }
}

// SweepQueueStats returns what the emulated mapping of the sweep's shard queue did so far.
func (st *Stack) SweepQueueStats() QueueStats { return st.sweepQueue.Stats() }

// StreamFailures returns the ledger stream records the emulated mapping gave up on (the
// failure queue's messages on AWS).
func (st *Stack) StreamFailures() int { return len(st.streamMapping.Failed()) }

// stackNames are the names of what Start creates in the emulators, each with the stack's
// random suffix.
type stackNames struct{ table, linkKeys, slack, routeKey, sm, campaigns, api, bus string }

// startEmulator starts kumo behind the emulator proxy on o.EmulatorAddr and returns kumo's own
// URL. The emulator port comes first: if another stack owns it, nothing else is started.
func (st *Stack) startEmulator(ctx context.Context, o Options) (string, error) {
	emuLn, err := listen(o.EmulatorAddr)
	for wait := time.Now().Add(o.PortWait); err != nil && errors.Is(err, syscall.EADDRINUSE) && time.Now().Before(wait); {
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
		emuLn, err = listen(o.EmulatorAddr)
	}
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return "", fmt.Errorf("%w: %s is taken (another buyflow local stack, LocalStack or a kumo test run?); kumo's Step Functions and API Gateway call Lambda there, so stop that first: %w",
				errPortTaken, o.EmulatorAddr, err)
		}
		return "", err
	}
	emu := kumo.NewServer()
	st.closers = append(st.closers, emu.Close)
	proxy, err := newEmulatorProxy(emu.URL, st.Trace)
	if err != nil {
		_ = emuLn.Close()
		return "", err
	}
	st.proxy = proxy
	st.closers = append(st.closers, proxy.close) // before kumo's: it ends the polls kumo waits for
	emuSrv := serve(emuLn, proxy)
	st.closers = append(st.closers, emuSrv.close)
	st.EmulatorURL = emuSrv.url()
	return emu.URL, nil
}

// startStepFunctions starts the local Step Functions engine and routes the proxy's Step
// Functions requests to it.
func (st *Stack) startStepFunctions(o Options, out io.Writer) error {
	cfgDir, err := os.MkdirTemp("", "buyflow-local-states-")
	if err != nil {
		return fmt.Errorf("devstack: %w", err)
	}
	st.closers = append(st.closers, func() { _ = os.RemoveAll(cfgDir) }) // a temp folder
	states, err := startStates(o.RepoRoot, st.EmulatorURL, cfgDir, out, o.StartTimeout)
	if err != nil {
		return err
	}
	st.closers = append(st.closers, states.close)
	statesURL, err := url.Parse(states.url)
	if err != nil {
		return fmt.Errorf("devstack: states url: %w", err)
	}
	st.proxy.states.Store(httputil.NewSingleHostReverseProxy(statesURL))
	return nil
}

// startAPIFront serves the HTTP API on o.APIAddr; its routes are set by createAPI.
func (st *Stack) startAPIFront(o Options, emuURL string) (*apiFront, error) {
	apiLn, err := listen(o.APIAddr)
	if err != nil {
		return nil, err
	}
	front, err := newAPIFront(emuURL, st.Trace)
	if err != nil {
		_ = apiLn.Close()
		return nil, err
	}
	apiSrv := serve(apiLn, front)
	st.closers = append(st.closers, apiSrv.close)
	st.APIURL = apiSrv.url()
	return front, nil
}

// startSlack serves the fake Slack on a free port.
func (st *Stack) startSlack() error {
	st.Slack = slack.NewSink(nil)
	slackLn, err := listen("127.0.0.1:0")
	if err != nil {
		return err
	}
	slackSrv := serve(slackLn, st.Slack)
	st.closers = append(st.closers, slackSrv.close)
	st.SlackURL = slackSrv.url()
	return nil
}

// startAgents starts the simulated agents, or loads o.AgentsFile's real ones (with the
// simulated ones it names).
func (st *Stack) startAgents(o Options) (*stackAgents, error) {
	var ag *stackAgents
	var err error
	if o.AgentsFile != "" {
		if ag, err = loadAgentsFile(o.AgentsFile); err == nil {
			if err = ag.addSimulated(o.Seller, o.Governance, o.AgentStep); err != nil {
				ag.close()
			}
		}
	} else if ag, err = startSimulatedAgents(o.Seller, o.Governance, o.AgentStep); err == nil && o.SignRequests {
		if ag.registry, err = signEveryRequest(ag.registry); err != nil {
			ag.close()
		}
	}
	if err != nil {
		return nil, err
	}
	st.closers = append(st.closers, ag.close)
	st.Seller, st.Governance, st.SellerURL, st.GovernanceURL = ag.seller, ag.governance, ag.sellerURL, ag.govURL
	st.OtherSellers = ag.others
	return ag, nil
}

// createLedgerTable creates the ledger table as the CDK stack does (ledger.TableSchema, TTL on),
// but without DynamoDB's own stream. kumo keeps every stream record, old and new image, for as
// long as it runs (DynamoDB drops them after 24 hours) and nothing here reads them: the ledger
// stream is the stack's own tap of the table's writes (streams.go), because kumo records none
// for transactions. With kumo's stream on, a 200-buy soak kept about 120 KiB per buy of
// records nobody would ever read (docs/local-stack.md#memory).
func createLedgerTable(ctx context.Context, ddb *dynamodb.Client, name string) error {
	schema := ledger.TableSchema(name)
	schema.StreamSpecification = nil
	if _, err := ddb.CreateTable(ctx, schema); err != nil {
		return fmt.Errorf("devstack: create table: %w", err)
	}
	if _, err := ddb.UpdateTimeToLive(ctx, ledger.TimeToLive(name)); err != nil {
		return fmt.Errorf("devstack: enable ttl: %w", err)
	}
	return nil
}

// newClients makes the AWS clients of the stack: st.rest and st.sfn, which the stack keeps,
// the DynamoDB and Secrets Manager clients createLedgerAndSecrets uses, the EventBridge
// client createEventBus uses and the SQS client of the sweep queue and its mapping.
func (st *Stack) newClients(emuURL string) (*dynamodb.Client, *secretsmanager.Client, *eventbridge.Client, *sqs.Client) {
	awsCfg := aws.Config{
		Region:      region,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) { return creds, nil }),
	}
	endpoint := aws.String(emuURL)
	ddb := dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) { o.BaseEndpoint = endpoint }, ledger.EmulatorCompat)
	sm := secretsmanager.NewFromConfig(awsCfg, func(o *secretsmanager.Options) { o.BaseEndpoint = endpoint })
	sf := sfn.NewFromConfig(awsCfg, func(o *sfn.Options) { o.BaseEndpoint = aws.String(st.EmulatorURL) })
	rest := restClient{base: emuURL, http: &http.Client{Timeout: 30 * time.Second}}
	eb := eventbridge.NewFromConfig(awsCfg, func(o *eventbridge.Options) { o.BaseEndpoint = endpoint })
	st.rest, st.sfn = rest, sf
	return ddb, sm, eb, sqs.NewFromConfig(awsCfg, func(o *sqs.Options) { o.BaseEndpoint = endpoint })
}

// createLedgerAndSecrets creates the ledger table (seeded with ag's registry) and the secrets
// (the link keys, Slack and ag's credentials).
func (st *Stack) createLedgerAndSecrets(ctx context.Context, ddb *dynamodb.Client, sm *secretsmanager.Client, names stackNames, ag *stackAgents) error {
	if err := createLedgerTable(ctx, ddb, names.table); err != nil {
		return err
	}
	if err := SeedAgents(ctx, ddb, names.table, ag.registry); err != nil {
		return err
	}

	linkKey := make([]byte, 32)
	if _, err := rand.Read(linkKey); err != nil {
		return fmt.Errorf("devstack: link key: %w", err)
	}
	linkKeys, _ := json.Marshal(map[string]any{"current": "k1", "keys": map[string]string{"k1": base64.StdEncoding.EncodeToString(linkKey)}})
	slackCfg, _ := json.Marshal(map[string]string{"bot_token": "xoxb-local", "base_url": st.SlackURL + "/api/"})
	// The route key's secret as the stack generates it: 64 characters of [A-Za-z0-9].
	routeKey := make([]byte, 48)
	if _, err := rand.Read(routeKey); err != nil {
		return fmt.Errorf("devstack: route key: %w", err)
	}
	routeSecret := strings.NewReplacer("+", "A", "/", "B").Replace(base64.StdEncoding.EncodeToString(routeKey))
	secretValues := map[string]string{names.linkKeys: string(linkKeys), names.slack: string(slackCfg), names.routeKey: routeSecret}
	for k, v := range ag.credentials {
		secretValues[k] = v
	}
	for _, name := range sortedKeys(secretValues) {
		if _, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: aws.String(name), SecretString: aws.String(secretValues[name])}); err != nil {
			return fmt.Errorf("devstack: create secret %s: %w", name, err)
		}
	}
	return nil
}

// functionValues are the values of the functions' environment variables, but for the state
// machines' ARNs, which createStateMachines adds.
func (st *Stack) functionValues(ctx context.Context, o Options, names stackNames) (map[string]string, error) {
	runCfg, err := json.Marshal(o.Run)
	if err != nil {
		return nil, fmt.Errorf("devstack: run config: %w", err)
	}
	signing, err := st.signingKey(ctx, o)
	if err != nil {
		return nil, err
	}
	return map[string]string{
		topology.EnvSigningKey:           signing,
		topology.EnvSigningKeysPublished: o.SigningKeysPublished,
		topology.EnvTableName:            names.table,
		topology.EnvOperators:            `["` + LocalOperator + `"]`,
		topology.EnvAgentsSecretPrefix:   AgentSecretPrefix,
		topology.EnvLinkKeySecret:        names.linkKeys,
		topology.EnvSlackSecret:          names.slack,
		topology.EnvRouteKeySecret:       names.routeKey,
		topology.EnvPublicBaseURL:        st.APIURL,
		topology.EnvApprovalPolicy:       o.ApprovalPolicy,
		topology.EnvCallerURI:            st.APIURL,
		topology.EnvLocalTenantHeader:    o.TenantHeader,
		topology.EnvRunConfig:            string(runCfg),
		topology.EnvEventBusName:         names.bus,
	}, nil
}

// createFunctions registers every function in kumo and returns their ARNs by name.
func (st *Stack) createFunctions(ctx context.Context, values map[string]string) (map[string]string, error) {
	arns := map[string]string{}
	for _, f := range topology.App.Functions {
		env := map[string]string{}
		for _, name := range f.Env { // recorded by kumo only; the state machine ARN comes later
			if v, ok := values[name]; ok {
				env[name] = v
			}
		}
		arn, err := st.rest.createFunction(ctx, f.Name, f.Description, f.MemoryMB, f.TimeoutSeconds, env)
		if err != nil {
			return nil, err
		}
		arns[f.Name] = arn
	}
	return arns, nil
}

// createStateMachines creates the MediaBuy and Campaign state machines from the functions'
// ARNs, adds their ARNs to values and updates the functions that need them.
func (st *Stack) createStateMachines(ctx context.Context, names stackNames, arns, values map[string]string) error {
	subs := map[string]string{}
	for _, f := range topology.App.Functions {
		if f.Placeholder != "" {
			subs[f.Placeholder] = arns[f.Name]
		}
	}
	def, err := statemachine.Render(statemachine.Only(subs, statemachine.Placeholders))
	if err != nil {
		return fmt.Errorf("devstack: %w", err)
	}
	campaignDef, err := statemachine.RenderCampaign(statemachine.Only(subs, statemachine.CampaignPlaceholders))
	if err != nil {
		return fmt.Errorf("devstack: %w", err)
	}
	for _, m := range []struct {
		name, def string
		arn       *string
		env       string
	}{
		{names.sm, def, &st.StateMachineARN, topology.EnvStateMachineARN},
		{names.campaigns, campaignDef, &st.CampaignStateMachineARN, topology.EnvCampaignsARN},
	} {
		created, err := st.sfn.CreateStateMachine(ctx, &sfn.CreateStateMachineInput{
			Name: aws.String(m.name), Definition: aws.String(m.def), Type: sfntypes.StateMachineTypeStandard,
			RoleArn: aws.String("arn:aws:iam::000000000000:role/buyflow-local-states"),
		})
		if err != nil {
			return fmt.Errorf("devstack: create state machine %s: %w", m.name, err)
		}
		*m.arn = aws.ToString(created.StateMachineArn)
		values[m.env] = *m.arn
	}
	for _, f := range topology.App.Functions {
		if !slices.Contains(f.Env, topology.EnvStateMachineARN) && !slices.Contains(f.Env, topology.EnvCampaignsARN) {
			continue
		}
		env, err := functionEnv(f, values)
		if err != nil {
			return err
		}
		if err := st.rest.updateEnvironment(ctx, f.Name, env); err != nil {
			return err
		}
	}
	return nil
}

// createAPI creates the HTTP API of the topology's routes in kumo and points front at it.
func (st *Stack) createAPI(ctx context.Context, front *apiFront, name string, arns map[string]string) error {
	var routes []apiRoute
	for _, r := range topology.App.Routes {
		arn, ok := arns[r.Function]
		if !ok {
			return fmt.Errorf("devstack: route %s %s names function %s, which the topology does not declare", r.Method, r.Path, r.Function)
		}
		routes = append(routes, apiRoute{Key: r.Key(), Method: r.Method, Path: r.Path, FunctionARN: arn, IAM: r.Auth == topology.AuthIAM})
	}
	api, err := st.rest.createHTTPAPI(ctx, name, routes)
	if err != nil {
		return err
	}
	// kumo breaks a tie between a route and a greedy one ({proxy+}), or between a method's
	// route and ANY on the same path, at random, where API Gateway picks the more specific
	// route: a twin API with only the method routes on literal paths serves the requests one
	// of them matches (see apiFront). The catch-alls (ANY) and the default route answer the
	// rest from the other API; every catch-all of a path reaches the same function, which
	// answers from the path alone.
	var specific []apiRoute
	for _, r := range routes {
		if !greedy(r.Path) && r.Method != "ANY" && r.Key != topology.DefaultRouteKey {
			specific = append(specific, r)
		}
	}
	twin := api
	if len(specific) < len(routes) {
		if twin, err = st.rest.createHTTPAPI(ctx, name+"-specific", specific); err != nil {
			return err
		}
	}
	front.setRoutes(specific, twin.ID)
	front.apiID.Store(api.ID)
	st.APIID = api.ID
	return nil
}

// startFunctions starts o.Instances processes of every function and waits until each polls
// the runtime API. One that exits is replaced by a new one (a new sandbox, with its cold
// start), as Lambda does.
func (st *Stack) startFunctions(ctx context.Context, o Options, values map[string]string, logTo func(string) io.Writer) error {
	proxy := st.proxy
	ps := &procs{}
	st.procs = ps
	st.closers = append(st.closers, func() { ps.stopAll(3 * time.Second) })
	ps.exited = func(in *instance) { st.replace(ps, proxy, in, logTo(in.spec.fn)) }
	// The functions read the embedded schemas; an override the stack was started with reaches
	// them too.
	schemaDir := os.Getenv(adcpschemas.EnvOverride)
	waitCtx, cancel := context.WithTimeout(ctx, o.StartTimeout)
	defer cancel()
	// One function at a time (its instances together), so that each cold start is measured
	// without the others competing for the CPU.
	for _, f := range topology.App.Functions {
		env, err := functionEnv(f, values)
		if err != nil {
			return err
		}
		if schemaDir != "" {
			env["BUYFLOW_ADCP_SCHEMAS"] = schemaDir
		}
		// The functions' AWS calls go through the proxy too (see emulatorProxy.secrets).
		for k, v := range lambdaEnv(f, "http://"+o.EmulatorAddr) {
			env[k] = v
		}
		polled := proxy.expect(f.Name, o.Instances)
		spec := procSpec{fn: f.Name, bin: BootstrapPath(o.BinDir, f.Name), dir: o.RepoRoot, env: env, runtimeAddr: o.EmulatorAddr, out: logTo(f.Name)}
		var insts []*instance
		for range o.Instances {
			in, err := ps.start(spec)
			if err != nil {
				return err
			}
			insts = append(insts, in)
		}
		if err := waitAllPolled(waitCtx, insts, polled); err != nil {
			return err
		}
		st.ColdStarts[f.Name] = proxy.firstPoll(f.Name).Sub(insts[0].started)
	}
	return nil
}

func (o *Options) defaults() error {
	if o.BinDir == "" {
		return errors.New("devstack: Options.BinDir is required (the folder holding <function>/bootstrap)")
	}
	bin, err := filepath.Abs(o.BinDir)
	if err != nil {
		return fmt.Errorf("devstack: bin dir: %w", err)
	}
	o.BinDir = bin
	var missing []string
	for _, f := range topology.App.Functions {
		if !isFile(BootstrapPath(o.BinDir, f.Name)) {
			missing = append(missing, f.Name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("devstack: no bootstrap in %s for %s (build them with devstack.Build or `make build-host`)", o.BinDir, strings.Join(missing, ", "))
	}
	if o.RepoRoot == "" {
		wd, err := os.Getwd()
		if err != nil {
			return fmt.Errorf("devstack: working directory: %w", err)
		}
		if o.RepoRoot, err = FindRepoRoot(wd); err != nil {
			return err
		}
	}
	if o.EmulatorAddr == "" {
		o.EmulatorAddr = defaultEmulatorAddr
	}
	if o.APIAddr == "" {
		o.APIAddr = "127.0.0.1:0"
	}
	if o.Run == (workflow.RunConfig{}) {
		o.Run = localRunConfig()
	}
	if err := o.Run.Validate(); err != nil {
		return fmt.Errorf("devstack: run config: %w", err)
	}
	if o.ApprovalPolicy == "" {
		o.ApprovalPolicy = defaultApprovalPolicy
	}
	if o.TenantHeader == "" {
		o.TenantHeader = defaultTenantHeader
	}
	if o.Instances <= 0 {
		o.Instances = 2
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.KMS && (o.SigningKey != "" || o.NoSigningKey) {
		return errors.New("devstack: Options.KMS creates the signing key; it excludes SigningKey and NoSigningKey")
	}
	if o.AgentStep <= 0 {
		o.AgentStep = 300 * time.Millisecond
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 60 * time.Second
	}
	if o.SweepEvery == 0 {
		o.SweepEvery = 10 * time.Second
	}
	return nil
}

// functionEnv returns the topology environment of f from values; a name without a value is an
// error, as in the CDK stack.
func functionEnv(f topology.Function, values map[string]string) (map[string]string, error) {
	env := map[string]string{}
	for _, name := range f.Env {
		v, ok := values[name]
		if !ok {
			return nil, fmt.Errorf("devstack: function %s reads %s, which the local stack has no value for", f.Name, name)
		}
		env[name] = v
	}
	return env, nil
}

// lambdaEnv is what the Lambda service would set, pointed at kumo (procs.start adds
// AWS_LAMBDA_RUNTIME_API, which names each process).
func lambdaEnv(f topology.Function, emulatorURL string) map[string]string {
	return map[string]string{
		"AWS_LAMBDA_FUNCTION_NAME":        f.Name,
		"AWS_LAMBDA_FUNCTION_VERSION":     "$LATEST",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": fmt.Sprint(f.MemoryMB),
		"AWS_LAMBDA_LOG_FORMAT":           "JSON",
		"AWS_ENDPOINT_URL":                emulatorURL,
		"AWS_REGION":                      region,
		"AWS_DEFAULT_REGION":              region,
		"AWS_ACCESS_KEY_ID":               creds.AccessKeyID + "-" + f.Name, // names the caller (callerFunction)
		"AWS_SECRET_ACCESS_KEY":           creds.SecretAccessKey,
		"AWS_EC2_METADATA_DISABLED":       "true",
		"AWS_CONFIG_FILE":                 os.DevNull,
		"AWS_SHARED_CREDENTIALS_FILE":     os.DevNull,
		"TZ":                              "UTC",
	}
}

// waitAllPolled waits until polled closes (every instance polled) or one instance exits.
func waitAllPolled(ctx context.Context, insts []*instance, polled <-chan struct{}) error {
	exited := make(chan *instance, len(insts))
	stop := make(chan struct{})
	defer close(stop)
	for _, in := range insts {
		go func() {
			select {
			case <-in.done:
				exited <- in
			case <-stop:
			}
		}()
	}
	select {
	case <-polled:
		return nil
	case in := <-exited:
		if in.err != nil {
			return fmt.Errorf("devstack: function %s exited before it polled for work (its log is above): %w", in.spec.fn, in.err)
		}
		return fmt.Errorf("devstack: function %s exited before it polled for work (its log is above)", in.spec.fn)
	case <-ctx.Done():
		return fmt.Errorf("devstack: function %s did not poll for work in time: %w", insts[0].spec.fn, ctx.Err())
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
