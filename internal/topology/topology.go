// Package topology is the one description of the buyflow application: its functions, the
// environment each reads, the HTTP routes, the ledger table and the state machine. The CDK
// stack (infra/) and the local stack both read it, so the two cannot drift; a test in each
// compares what it built with this description.
//
// It imports the standard library only, so Lambdas, infra and the local stack can all use it.
package topology

import "strings"

// Environment variable names the functions read. Values are supplied by the deployer (CDK or
// the local stack); secrets are never values here, only the names of Secrets Manager secrets.
const (
	EnvTableName          = "BUYFLOW_TABLE_NAME"
	EnvStateMachineARN    = "BUYFLOW_STATE_MACHINE_ARN"
	EnvAgentsSecretPrefix = "BUYFLOW_AGENT_SECRET_PREFIX"        // prefix of the agents' credential secrets
	EnvCampaignsARN       = "BUYFLOW_CAMPAIGN_STATE_MACHINE_ARN" // the Campaign state machine (submit starts it)
	EnvOperators          = "BUYFLOW_OPERATORS"                  // JSON array: the IAM principals who manage the agent registry
	EnvLinkKeySecret      = "BUYFLOW_LINK_KEY_SECRET"            // name of the approval-link signing keys secret
	EnvSlackSecret        = "BUYFLOW_SLACK_SECRET"               // name of the Slack bot token / webhook secret
	EnvRouteKeySecret     = "BUYFLOW_ROUTE_KEY_SECRET"           // name of the seller webhook URLs' route key secret (internal/webhookroute)
	EnvPublicBaseURL      = "BUYFLOW_PUBLIC_BASE_URL"            // the HTTP API's base URL, for links and webhooks
	EnvApprovalPolicy     = "BUYFLOW_APPROVAL_POLICY"            // JSON: thresholds, approvers, escalation
	EnvCallerURI          = "BUYFLOW_CALLER_URI"                 // the `caller` URI sent to governance agents
	EnvLocalTenantHeader  = "BUYFLOW_DEV_TENANT_HEADER"          // local stack only; never set by infra/
	EnvRunConfig          = "BUYFLOW_RUN_CONFIG"                 // optional JSON workflow.RunConfig (timings)
	EnvEventBusName       = "BUYFLOW_EVENT_BUS_NAME"             // the status events' EventBridge bus
	EnvSweepQueueURL      = "BUYFLOW_SWEEP_QUEUE_URL"            // the sweep's shard queue (Application.SweepQueue)

	// The sandbox agents' (Sandbox): the secret holding the bearer token they accept (the same
	// secret buyflow reads as the agent's credential) and the seller's webhook-signing key seed.
	EnvSandboxTokenSecret      = "BUYFLOW_SANDBOX_TOKEN_SECRET"
	EnvSandboxWebhookKeySecret = "BUYFLOW_SANDBOX_WEBHOOK_KEY_SECRET"
	// EnvSigningKey names the request-signing key ("kms:<key arn>", or "file:<pem>" on the
	// local stack; internal/signingkey). Optional: without it buyflow signs nothing, and a buy
	// to a seller that requires signatures is refused at submit.
	EnvSigningKey = "BUYFLOW_SIGNING_KEY"
	// EnvSigningKeysPublished names further keys the JWKS publishes (comma-separated, same
	// form): the next key before it signs, the previous one until its signatures expire.
	EnvSigningKeysPublished = "BUYFLOW_SIGNING_KEYS_PUBLISHED"
)

// Optional reports whether a function may run without the variable name: the local stack's
// tenant header (never set by infra) and the run configuration (the defaults apply). Every
// other variable a function declares is required.
func Optional(name string) bool {
	return name == EnvLocalTenantHeader || name == EnvRunConfig || name == EnvSigningKey || name == EnvSigningKeysPublished
}

// WebhookPathPrefix is the path of the seller webhook route up to the operation id that ends
// it: the create stage registers <public base URL><WebhookPathPrefix><operation id> with the
// seller, and the receiver checks a signature's target URI against it.
const WebhookPathPrefix = "/v1/webhooks/adcp/"

// auth says how a route authenticates its caller.
type auth string

// The route authentication kinds.
const (
	// AuthIAM routes use SigV4; the tenant comes from the caller's identity, never the body.
	AuthIAM auth = "iam"
	// AuthSignature routes are public and authenticate each request by its signature
	// (seller webhooks, signed approval links).
	AuthSignature auth = "signature"
	// AuthNone is the default route's: public, because a request that matches no route (an
	// unsigned one, a mistyped link) must still get buyflow's 404, which its function
	// answers from the route table alone, reading and changing nothing.
	AuthNone auth = "none"
	// AuthPublic routes serve documents anyone may read and that reveal nothing private
	// (buyflow's public request-signing keys).
	AuthPublic auth = "public"
)

// DefaultRouteKey is API Gateway's route key of the route that serves every request no other
// route matches; the default route has it as its Path and no Method.
const DefaultRouteKey = "$default"

// Function is one Lambda: one folder functions/<Name> with a main.go, one bootstrap.
type Function struct {
	Name        string
	Description string
	MemoryMB    int
	// TimeoutSeconds bounds one invocation.
	TimeoutSeconds int
	// Env lists the variables the function reads (names from the Env* constants).
	Env []string
	// Placeholder is the ASL DefinitionSubstitutions key that receives this function's ARN,
	// empty for functions the state machine does not invoke.
	Placeholder string
	// LedgerActions lists the DynamoDB actions the function's code makes on the ledger table,
	// a transaction's items counted as IAM counts them (a Put is dynamodb:PutItem, a
	// ConditionCheck dynamodb:ConditionCheckItem). Its role grants exactly these on the table:
	// the end-to-end suite proves each is used (docs/iam-grants.md) and refuses any other.
	LedgerActions []string
	// LedgerIndexes lists the ledger's indexes the function queries (dynamodb:Query on each).
	LedgerIndexes []string
	// StartsExecutions is true when the function calls StartExecution.
	StartsExecutions bool
	// CompletesTasks is true when the function calls SendTaskSuccess; FailsTasks when it
	// calls SendTaskFailure (an approver's rejection).
	CompletesTasks, FailsTasks bool
	// DescribesExecutions is true when the function reads the state of executions
	// (states:DescribeExecution), e.g. to find an operation whose execution ended.
	DescribesExecutions bool
	// Secrets lists the env variables that name Secrets Manager secrets it may read.
	Secrets []string
	// ReadsLedgerStream is true for the function the ledger table's stream invokes, through an
	// event source mapping with Application.LedgerStream's settings.
	ReadsLedgerStream bool
	// SweepsShards is true for the function that plans the sweep on its schedule and sends
	// the shards to the sweep's queue, which invokes it again with Application.SweepQueue's
	// settings to run them.
	SweepsShards bool
	// PutsEvents is true when the function puts events on the status event bus.
	PutsEvents bool
	// ConsumesStatusEvents is true for the function a rule on the status event bus invokes
	// with Application.RequesterRule's pattern.
	ConsumesStatusEvents bool
	// SignsRequests is true for the functions that call agents: the only ones that may sign
	// with the request-signing key (kms:Sign).
	SignsRequests bool
	// PublishesKeys is true for the function that serves the JWKS (kms:GetPublicKey).
	PublishesKeys bool
}

// StreamSource is how the ledger table's stream invokes its function: the same settings for
// the CDK event source mapping and the local stack's emulation of one.
type StreamSource struct {
	// FilterPattern selects the records that invoke the function (Lambda event filtering):
	// inserts and modifications of operation and campaign items, the only items with a status.
	FilterPattern string
	// BatchSize and MaxBatchingWindowSeconds trade latency for invocations.
	BatchSize                int
	MaxBatchingWindowSeconds int
	// RetryAttempts bounds the retries of a batch that keeps failing; the records then go to the
	// failure destination (a queue), so one poison record never stops the stream.
	RetryAttempts int
	// MaxRecordAgeSeconds drops records older than this to the failure destination.
	MaxRecordAgeSeconds int
}

// QueueSource is how the sweep's queue invokes its function (an SQS event source mapping): the
// same settings for the CDK stack's queue and mapping and the local stack's emulation of them.
type QueueSource struct {
	// BatchSize is the shards one invocation runs together, MaximumConcurrency the
	// invocations the mapping runs at once: BatchSize × MaximumConcurrency sellers are swept
	// at once at most.
	BatchSize, MaximumConcurrency int
	// VisibilityTimeoutSeconds is how long a message taken stays hidden: a shard that failed
	// comes back after it. Lambda refuses a mapping whose queue's timeout is shorter than the
	// function's.
	VisibilityTimeoutSeconds int
	// MaxReceiveCount is how many times a message is taken before the redrive policy moves it
	// to the dead-letter queue (a shard that keeps failing, a message that is no shard).
	MaxReceiveCount int
	// RetentionSeconds drops a shard no worker took in time: a later plan hands its seller out
	// again.
	RetentionSeconds int
}

// Route is one HTTP API route.
type Route struct {
	Method   string
	Path     string
	Function string
	Auth     auth
}

// Default reports whether r is the default route ($default).
func (r Route) Default() bool { return r.Path == DefaultRouteKey }

// Key is the route key API Gateway gives the route and puts in its events:
// "GET /v1/media-buys/{id}", or "$default".
func (r Route) Key() string {
	if r.Default() {
		return DefaultRouteKey
	}
	return r.Method + " " + r.Path
}

// Application is the whole description.
type Application struct {
	Functions []Function
	Routes    []Route
	// StateMachineName is the Standard state machine's logical name.
	StateMachineName string
	// StateMachineFile is the ASL file, relative to the repository root.
	StateMachineFile string
	// CampaignStateMachineName and CampaignStateMachineFile are the Campaign state machine's:
	// a Map over a campaign's legs, each a child execution of the MediaBuy state machine.
	CampaignStateMachineName string
	CampaignStateMachineFile string
	// LedgerStream is how the ledger's stream invokes the ReadsLedgerStream function.
	LedgerStream StreamSource
	// SweepQueue is how the sweep's shard queue invokes the SweepsShards function.
	SweepQueue QueueSource
	// RequesterRule is the event pattern of the status event bus's rule that invokes the
	// ConsumesStatusEvents function: the events of a buy, a change or a campaign that carry a
	// requester's Slack id.
	RequesterRule string
}

// Function returns the function named name and whether it exists.
func (a Application) Function(name string) (Function, bool) {
	for _, f := range a.Functions {
		if f.Name == name {
			return f, true
		}
	}
	return Function{}, false
}

// agentEnv is what every function that calls agents reads: the ledger, which holds the agent
// registry (internal/registry), and the prefix of the agents' secrets. The agents themselves are
// never in the environment, which stays the same size whatever their number.
var agentEnv = []string{EnvTableName, EnvAgentsSecretPrefix}

// with returns agentEnv and more, in a fresh slice.
func with(more ...string) []string { return append(append([]string{}, agentEnv...), more...) }

// signing returns agentEnv, the request-signing key and more: what a function that calls
// agents reads.
func signing(more ...string) []string { return with(append([]string{EnvSigningKey}, more...)...) }

// The ledger's DynamoDB actions (LedgerActions).
const (
	LedgerGet            = "dynamodb:GetItem"
	LedgerQuery          = "dynamodb:Query"
	LedgerPut            = "dynamodb:PutItem"
	LedgerUpdate         = "dynamodb:UpdateItem"
	LedgerDelete         = "dynamodb:DeleteItem"
	LedgerConditionCheck = "dynamodb:ConditionCheckItem"
	LedgerScan           = "dynamodb:Scan"
)

// ledgerRW is what most writers do: read an item, query a partition, put and update items.
func ledgerRW(more ...string) []string {
	return append([]string{LedgerGet, LedgerQuery, LedgerPut, LedgerUpdate}, more...)
}

// App is buyflow.
var App = Application{
	StateMachineName:         "MediaBuy",
	StateMachineFile:         "statemachine/mediabuy.asl.json",
	CampaignStateMachineName: "Campaign",
	CampaignStateMachineFile: "statemachine/campaign.asl.json",
	LedgerStream: StreamSource{
		FilterPattern:            `{"eventName":["INSERT","MODIFY"],"dynamodb":{"Keys":{"sk":{"S":["OP","CAMPAIGN"]}}}}`,
		BatchSize:                100,
		MaxBatchingWindowSeconds: 1,
		RetryAttempts:            20,
		MaxRecordAgeSeconds:      86400,
	},
	// Retention: an hour holds a shard across MaxReceiveCount deliveries (15 min), so one that
	// keeps failing reaches the dead-letter queue instead of expiring.
	SweepQueue:    QueueSource{BatchSize: 10, MaximumConcurrency: 50, VisibilityTimeoutSeconds: 300, MaxReceiveCount: 3, RetentionSeconds: 3600},
	RequesterRule: `{"source":["buyflow"],"detail-type":["MediaBuy Status Changed","MediaBuy Change Status Changed","Campaign Status Changed"],"detail":{"notify":{"slack":[{"exists":true}]}}}`,
	Functions: []Function{
		{
			Name: "submit", Description: "POST/GET /v1/media-buys and /v1/campaigns: validate, claim the key, lock, start the executions",
			MemoryMB: 256, TimeoutSeconds: 15, LedgerActions: ledgerRW(LedgerDelete), LedgerIndexes: []string{"gsi2"}, StartsExecutions: true,
			Env: []string{EnvTableName, EnvStateMachineARN, EnvCampaignsARN, EnvAgentsSecretPrefix, EnvRunConfig, EnvLocalTenantHeader, EnvSigningKey},
		},
		{
			Name: "campaign", Description: "The Campaign state machine's tasks: sync_plans, releasing the legs (the approval threshold on the total), a leg's status, settling the partial-failure policy",
			MemoryMB: 256, TimeoutSeconds: 60, LedgerActions: ledgerRW(), SignsRequests: true, Placeholder: "CampaignFunctionArn",
			Env: signing(EnvApprovalPolicy), Secrets: []string{EnvAgentsSecretPrefix},
		},
		{
			Name: "governance", Description: "CheckGovernance, ReportOutcome and RecordFailure stages",
			MemoryMB: 256, TimeoutSeconds: 60, LedgerActions: ledgerRW(), SignsRequests: true, Placeholder: "GovernanceFunctionArn",
			Env: signing(EnvCallerURI, EnvApprovalPolicy), Secrets: []string{EnvAgentsSecretPrefix},
		},
		{
			Name: "notify", Description: "RequestApproval: records the approval and posts the Slack message",
			MemoryMB: 256, TimeoutSeconds: 30, LedgerActions: ledgerRW(), Placeholder: "NotifyFunctionArn",
			Env:     []string{EnvTableName, EnvLinkKeySecret, EnvSlackSecret, EnvPublicBaseURL, EnvApprovalPolicy},
			Secrets: []string{EnvLinkKeySecret, EnvSlackSecret},
		},
		{
			Name: "approve", Description: "GET/POST /v1/approvals/{approval_id}: confirm page and decision; GET /v1/approver/approvals: the caller's approvals",
			MemoryMB: 256, TimeoutSeconds: 15, LedgerActions: ledgerRW(), LedgerIndexes: []string{"gsi2"}, CompletesTasks: true, FailsTasks: true,
			Env:     []string{EnvTableName, EnvLinkKeySecret, EnvSlackSecret, EnvPublicBaseURL, EnvApprovalPolicy, EnvLocalTenantHeader},
			Secrets: []string{EnvLinkKeySecret, EnvSlackSecret},
		},
		{
			Name: "create", Description: "CreateMediaBuy (write-ahead intent) and Compensate (cancel)",
			MemoryMB: 256, TimeoutSeconds: 60, LedgerActions: ledgerRW(LedgerConditionCheck), SignsRequests: true, Placeholder: "CreateFunctionArn",
			Env: signing(EnvCallerURI, EnvPublicBaseURL, EnvRouteKeySecret), Secrets: []string{EnvAgentsSecretPrefix, EnvRouteKeySecret},
		},
		{
			Name: "modify", Description: "A change to a placed buy: governance (phase modification), update_media_buy, the buy's new state",
			MemoryMB: 256, TimeoutSeconds: 60, LedgerActions: ledgerRW(), SignsRequests: true, Placeholder: "ModifyFunctionArn",
			Env: signing(EnvCallerURI, EnvPublicBaseURL, EnvApprovalPolicy, EnvRouteKeySecret), Secrets: []string{EnvAgentsSecretPrefix, EnvRouteKeySecret},
		},
		{
			Name: "poll", Description: "AwaitSeller (parks the task token) and PollSeller",
			MemoryMB: 256, TimeoutSeconds: 60, LedgerActions: ledgerRW(), SignsRequests: true, Placeholder: "PollFunctionArn", CompletesTasks: true,
			Env: signing(), Secrets: []string{EnvAgentsSecretPrefix},
		},
		{
			Name: "webhook", Description: "POST /v1/webhooks/adcp/{operation_id}: verify, dedupe, apply, wake; GET /v1/jwks.json: buyflow's request-signing keys",
			MemoryMB: 256, TimeoutSeconds: 10, LedgerActions: ledgerRW(LedgerDelete), CompletesTasks: true, PublishesKeys: true,
			Env:     with(EnvPublicBaseURL, EnvRunConfig, EnvSigningKey, EnvSigningKeysPublished, EnvRouteKeySecret),
			Secrets: []string{EnvAgentsSecretPrefix, EnvRouteKeySecret},
		},
		{
			Name: "reconcile", Description: "Scheduled sweep: plans one shard per seller onto the sweep queue and runs the queue's shards (pending operations vs the seller's list_tasks; wakes, fails, records orphans, marks stuck buys)",
			MemoryMB: 256, TimeoutSeconds: 300, LedgerActions: ledgerRW(LedgerScan, LedgerDelete), LedgerIndexes: []string{"gsi1", "gsi3"}, SignsRequests: true, CompletesTasks: true, DescribesExecutions: true,
			SweepsShards: true,
			Env:          signing(EnvStateMachineARN, EnvRunConfig, EnvSweepQueueURL),
			Secrets:      []string{EnvAgentsSecretPrefix},
		},
		{
			Name: "agents", Description: "/v1/operator/agents: the agent registry (add, update, disable, list, show); the deploy's seed; the scheduled capabilities check",
			MemoryMB: 256, TimeoutSeconds: 300, LedgerActions: []string{LedgerGet, LedgerQuery, LedgerPut}, SignsRequests: true,
			Env:     signing(EnvOperators, EnvLocalTenantHeader),
			Secrets: []string{EnvAgentsSecretPrefix},
		},
		{
			Name: "publish", Description: "The ledger's stream: one status event on the event bus per status change of a buy, a change or a campaign",
			MemoryMB: 128, TimeoutSeconds: 30, ReadsLedgerStream: true, PutsEvents: true,
			Env: []string{EnvEventBusName, EnvPublicBaseURL},
		},
		{
			Name: "inform", Description: "The requester notifier: the buy's status events, in Slack, for a submit that asked for them",
			MemoryMB: 128, TimeoutSeconds: 30, LedgerActions: []string{LedgerGet, LedgerQuery, LedgerPut, LedgerDelete}, ConsumesStatusEvents: true,
			Env: []string{EnvTableName, EnvSlackSecret}, Secrets: []string{EnvSlackSecret},
		},
	},
	Routes: []Route{
		{Method: "POST", Path: "/v1/media-buys", Function: "submit", Auth: AuthIAM},
		{Method: "GET", Path: "/v1/media-buys", Function: "submit", Auth: AuthIAM},
		{Method: "GET", Path: "/v1/media-buys/{id}", Function: "submit", Auth: AuthIAM},
		{Method: "GET", Path: "/v1/media-buys/{id}/events", Function: "submit", Auth: AuthIAM},
		{Method: "POST", Path: "/v1/campaigns", Function: "submit", Auth: AuthIAM},
		{Method: "GET", Path: "/v1/campaigns", Function: "submit", Auth: AuthIAM},
		{Method: "GET", Path: "/v1/campaigns/{id}", Function: "submit", Auth: AuthIAM},
		{Method: "GET", Path: "/v1/campaigns/{id}/events", Function: "submit", Auth: AuthIAM},
		{Method: "PATCH", Path: "/v1/media-buys/{id}", Function: "submit", Auth: AuthIAM},
		{Method: "POST", Path: "/v1/media-buys/{id}/cancel", Function: "submit", Auth: AuthIAM},
		{Method: "GET", Path: "/v1/media-buys/{id}/delivery", Function: "submit", Auth: AuthIAM},
		{Method: "POST", Path: "/v1/webhooks/adcp/{operation_id}", Function: "webhook", Auth: AuthSignature},
		// Sellers verify buyflow's request signatures with these public keys.
		{Method: "GET", Path: "/v1/jwks.json", Function: "webhook", Auth: AuthPublic},
		{Method: "GET", Path: "/v1/approvals/{approval_id}", Function: "approve", Auth: AuthSignature},
		{Method: "HEAD", Path: "/v1/approvals/{approval_id}", Function: "approve", Auth: AuthSignature},
		{Method: "POST", Path: "/v1/approvals/{approval_id}", Function: "approve", Auth: AuthSignature},
		// An approver who prefers a terminal lists what waits for them and opens one (IAM: the
		// approver is the caller's verified identity, mapped by the approval policy).
		{Method: "GET", Path: "/v1/approver/approvals", Function: "approve", Auth: AuthIAM},
		{Method: "GET", Path: "/v1/approver/approvals/{approval_id}", Function: "approve", Auth: AuthIAM},
		// Operators manage the agent registry (IAM: the caller must be one of the deployment's
		// operators, every change an audit event naming them).
		{Method: "GET", Path: "/v1/operator/agents", Function: "agents", Auth: AuthIAM},
		{Method: "POST", Path: "/v1/operator/agents", Function: "agents", Auth: AuthIAM},
		{Method: "GET", Path: "/v1/operator/agents/{agent_id}", Function: "agents", Auth: AuthIAM},
		{Method: "PATCH", Path: "/v1/operator/agents/{agent_id}", Function: "agents", Auth: AuthIAM},
		{Method: "POST", Path: "/v1/operator/agents/{agent_id}/{action}", Function: "agents", Auth: AuthIAM},
		// Catch-alls after the routes above, so that any other method or path under buyflow's
		// prefixes reaches the function that owns the prefix and gets buyflow's error shape
		// (405 with Allow, or 404 no_route) instead of the gateway's {"message":"Not Found"}.
		// API Gateway prefers a route with the request's method to ANY and a literal path to
		// a greedy one. The local emulator ranks a method's route and ANY alike and picks either
		// (the order below does not decide it), so httpapi.ByRouteKey resolves a catch-all
		// against this table as API Gateway would.
		{Method: "ANY", Path: "/v1/media-buys", Function: "submit", Auth: AuthIAM},
		{Method: "ANY", Path: "/v1/media-buys/{proxy+}", Function: "submit", Auth: AuthIAM},
		{Method: "ANY", Path: "/v1/campaigns", Function: "submit", Auth: AuthIAM},
		{Method: "ANY", Path: "/v1/campaigns/{proxy+}", Function: "submit", Auth: AuthIAM},
		{Method: "ANY", Path: "/v1/webhooks/{proxy+}", Function: "webhook", Auth: AuthSignature},
		{Method: "ANY", Path: "/v1/approvals/{proxy+}", Function: "approve", Auth: AuthSignature},
		{Method: "ANY", Path: "/v1/approver/{proxy+}", Function: "approve", Auth: AuthIAM},
		{Method: "ANY", Path: "/v1/operator/{proxy+}", Function: "agents", Auth: AuthIAM},
		// Every other request (a path outside buyflow's prefixes, an unsigned probe of "/")
		// gets 404 no_route in buyflow's error shape from submit's router, instead of API
		// Gateway's {"message":"Not Found"}. Public: the router answers from this table alone,
		// and submit's role gains nothing.
		{Path: DefaultRouteKey, Function: "submit", Auth: AuthNone},
	},
}

// Sandbox are the simulated agents a sandbox deploy adds next to the application (infra's
// buyflow:sandbox), each behind a Lambda Function URL, for `buyflow smoke`. They are not in
// App: a production deploy and the local stack (which serves the same agents in process) have
// none of them. Agent is the registry id each is registered as.
var Sandbox = []SandboxFunction{
	{Function: Function{
		Name: "sandboxseller", Description: "Sandbox only: the simulated AdCP seller (async tasks, RFC 9421-signed webhooks) for buyflow smoke",
		MemoryMB: 256, TimeoutSeconds: 30,
		Env:     []string{EnvSandboxTokenSecret, EnvSandboxWebhookKeySecret},
		Secrets: []string{EnvSandboxTokenSecret, EnvSandboxWebhookKeySecret},
	}, Agent: SandboxSellerAgent, Role: "seller"},
	{Function: Function{
		Name: "sandboxgovernance", Description: "Sandbox only: the simulated AdCP governance agent for buyflow smoke",
		MemoryMB: 256, TimeoutSeconds: 30,
		Env: []string{EnvSandboxTokenSecret}, Secrets: []string{EnvSandboxTokenSecret},
	}, Agent: SandboxGovernanceAgent, Role: "governance"},
}

// The registry ids of the sandbox agents, which `buyflow smoke` buys from by default.
const (
	SandboxSellerAgent     = "sandbox-seller"
	SandboxGovernanceAgent = "sandbox-governance"
)

// SandboxFunction is one sandbox agent's function and the registry id and role it serves as.
type SandboxFunction struct {
	Function
	Agent, Role string
}

// ConstructID is the CDK construct id infra derives from a function's name (or any name):
// pascal case, "-" and "_" dropped. The template's logical ids start with it, which is how
// the local stack finds a function's role in a synthesized template.
func ConstructID(name string) string {
	var b strings.Builder
	up := true
	for _, r := range name {
		if r == '-' || r == '_' {
			up = true
			continue
		}
		if up {
			b.WriteString(strings.ToUpper(string(r)))
			up = false
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}
