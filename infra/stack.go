package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/mail"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigateway"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2authorizers"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsapigatewayv2integrations"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatch"
	"github.com/aws/aws-cdk-go/awscdk/v2/awscloudwatchactions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awskms"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsscheduler"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsschedulertargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssns"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssnssubscriptions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsstepfunctions"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/agents"
	"github.com/buyflow/buyflow/internal/approvalpolicy"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/topology"
	"github.com/buyflow/buyflow/internal/workflow"
	"github.com/buyflow/buyflow/statemachine"
)

// ReconcileFunction is the topology function name that, when declared, is invoked on a schedule
// (EventBridge Scheduler, every Config.ReconcileMinutes).
const ReconcileFunction = "reconcile"

// AgentsFunction is the function that owns the agent registry (its API, seed and schedule).
const AgentsFunction = "agents"

// SendTaskActions are the task-token callbacks buyflow makes. The IAM Service Authorization
// Reference lists no resource type for them (no resource-level permissions, no condition keys),
// so they can only be granted on "*". The token itself is the capability: it is unguessable and
// lives in the ledger only. SendTaskSuccess is granted to functions with CompletesTasks,
// SendTaskFailure to those with FailsTasks; SendTaskHeartbeat to none (no task has a heartbeat).
var SendTaskActions = []string{"states:SendTaskSuccess", "states:SendTaskFailure"}

// BuyflowStackProps configures NewBuyflowStack.
type BuyflowStackProps struct {
	awscdk.StackProps
	// App is the application; nil means topology.App.
	App *topology.Application
	// Definition is the ASL of the state machine with its ${Placeholders} unresolved
	// (statemachine.Definition).
	Definition string
	// CampaignDefinition is the ASL of the Campaign state machine (statemachine.CampaignDefinition);
	// empty deploys no campaigns (and no campaign routes may be in App).
	CampaignDefinition string
	// Config is the deploy-time configuration (ConfigFromContext). Its StackName is used when
	// StackProps.StackName is nil.
	Config Config
}

// BuyflowStack is the stack and the constructs tests and outputs need.
type BuyflowStack struct {
	awscdk.Stack
	Table        awsdynamodb.Table
	Functions    map[string]awslambda.Function
	StateMachine awsstepfunctions.StateMachine
	// CampaignStateMachine runs campaigns (nil without a CampaignDefinition).
	CampaignStateMachine awsstepfunctions.StateMachine
	// CampaignStateMachineArn is its ARN built from its fixed name, as StateMachineArn.
	CampaignStateMachineArn *string
	// StateMachineArn is the ARN built from the fixed state machine name, with no reference to
	// the state machine resource: what functions and the state machine itself get, so that no
	// function the state machine invokes depends on it.
	StateMachineArn *string
	Api             awsapigatewayv2.HttpApi
	Stage           awsapigatewayv2.HttpStage
	AlarmTopic      awssns.Topic
	Dashboard       awscloudwatch.Dashboard
	Secrets         map[string]awssecretsmanager.Secret
	// EventBus carries the status events; PublishFailures keeps the ledger stream records the
	// publish function could not publish.
	EventBus        awsevents.EventBus
	PublishFailures awssqs.Queue
	// NotifyFailures keeps the status events the requester notifier failed on.
	NotifyFailures awssqs.Queue
	// SweepQueue carries the sweep's shards from its planner to its workers (the reconcile
	// function both); SweepShardFailures keeps the shards that failed every delivery.
	SweepQueue, SweepShardFailures awssqs.Queue
	// SigningKey is the request-signing key the functions sign with (KMS, ECC_NIST_P256): its
	// private half never leaves KMS; the functions that call agents may sign with it.
	SigningKey awskms.Key
	// PublishedKeys are the stack's other request-signing keys (the next one before it signs,
	// the previous one until its signatures expire): in the JWKS, signing nothing.
	PublishedKeys []awskms.Key
}

// NewBuyflowStack builds the whole application from props.App: the ledger table, one Lambda per
// function, the secrets, the state machine, the HTTP API, the alarms and the dashboard.
func NewBuyflowStack(scope constructs.Construct, id string, props *BuyflowStackProps) (*BuyflowStack, error) {
	if props == nil {
		return nil, errors.New("infra: nil props")
	}
	app := topology.App
	if props.App != nil {
		app = *props.App
	}
	cfg := props.Config
	sp := props.StackProps
	if sp.StackName == nil {
		sp.StackName = jsii.String(cfg.StackName)
	}
	stackName := *sp.StackName
	if err := validate(app, props.Definition, stackName, cfg); err != nil {
		return nil, err
	}
	retention, err := retentionDays(cfg.LogRetentionDays)
	if err != nil {
		return nil, err
	}
	removal := awscdk.RemovalPolicy_RETAIN
	if cfg.Dev {
		removal = awscdk.RemovalPolicy_DESTROY
	}

	stack := awscdk.NewStack(scope, &id, &sp)
	warnUnsetConfig(stack, cfg)
	b := &BuyflowStack{Stack: stack, Functions: map[string]awslambda.Function{}, Secrets: map[string]awssecretsmanager.Secret{}}
	p := &stackParts{app: app, cfg: cfg, stackName: stackName, removal: removal}
	p.logGroup = func(id string) awslogs.LogGroup {
		return awslogs.NewLogGroup(stack, jsii.String(id), &awslogs.LogGroupProps{Retention: retention, RemovalPolicy: removal})
	}

	// The ledger, from the same schema the local stack creates.
	b.Table = newTable(stack, cfg, removal)
	b.addEventBus(p)
	b.addStateMachineArns(p)
	b.addSecrets(p)
	b.addSigningKey(p)
	b.addAPI(p)
	b.addSweepQueue(p)
	if err := b.addFunctions(p); err != nil {
		return nil, err
	}
	if p.sandboxAgents, err = b.addSandbox(p); err != nil {
		return nil, err
	}
	b.addStateMachine(p, props.Definition)
	if props.CampaignDefinition != "" {
		b.addCampaigns(app, props.CampaignDefinition, p.campaignsName, p.smName, p.executionsArn, p.logGroup("CampaignStateMachineLogs"), cfg)
	}
	b.addRoutes(app)
	if err := b.addSchedules(p); err != nil {
		return nil, err
	}
	b.addAlarms(app, cfg)
	b.addFailureQueueAlarms()
	b.addOutputs(p)
	return b, nil
}

// stackParts is what NewBuyflowStack's steps share: the inputs, and the names and ARNs one
// step makes and a later one uses.
type stackParts struct {
	app       topology.Application
	cfg       Config
	stackName string
	removal   awscdk.RemovalPolicy
	// logGroup creates a log group with the stack's retention and removal policy.
	logGroup func(id string) awslogs.LogGroup

	smName, campaignsName string  // the state machines' fixed names
	executionsArn         *string // the MediaBuy state machine's executions
	agentsPrefix          string  // the name prefix of the agents' credentials
	agentsPrefixArn       *string
	apiURL, callerURI     *string
	// sandboxAgents are the agents the sandbox registers (buyflow:sandbox), their URLs tokens.
	sandboxAgents []map[string]any
}

// addStateMachineArns builds the state machines' ARNs from their fixed names: no reference to
// the resources, so no cycle between the state machines and the functions they invoke.
func (b *BuyflowStack) addStateMachineArns(p *stackParts) {
	stack := b.Stack
	p.smName = p.stackName + "-" + p.app.StateMachineName
	b.StateMachineArn = stack.FormatArn(&awscdk.ArnComponents{
		Service: jsii.String("states"), Resource: jsii.String("stateMachine"),
		ResourceName: jsii.String(p.smName), ArnFormat: awscdk.ArnFormat_COLON_RESOURCE_NAME,
	})
	p.campaignsName = p.stackName + "-" + p.app.CampaignStateMachineName
	b.CampaignStateMachineArn = stack.FormatArn(&awscdk.ArnComponents{
		Service: jsii.String("states"), Resource: jsii.String("stateMachine"),
		ResourceName: jsii.String(p.campaignsName), ArnFormat: awscdk.ArnFormat_COLON_RESOURCE_NAME,
	})
	// Its executions (…:execution:<name>:<execution>), for functions that read their state.
	p.executionsArn = stack.FormatArn(&awscdk.ArnComponents{
		Service: jsii.String("states"), Resource: jsii.String("execution"),
		ResourceName: jsii.String(p.smName + ":*"), ArnFormat: awscdk.ArnFormat_COLON_RESOURCE_NAME,
	})
}

// addSecrets creates the secrets: named, so functions get plain names; the agents'
// credentials are created by the operator under a prefix.
func (b *BuyflowStack) addSecrets(p *stackParts) {
	stack, stackName, removal := b.Stack, p.stackName, p.removal
	linkSeed := awssecretsmanager.NewSecret(stack, jsii.String("LinkKeySeed"), &awssecretsmanager.SecretProps{
		SecretName:  jsii.String(stackName + "/approval-link-key-seed"),
		Description: jsii.String("Random seed of the first approval-link signing key (read only by CloudFormation)."),
		// 64 characters of [A-Za-z0-9] are valid standard base64 of 48 bytes.
		GenerateSecretString: &awssecretsmanager.SecretStringGenerator{
			PasswordLength: jsii.Number(64), ExcludePunctuation: jsii.Bool(true), IncludeSpace: jsii.Bool(false),
		},
		RemovalPolicy: removal,
	})
	suppress(linkSeed, "AwsSolutions-SMG4", reasonLinkSeedRotation)
	b.Secrets[topology.EnvLinkKeySecret] = awssecretsmanager.NewSecret(stack, jsii.String("LinkKeys"), &awssecretsmanager.SecretProps{
		SecretName: jsii.String(stackName + "/approval-link-keys"),
		Description: jsii.String(`Approval-link signing keys, {"current":"<kid>","keys":{"<kid>":"<base64>"}}. ` +
			`Rotate by adding a key and switching "current" with put-secret-value.`),
		// CloudFormation resolves the seed's dynamic reference; the key never appears in the template.
		SecretStringValue: awscdk.SecretValue_UnsafePlainText(awscdk.Fn_Join(jsii.String(""), &[]*string{
			jsii.String(`{"current":"k1","keys":{"k1":"`), linkSeed.SecretValue().UnsafeUnwrap(), jsii.String(`"}}`),
		})),
		RemovalPolicy: removal,
	})
	suppress(b.Secrets[topology.EnvLinkKeySecret], "AwsSolutions-SMG4", reasonLinkKeysRotation)
	b.Secrets[topology.EnvSlackSecret] = awssecretsmanager.NewSecret(stack, jsii.String("Slack"), &awssecretsmanager.SecretProps{
		SecretName: jsii.String(stackName + "/slack"),
		Description: jsii.String(`Slack for approval messages, {"bot_token":"xoxb-..."} or {"webhook_url":"https://hooks.slack.com/..."}: ` +
			`a placeholder until set with put-secret-value.`),
		// Not a secret: the functions refuse it with "set exactly one of bot_token and webhook_url".
		SecretStringValue: awscdk.SecretValue_UnsafePlainText(jsii.String(`{"bot_token":"","webhook_url":""}`)),
		RemovalPolicy:     removal,
	})
	suppress(b.Secrets[topology.EnvSlackSecret], "AwsSolutions-SMG4", reasonSlackRotation)
	b.Secrets[topology.EnvRouteKeySecret] = awssecretsmanager.NewSecret(stack, jsii.String("WebhookRouteKey"), &awssecretsmanager.SecretProps{
		SecretName: jsii.String(stackName + "/webhook-route-key"),
		Description: jsii.String("Key material of the routes sealed into seller webhook URLs (the owner of the URL's operation). " +
			"Rotate by replacing it with put-secret-value: URLs sealed under the old value keep working, their owner read from the ledger."),
		// 64 characters of [A-Za-z0-9]: about 380 bits, from which the functions derive the key.
		GenerateSecretString: &awssecretsmanager.SecretStringGenerator{
			PasswordLength: jsii.Number(64), ExcludePunctuation: jsii.Bool(true), IncludeSpace: jsii.Bool(false),
		},
		RemovalPolicy: removal,
	})
	suppress(b.Secrets[topology.EnvRouteKeySecret], "AwsSolutions-SMG4", reasonRouteKeyRotation)
	p.agentsPrefix = stackName + "/agents/"
	p.agentsPrefixArn = stack.FormatArn(&awscdk.ArnComponents{
		Service: jsii.String("secretsmanager"), Resource: jsii.String("secret"),
		ResourceName: jsii.String(p.agentsPrefix + "*"), ArnFormat: awscdk.ArnFormat_COLON_RESOURCE_NAME,
	})
}

// addSigningKey creates the request-signing keys buyflow:signingKeys names: KMS asymmetric
// ECC_NIST_P256 keys, the profile's ecdsa-p256-sha256 (docs/cloud-team.md says why KMS rather
// than a secret). The one buyflow:signingKey names signs; the others are only published.
func (b *BuyflowStack) addSigningKey(p *stackParts) {
	for _, name := range p.cfg.SigningKeys {
		id := signingKeyID(name)
		role := "next or previous key, published at GET /v1/jwks.json, signing nothing"
		if name == p.cfg.SigningKey {
			role = "the key that signs; public half served at GET /v1/jwks.json"
		}
		k := awskms.NewKey(b.Stack, jsii.String(id), &awskms.KeyProps{
			Description:   jsii.String("buyflow's AdCP request-signing key " + name + " (RFC 9421, ecdsa-p256-sha256): " + role),
			KeySpec:       awskms.KeySpec_ECC_NIST_P256,
			KeyUsage:      awskms.KeyUsage_SIGN_VERIFY,
			RemovalPolicy: p.removal,
		})
		suppress(k, "AwsSolutions-KMS5", reasonSigningKeyRotation)
		if name == p.cfg.SigningKey {
			b.SigningKey = k
		} else {
			b.PublishedKeys = append(b.PublishedKeys, k)
		}
	}
}

// signingKeyID is the logical id of request-signing key name: key "1" keeps the id the stack's
// one key always had, so a stack that never rotated keeps its key.
func signingKeyID(name string) string {
	if name == "1" {
		return "RequestSigningKey"
	}
	return "RequestSigningKey" + name
}

// kmsRef is a key's reference as the functions read it (internal/signingkey).
func kmsRef(k awskms.Key) *string {
	return awscdk.Fn_Join(jsii.String(""), &[]*string{jsii.String("kms:"), k.KeyArn()})
}

// addAPI creates the HTTP API and its stage. It comes before the functions: its URL goes into
// their environment (the API itself does not depend on any function, only its routes and
// integrations do; see addRoutes).
func (b *BuyflowStack) addAPI(p *stackParts) {
	stack, cfg := b.Stack, p.cfg
	b.Api = awsapigatewayv2.NewHttpApi(stack, jsii.String("Api"), &awsapigatewayv2.HttpApiProps{
		ApiName:            jsii.String(p.stackName),
		Description:        jsii.String("buyflow: media buys (IAM), seller webhooks and approval links (signed)"),
		CreateDefaultStage: jsii.Bool(false),
	})
	apiLogs := p.logGroup("ApiAccessLogs")
	b.Stage = awsapigatewayv2.NewHttpStage(stack, jsii.String("ApiStage"), &awsapigatewayv2.HttpStageProps{
		HttpApi:    b.Api,
		StageName:  jsii.String("$default"),
		AutoDeploy: jsii.Bool(true),
		Throttle:   &awsapigatewayv2.ThrottleSettings{RateLimit: jsii.Number(cfg.ThrottleRate), BurstLimit: jsii.Number(cfg.ThrottleBurst)},
		AccessLogSettings: &accessLogSettings{
			destination: awsapigatewayv2.NewLogGroupLogDestination(apiLogs),
			format:      awsapigateway.AccessLogFormat_Custom(jsii.String(accessLogFormat)),
		},
	})
	p.apiURL = b.Stage.Url()
	p.callerURI = p.apiURL
	if cfg.CallerURI != "" {
		p.callerURI = jsii.String(cfg.CallerURI)
	}
}

// envValue is the value of the environment variable name in a function of the stack.
func (b *BuyflowStack) envValue(p *stackParts, name string) (*string, error) {
	cfg := p.cfg
	switch name {
	case topology.EnvTableName:
		return b.Table.TableName(), nil
	case topology.EnvStateMachineARN:
		return b.StateMachineArn, nil
	case topology.EnvCampaignsARN:
		return b.CampaignStateMachineArn, nil
	case topology.EnvOperators:
		return jsii.String(cfg.Operators), nil
	case topology.EnvAgentsSecretPrefix:
		return jsii.String(p.agentsPrefix), nil
	case topology.EnvLinkKeySecret, topology.EnvSlackSecret, topology.EnvRouteKeySecret:
		return b.Secrets[name].SecretName(), nil
	case topology.EnvPublicBaseURL:
		return p.apiURL, nil
	case topology.EnvApprovalPolicy:
		return jsii.String(cfg.ApprovalPolicy), nil
	case topology.EnvCallerURI:
		return p.callerURI, nil
	case topology.EnvRunConfig:
		return jsii.String(cfg.RunConfig), nil
	case topology.EnvEventBusName:
		return b.EventBus.EventBusName(), nil
	case topology.EnvSigningKey:
		return kmsRef(b.SigningKey), nil
	case topology.EnvSigningKeysPublished:
		refs := []*string{}
		for _, k := range b.PublishedKeys {
			refs = append(refs, kmsRef(k))
		}
		if len(refs) == 0 {
			return jsii.String(""), nil
		}
		return awscdk.Fn_Join(jsii.String(","), &refs), nil
	case topology.EnvSweepQueueURL:
		if b.SweepQueue != nil {
			return b.SweepQueue.QueueUrl(), nil
		}
	}
	return nil, fmt.Errorf("infra: no value for environment variable %s", name)
}

// addFunctions creates one Lambda per topology function, each with its own role and grants.
func (b *BuyflowStack) addFunctions(p *stackParts) error {
	// The ledger's indexes by name (no index/* wildcard); a function queries those it declares.
	indexes := map[string]*string{}
	for _, g := range ledger.TableSchema("").GlobalSecondaryIndexes {
		indexes[*g.IndexName] = awscdk.Fn_Join(jsii.String(""), &[]*string{b.Table.TableArn(), jsii.String("/index/" + *g.IndexName)})
	}
	for _, f := range p.app.Functions {
		fn, role, err := b.addFunction(p, f)
		if err != nil {
			return err
		}
		b.Functions[f.Name] = fn
		if err := b.grantFunction(p, f, fn, role, indexes); err != nil {
			return err
		}
	}
	return nil
}

// addFunction creates the function f with its environment, log group and role.
func (b *BuyflowStack) addFunction(p *stackParts, f topology.Function) (awslambda.Function, awsiam.Role, error) {
	stack, cfg := b.Stack, p.cfg
	tracing := awslambda.Tracing_DISABLED
	if cfg.Tracing {
		tracing = awslambda.Tracing_ACTIVE
	}
	env := map[string]*string{}
	for _, name := range f.Env {
		if name == topology.EnvLocalTenantHeader {
			continue // local stack only: the tenant comes from the IAM identity here
		}
		v, err := b.envValue(p, name)
		if err != nil {
			return nil, nil, fmt.Errorf("function %s: %w", f.Name, err)
		}
		env[name] = v
	}
	dir, err := filepath.Abs(filepath.Join(cfg.AssetRoot, f.Name))
	if err != nil {
		return nil, nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, "bootstrap")); err != nil {
		return nil, nil, fmt.Errorf("function %s: %s/bootstrap is missing: run `make build`, or set -c %s=DIR", f.Name, dir, CtxAssetRoot)
	}
	cid := topology.ConstructID(f.Name)
	// Its own role: writes to its own log group only (no AWSLambdaBasicExecutionRole, whose
	// logs actions are on *), plus the grants of grantFunction.
	role := awsiam.NewRole(stack, jsii.String(cid+"Role"), &awsiam.RoleProps{
		AssumedBy:   awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil),
		Description: jsii.String("buyflow " + f.Name + " function"),
	})
	logs := p.logGroup(cid + "Logs")
	logs.GrantWrite(role)
	fn := awslambda.NewFunction(stack, jsii.String(cid+"Function"), &awslambda.FunctionProps{
		Description:           jsii.String(f.Description),
		Runtime:               awslambda.Runtime_PROVIDED_AL2023(),
		Architecture:          awslambda.Architecture_ARM_64(),
		Handler:               jsii.String("bootstrap"),
		Code:                  awslambda.Code_FromAsset(jsii.String(dir), nil),
		MemorySize:            jsii.Number(float64(f.MemoryMB)),
		Timeout:               awscdk.Duration_Seconds(jsii.Number(float64(f.TimeoutSeconds))),
		Environment:           &env,
		LoggingFormat:         awslambda.LoggingFormat_JSON,
		ApplicationLogLevelV2: awslambda.ApplicationLogLevel_INFO,
		SystemLogLevelV2:      awslambda.SystemLogLevel_WARN,
		LogGroup:              logs,
		Role:                  role,
		Tracing:               tracing,
	})
	return fn, role, nil
}

// grantFunction grants fn what its topology entry f declares (the ledger, the state machines,
// task callbacks, secrets), with the nag suppressions of the grants that cannot be narrower.
// Each grant is an action the function's code makes: docs/iam-grants.md names the test of each.
func (b *BuyflowStack) grantFunction(p *stackParts, f topology.Function, fn awslambda.Function, role awsiam.Role, indexes map[string]*string) error {
	// The item actions and the table's own queries and scans are on the table (an index
	// ARN authorizes nothing but a Query or Scan of that index); a function that is not told
	// the table (the publisher, which reads the table's stream) gets nothing of it.
	if len(f.LedgerActions) > 0 || len(f.LedgerIndexes) > 0 {
		if !slices.Contains(f.Env, topology.EnvTableName) {
			return fmt.Errorf("function %s: ledger actions without %s in its environment", f.Name, topology.EnvTableName)
		}
	}
	if len(f.LedgerActions) > 0 {
		awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
			Grantee: fn, Actions: jsii.Strings(f.LedgerActions...), ResourceArns: &[]*string{b.Table.TableArn()},
		})
	}
	if len(f.LedgerIndexes) > 0 {
		arns := make([]*string, 0, len(f.LedgerIndexes))
		for _, name := range f.LedgerIndexes {
			arn, ok := indexes[name]
			if !ok {
				return fmt.Errorf("function %s: the ledger has no index %s", f.Name, name)
			}
			arns = append(arns, arn)
		}
		awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
			Grantee: fn, Actions: jsii.Strings(topology.LedgerQuery), ResourceArns: &arns,
		})
	}
	if f.PutsEvents {
		b.EventBus.GrantPutEventsTo(fn, nil)
	}
	if f.ReadsLedgerStream {
		b.addLedgerStream(p, fn)
	}
	if f.SweepsShards {
		b.consumeSweepQueue(p, fn)
	}
	if f.ConsumesStatusEvents {
		if err := b.addRequesterRule(p, fn); err != nil {
			return err
		}
	}
	if f.StartsExecutions {
		machines := []*string{b.StateMachineArn}
		if slices.Contains(f.Env, topology.EnvCampaignsARN) {
			machines = append(machines, b.CampaignStateMachineArn)
		}
		awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
			Grantee: fn, Actions: jsii.Strings("states:StartExecution"), ResourceArns: &machines,
		})
	}
	if f.DescribesExecutions {
		awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
			Grantee: fn, Actions: jsii.Strings("states:DescribeExecution"), ResourceArns: &[]*string{p.executionsArn},
		})
		suppress(role, "AwsSolutions-IAM5", reasonExecutions, arnFinding("states", "execution", p.smName+":*"))
	}
	var tasks []string
	if f.CompletesTasks {
		tasks = append(tasks, SendTaskActions[0])
	}
	if f.FailsTasks {
		tasks = append(tasks, SendTaskActions[1])
	}
	if len(tasks) > 0 {
		awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
			Grantee: fn, Actions: jsii.Strings(tasks...), ResourceArns: jsii.Strings("*"),
		})
	}
	// The request-signing keys: the functions that call agents sign with the signing key (and
	// read its public half to name it); the JWKS function reads the public half of every key
	// it publishes. No function may sign with a key that is only published.
	switch {
	case f.SignsRequests:
		b.SigningKey.Grant(fn, jsii.String("kms:Sign"), jsii.String("kms:GetPublicKey"))
	case f.PublishesKeys:
		b.SigningKey.Grant(fn, jsii.String("kms:GetPublicKey"))
		for _, k := range b.PublishedKeys {
			k.Grant(fn, jsii.String("kms:GetPublicKey"))
		}
	}
	for _, s := range f.Secrets {
		switch s {
		case topology.EnvLinkKeySecret, topology.EnvSlackSecret, topology.EnvRouteKeySecret:
			// GetSecretValue only: Secret.GrantRead adds DescribeSecret, which no code calls.
			awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
				Grantee: fn, Actions: jsii.Strings("secretsmanager:GetSecretValue"), ResourceArns: &[]*string{b.Secrets[s].SecretArn()},
			})
		case topology.EnvAgentsSecretPrefix:
			awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
				Grantee: fn, Actions: jsii.Strings("secretsmanager:GetSecretValue"), ResourceArns: &[]*string{p.agentsPrefixArn},
			})
			suppress(role, "AwsSolutions-IAM5", reasonAgentsPrefix, arnFinding("secretsmanager", "secret", p.agentsPrefix+"*"))
		default:
			return fmt.Errorf("function %s: no secret behind %s", f.Name, s)
		}
	}
	// The only grants on "*": task-token callbacks, X-Ray and the stream listing.
	var onStar []string
	if len(tasks) > 0 {
		onStar = append(onStar, reasonSendTask)
	}
	if p.cfg.Tracing {
		onStar = append(onStar, reasonXRay)
	}
	if f.ReadsLedgerStream {
		onStar = append(onStar, reasonStreamList)
	}
	if len(onStar) > 0 {
		suppress(role, "AwsSolutions-IAM5", strings.Join(onStar, " "), "Resource::*")
	}
	return nil
}

// addStateMachine creates the MediaBuy state machine from the one ASL file, with its grants.
func (b *BuyflowStack) addStateMachine(p *stackParts, definition string) {
	cfg := p.cfg
	subs := b.substitutions(p.app, definition)
	b.StateMachine = awsstepfunctions.NewStateMachine(b.Stack, jsii.String("StateMachine"), &awsstepfunctions.StateMachineProps{
		StateMachineName:        jsii.String(p.smName),
		StateMachineType:        awsstepfunctions.StateMachineType_STANDARD,
		DefinitionBody:          awsstepfunctions.DefinitionBody_FromString(jsii.String(definition)),
		DefinitionSubstitutions: &subs,
		Logs: &awsstepfunctions.LogOptions{
			Destination:          p.logGroup("StateMachineLogs"),
			Level:                awsstepfunctions.LogLevel_ALL,
			IncludeExecutionData: jsii.Bool(false),
		},
		TracingEnabled: jsii.Bool(cfg.Tracing),
	})
	// Explicit invoke grants on the unqualified ARNs the definition names (fn.GrantInvoke would
	// add <arn>:* for every version and alias).
	for _, ph := range slices.Sorted(maps.Keys(subs)) {
		awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
			Grantee: b.StateMachine, Actions: jsii.Strings("lambda:InvokeFunction"), ResourceArns: &[]*string{subs[ph]},
		})
	}
	smStar := reasonLogDelivery
	if cfg.Tracing {
		smStar += " " + reasonXRay
	} else {
		suppress(b.StateMachine.Node().DefaultChild(), "AwsSolutions-SF2", reasonNoXRayStateMachine)
	}
	suppress(b.StateMachine.Role(), "AwsSolutions-IAM5", smStar, "Resource::*")
	if usesStartExecution(definition) {
		// Continue-as-new: the state machine starts its next generation. Granted by the built
		// ARN: a reference to the state machine from its own role policy is a cycle.
		awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
			Grantee: b.StateMachine, Actions: jsii.Strings("states:StartExecution"), ResourceArns: &[]*string{b.StateMachineArn},
		})
	}
}

// addRoutes adds app's routes to the HTTP API, one integration per function.
func (b *BuyflowStack) addRoutes(app topology.Application) {
	iamAuth := awsapigatewayv2authorizers.NewHttpIamAuthorizer()
	integrations := map[string]awsapigatewayv2integrations.HttpLambdaIntegration{}
	for _, r := range app.Routes {
		integ, ok := integrations[r.Function]
		if !ok {
			integ = awsapigatewayv2integrations.NewHttpLambdaIntegration(jsii.String(topology.ConstructID(r.Function)+"Integration"), b.Functions[r.Function], nil)
			integrations[r.Function] = integ
		}
		if r.Default() {
			// API Gateway's $default route: a path AddRoutes cannot express.
			route := awsapigatewayv2.NewHttpRoute(b.Stack, jsii.String("DefaultRoute"), &awsapigatewayv2.HttpRouteProps{
				HttpApi: b.Api, RouteKey: awsapigatewayv2.HttpRouteKey_DEFAULT(), Integration: integ,
			})
			suppress(route.Node().DefaultChild(), "AwsSolutions-APIG4", reasonDefaultRoute)
			continue
		}
		opts := &awsapigatewayv2.AddRoutesOptions{
			Path:        jsii.String(r.Path),
			Methods:     &[]awsapigatewayv2.HttpMethod{awsapigatewayv2.HttpMethod(r.Method)},
			Integration: integ,
		}
		if r.Auth == topology.AuthIAM {
			opts.Authorizer = iamAuth
		}
		for _, route := range *b.Api.AddRoutes(opts) {
			switch r.Auth {
			case topology.AuthIAM:
			case topology.AuthPublic:
				suppress(route.Node().DefaultChild(), "AwsSolutions-APIG4", reasonJWKSRoute)
			default:
				suppress(route.Node().DefaultChild(), "AwsSolutions-APIG4", reasonPublicRoute)
			}
		}
	}
}

// addSchedules adds the schedules of the functions the topology declares: the reconciliation
// sweep and the agent registry's seed and capabilities check.
func (b *BuyflowStack) addSchedules(p *stackParts) error {
	stack, cfg := b.Stack, p.cfg
	// The reconciliation sweep, when the topology has it.
	if fn, ok := b.Functions[ReconcileFunction]; ok {
		schedule(stack, "Reconcile", fn, ReconcileFunction, "the reconcile function", reasonSchedulerInvoke,
			"buyflow: read every pending seller task and wake the operations whose task moved on",
			awscdk.Duration_Minutes(jsii.Number(float64(cfg.ReconcileMinutes))), nil)
	}

	// The agent registry: the context's agents seed it when they change (a custom resource
	// served by the agents function itself, so the seed is in no environment), and a
	// schedule checks every agent's capabilities.
	if fn, ok := b.Functions[AgentsFunction]; ok {
		agentsSpec, _ := p.app.Function(AgentsFunction) // in the topology: it has a function
		if strings.TrimSpace(cfg.Agents) != "" || len(p.sandboxAgents) > 0 {
			seed, err := seedDocument(stack, cfg.Agents, p.sandboxAgents)
			if err != nil {
				return err
			}
			// CloudFormation waits an hour by default for an answer that never comes (the
			// function killed at its timeout before it answered): the seed's wait is bounded
			// by the function's own timeout and a minute for CloudFormation's round trip.
			awscdk.NewCustomResource(stack, jsii.String("AgentsSeed"), &awscdk.CustomResourceProps{
				ServiceToken:   fn.FunctionArn(),
				ServiceTimeout: awscdk.Duration_Seconds(jsii.Number(float64(agentsSpec.TimeoutSeconds + 60))),
				ResourceType:   jsii.String(agents.SeedResourceType),
				Properties:     &map[string]any{agents.SeedProperty: seed},
			})
		}
		schedule(stack, "Capabilities", fn, AgentsFunction, "the agents function's capabilities check", reasonSchedulerInvokeAgents,
			"buyflow: call get_adcp_capabilities at every enabled agent and record what it supports",
			awscdk.Duration_Hours(jsii.Number(float64(cfg.CapabilitiesHours))),
			awsscheduler.ScheduleTargetInput_FromObject(map[string]any{"action": agents.ActionRefresh}))
	}
	return nil
}

// addOutputs adds the stack outputs: the API URL, the table and the state machine.
func (b *BuyflowStack) addOutputs(p *stackParts) {
	stack := b.Stack
	awscdk.NewCfnOutput(stack, jsii.String("ApiUrl"), &awscdk.CfnOutputProps{Value: p.apiURL, Description: jsii.String("HTTP API base URL")})
	awscdk.NewCfnOutput(stack, jsii.String("TableName"), &awscdk.CfnOutputProps{Value: b.Table.TableName(), Description: jsii.String("ledger table")})
	awscdk.NewCfnOutput(stack, jsii.String("StateMachineArn"), &awscdk.CfnOutputProps{Value: b.StateMachine.StateMachineArn(), Description: jsii.String("MediaBuy state machine")})
	awscdk.NewCfnOutput(stack, jsii.String("EventBusName"), &awscdk.CfnOutputProps{Value: b.EventBus.EventBusName(), Description: jsii.String("status events bus (detail-types MediaBuy Status Changed, MediaBuy Change Status Changed, Campaign Status Changed)")})
}

// newTable creates the ledger table from ledger.TableSchema.
func newTable(stack awscdk.Stack, cfg Config, removal awscdk.RemovalPolicy) awsdynamodb.Table {
	schema := ledger.TableSchema("")
	attrType := map[string]awsdynamodb.AttributeType{}
	for _, a := range schema.AttributeDefinitions {
		t := awsdynamodb.AttributeType_STRING
		switch a.AttributeType {
		case types.ScalarAttributeTypeN:
			t = awsdynamodb.AttributeType_NUMBER
		case types.ScalarAttributeTypeB:
			t = awsdynamodb.AttributeType_BINARY
		}
		attrType[*a.AttributeName] = t
	}
	keys := func(ks []types.KeySchemaElement) (pk, sk *awsdynamodb.Attribute) {
		for _, k := range ks {
			attr := &awsdynamodb.Attribute{Name: k.AttributeName, Type: attrType[*k.AttributeName]}
			if k.KeyType == types.KeyTypeHash {
				pk = attr
			} else {
				sk = attr
			}
		}
		return pk, sk
	}
	pk, sk := keys(schema.KeySchema)
	table := awsdynamodb.NewTable(stack, jsii.String("Ledger"), &awsdynamodb.TableProps{
		PartitionKey:        pk,
		SortKey:             sk,
		BillingMode:         awsdynamodb.BillingMode_PAY_PER_REQUEST,
		TimeToLiveAttribute: jsii.String(ledger.AttrTTL),
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		DeletionProtection: jsii.Bool(!cfg.Dev),
		RemovalPolicy:      removal,
		// The status events are published from the stream (the publish function).
		Stream: awsdynamodb.StreamViewType(schema.StreamSpecification.StreamViewType),
	})
	for _, g := range schema.GlobalSecondaryIndexes {
		gpk, gsk := keys(g.KeySchema)
		props := &awsdynamodb.GlobalSecondaryIndexProps{IndexName: g.IndexName, PartitionKey: gpk, SortKey: gsk}
		if g.Projection != nil {
			switch g.Projection.ProjectionType {
			case types.ProjectionTypeKeysOnly:
				props.ProjectionType = awsdynamodb.ProjectionType_KEYS_ONLY
			case types.ProjectionTypeInclude:
				props.ProjectionType = awsdynamodb.ProjectionType_INCLUDE
				props.NonKeyAttributes = jsii.Strings(g.Projection.NonKeyAttributes...)
			default:
				props.ProjectionType = awsdynamodb.ProjectionType_ALL
			}
		}
		table.AddGlobalSecondaryIndex(props)
	}
	return table
}

// Alarm thresholds on buyflow's own (EMF) metrics, per 5-minute period.
const (
	// approvalsPastSLAThreshold: one approval that expired past its SLA is worth a page.
	approvalsPastSLAThreshold = 1
	// webhookSignatureFailuresThreshold: a few refused signatures happen (a seller's clock,
	// a retry after a key rotation); five in five minutes is a broken integration or an attack.
	webhookSignatureFailuresThreshold = 5
)

// addAlarms adds the alarm topic, the alarms, the dashboard and its URL output.
func (b *BuyflowStack) addAlarms(app topology.Application, cfg Config) {
	b.AlarmTopic = awssns.NewTopic(b.Stack, jsii.String("AlarmTopic"), &awssns.TopicProps{
		DisplayName: jsii.String("buyflow alarms"),
		EnforceSSL:  jsii.Bool(true),
	})
	if cfg.AlarmEmail != "" {
		b.AlarmTopic.AddSubscription(awssnssubscriptions.NewEmailSubscription(jsii.String(cfg.AlarmEmail), nil))
	}
	period := awscdk.Duration_Minutes(jsii.Number(5))
	m := monitor{stack: b.Stack, action: awscloudwatchactions.NewSnsAction(b.AlarmTopic), period: period,
		sum: &awscloudwatch.MetricOptions{Period: period, Statistic: jsii.String("Sum")}}
	b.alarmOnOutcomes(m)
	b.alarmOnSweep(m, cfg)
	alarmOnSellerWebhooks(m, cfg.Agents)
	alarmOnBreakers(m, cfg.Agents)
	fns := b.alarmOnFunctions(m, app)
	b.addDashboard(m, fns)
}

// monitor builds one stack's alarms and dashboard metrics: every alarm notifies the alarm
// topic (and again when it clears), every metric is read over the same period.
type monitor struct {
	stack  awscdk.Stack
	action awscloudwatchactions.SnsAction
	period awscdk.Duration
	sum    *awscloudwatch.MetricOptions
}

// alarmAt alarms when m reaches threshold in one period; missing data is not breaching.
func (mo monitor) alarmAt(id, desc string, m awscloudwatch.IMetric, threshold float64) {
	a := awscloudwatch.NewAlarm(mo.stack, jsii.String(id), &awscloudwatch.AlarmProps{
		AlarmDescription:   jsii.String(desc),
		Metric:             m,
		Threshold:          jsii.Number(threshold),
		EvaluationPeriods:  jsii.Number(1),
		ComparisonOperator: awscloudwatch.ComparisonOperator_GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
		TreatMissingData:   awscloudwatch.TreatMissingData_NOT_BREACHING,
	})
	a.AddAlarmAction(mo.action)
	a.AddOkAction(mo.action)
}

// alarm alarms on the first occurrence.
func (mo monitor) alarm(id, desc string, m awscloudwatch.IMetric) { mo.alarmAt(id, desc, m, 1) }

// custom is one of buyflow's own metrics (internal/metrics, embedded metric format).
func (mo monitor) custom(name string, dims map[string]*string, statistic, label string) awscloudwatch.Metric {
	props := &awscloudwatch.MetricProps{
		Namespace: jsii.String(metrics.Namespace), MetricName: jsii.String(name),
		Period: mo.period, Statistic: jsii.String(statistic),
	}
	if label != "" { // an alarm's metric has none: with a label CDK renders it as a metric math query
		props.Label = jsii.String(label)
	}
	if dims != nil {
		props.DimensionsMap = &dims
	}
	return awscloudwatch.NewMetric(props)
}

// search graphs every series of a metric over its one dimension (Code, Stage, Kind...), each
// labelled prefix + the dimension's value (a dynamic label).
func (mo monitor) search(name, dim, statistic, prefix string) awscloudwatch.SearchExpression {
	return awscloudwatch.NewSearchExpression(&awscloudwatch.SearchExpressionProps{
		Expression: jsii.String(fmt.Sprintf(`SEARCH('{%s,%s} MetricName="%s"', '%s', %d)`,
			metrics.Namespace, dim, name, statistic, 300)),
		Label:  jsii.String(prefix + "${PROP('Dim." + dim + "')}"),
		Period: mo.period,
	})
}

// label is the period's sum, labelled l on a graph.
func (mo monitor) label(l string) *awscloudwatch.MetricOptions {
	return &awscloudwatch.MetricOptions{Period: mo.period, Statistic: jsii.String("Sum"), Label: jsii.String(l)}
}

// approvalTimeouts is the Timeouts series of approvals that expired past their SLA.
var approvalTimeouts = map[string]*string{"Kind": jsii.String(metrics.TimeoutApproval)}

// alarmOnOutcomes alarms on what stops or endangers a buy: failed and timed-out executions
// (and failed Campaign executions), API 5xx, approvals past their SLA, refused webhook
// signatures, spend over budget, tasks a seller lost.
func (b *BuyflowStack) alarmOnOutcomes(m monitor) {
	sm := b.StateMachine
	m.alarm("ExecutionsFailedAlarm", "MediaBuy executions failed (a buy stopped: read the Fail state's Error/Cause)", sm.MetricFailed(m.sum))
	m.alarm("ExecutionsTimedOutAlarm", "MediaBuy executions timed out", sm.MetricTimedOut(m.sum))
	if c := b.CampaignStateMachine; c != nil {
		// A campaign's own failure says nothing in the MediaBuy alarm: its legs may all end
		// well while a step of the campaign fails.
		m.alarm("CampaignExecutionsFailedAlarm", "Campaign executions failed (read the Fail state's Error: CampaignStepFailed, CampaignFailureNotRecorded or LegFailuresNotRecorded is a step of the campaign itself failing, recorded on the campaign with its reason; CampaignFailed and CampaignCanceled are campaigns no leg of which committed; runbook: docs/operator.md, 'A campaign failed in its own steps')",
			c.MetricFailed(m.sum))
	}
	m.alarm("ApiServerErrorsAlarm", "HTTP API answered 5xx", b.Api.MetricServerError(m.sum))
	m.alarmAt("ApprovalsPastSlaAlarm", "Approvals expired past their SLA (Buyflow Timeouts, Kind=approval): the buy followed the policy's on_timeout",
		m.custom(metrics.Timeouts, approvalTimeouts, "Sum", ""), approvalsPastSLAThreshold)
	m.alarmAt("WebhookSignatureFailuresAlarm", fmt.Sprintf(
		"At least %d seller webhooks refused with 401 in 5 minutes (Buyflow WebhookSignatureFailures; the dashboard splits them by Code)",
		webhookSignatureFailuresThreshold), m.custom(metrics.WebhookSignatureFailures, nil, "Sum", ""), webhookSignatureFailuresThreshold)
	m.alarm("WebhookSecretInvalidAlarm", "A seller's webhooks are answered 503 webhook_secret_invalid: its HMAC or bearer secret in Secrets Manager is too short or one repeated byte, and its buys finish only by polling until it is fixed (Buyflow WebhookSecretInvalid, by Seller on the metric; the webhook function's log names the agent and the secret; runbook: docs/seller-onboarding.md, 'Webhooks and their authentication')",
		m.custom(metrics.WebhookSecretInvalid, nil, "Sum", ""))
	m.alarm("SpendOverBudgetAlarm", "A live buy's reported spend passed its approved budget (Buyflow SpendOverBudget, by Seller on the dashboard; the buy's timeline has the delivery entry with spend and approved budget)",
		m.custom(metrics.SpendOverBudget, nil, "Sum", ""))
	m.alarm("LostSellerTasksAlarm", "A seller no longer knows a buy's task after the grace: the buy failed and an order may exist at the seller (Buyflow LostSellerTasks, by Seller on the metric; runbook: internal/reconcile/RUNBOOK.md, 'Lost task')",
		m.custom(metrics.LostSellerTasks, nil, "Sum", ""))
}

// alarmOnBreakers alarms while an agent's circuit breaker is open (calls refused because the
// agent failed again and again): one alarm for every agent, those an operator adds after the
// deploy included, and one per agent the deploy seeds.
func alarmOnBreakers(m monitor, agents string) {
	const runbook = "runbook: internal/reconcile/RUNBOOK.md, 'An agent is unavailable'"
	m.alarm("AgentUnavailableAlarm", "An agent's circuit breaker is open: its buys wait and nothing is sent to it (Buyflow AgentUnavailable; the dashboard splits it by Agent; "+runbook+")",
		m.custom(metrics.AgentUnavailable, nil, "Sum", ""))
	for _, id := range agentIDs(agents, func(adcp.Agent) bool { return true }) {
		m.alarm("AgentUnavailable"+topology.ConstructID(id)+"Alarm", fmt.Sprintf("The circuit breaker of agent %s is open: its buys wait and nothing is sent to it (Buyflow AgentUnavailable, Agent=%s; %s)", id, id, runbook),
			m.custom(metrics.AgentUnavailable, map[string]*string{"Agent": jsii.String(id)}, "Sum", ""))
	}
}

// alarmOnSellerWebhooks alarms on a seller whose webhooks are all refused (a 3.0/3.1
// mismatch, a wrong key, a changed URL): its buys still finish by polling, so nothing else
// would show it. One alarm per configured seller: refusals and no accepted webhook over 15
// minutes.
func alarmOnSellerWebhooks(m monitor, agents string) {
	for _, id := range sellerIDs(agents) {
		seller := map[string]*string{"Seller": jsii.String(id)}
		window := awscdk.Duration_Minutes(jsii.Number(15))
		over := func(name string) awscloudwatch.IMetric {
			return awscloudwatch.NewMetric(&awscloudwatch.MetricProps{Namespace: jsii.String(metrics.Namespace), MetricName: jsii.String(name),
				DimensionsMap: &seller, Period: window, Statistic: jsii.String("Sum")})
		}
		allRefused := awscloudwatch.NewMathExpression(&awscloudwatch.MathExpressionProps{
			Expression:   jsii.String("IF(FILL(rejected, 0) > 0 AND FILL(accepted, 0) == 0, 1, 0)"),
			UsingMetrics: &map[string]awscloudwatch.IMetric{"rejected": over(metrics.WebhookRejected), "accepted": over(metrics.WebhookAccepted)},
			Period:       window,
			Label:        jsii.String("webhooks of " + id + " all refused"),
		})
		m.alarm("WebhooksAllRefused"+topology.ConstructID(id)+"Alarm", fmt.Sprintf("Every webhook of seller %s was refused for 15 minutes (Buyflow WebhookRejected by Seller, none in WebhookAccepted): its buys finish only by polling; WebhookRejected by Code says why", id), allRefused)
	}
}

// alarmOnSweep pages when the reconciliation sweep has not run for three of its periods (at
// least 15 minutes): a disabled or deleted schedule stops nothing else that alarms, yet every
// buy parked on the long safety net then waits for its deadline (the sweep's heartbeat lapses
// and only buys parked afterwards get the short net). Missing data is the signal here, so it
// breaches.
func (b *BuyflowStack) alarmOnSweep(m monitor, cfg Config) {
	fn, ok := b.Functions[ReconcileFunction]
	if !ok {
		return
	}
	window := awscdk.Duration_Minutes(jsii.Number(float64(max(15, 3*cfg.ReconcileMinutes))))
	a := awscloudwatch.NewAlarm(m.stack, jsii.String("SweepStoppedAlarm"), &awscloudwatch.AlarmProps{
		AlarmDescription: jsii.String("The reconciliation sweep (Lambda " + ReconcileFunction + ") has not run for " +
			fmt.Sprint(max(15, 3*cfg.ReconcileMinutes)) + " minutes: check its EventBridge schedule (Reconcile) is enabled; " +
			"until it runs, parked buys wake only at their own safety net (runbook: internal/reconcile/RUNBOOK.md)"),
		Metric:             fn.MetricInvocations(&awscloudwatch.MetricOptions{Period: window, Statistic: jsii.String("Sum")}),
		Threshold:          jsii.Number(1),
		EvaluationPeriods:  jsii.Number(1),
		ComparisonOperator: awscloudwatch.ComparisonOperator_LESS_THAN_THRESHOLD,
		TreatMissingData:   awscloudwatch.TreatMissingData_BREACHING,
	})
	a.AddAlarmAction(m.action)
	a.AddOkAction(m.action)
}

// functionMetrics are the Lambdas' errors, throttles and p99 durations, one series per
// function, for the dashboard.
type functionMetrics struct {
	errors, throttles, durations []awscloudwatch.IMetric
}

// alarmOnFunctions alarms on every Lambda's errors and throttles and returns their series.
func (b *BuyflowStack) alarmOnFunctions(m monitor, app topology.Application) functionMetrics {
	var fm functionMetrics
	for _, f := range app.Functions {
		fn := b.Functions[f.Name]
		m.alarm(topology.ConstructID(f.Name)+"ErrorsAlarm", "Lambda "+f.Name+" errors", fn.MetricErrors(m.sum))
		m.alarm(topology.ConstructID(f.Name)+"ThrottlesAlarm", "Lambda "+f.Name+" throttled (account or reserved concurrency)", fn.MetricThrottles(m.sum))
		fm.errors = append(fm.errors, fn.MetricErrors(&awscloudwatch.MetricOptions{
			Period: m.period, Statistic: jsii.String("Sum"), Label: jsii.String(f.Name),
		}))
		fm.throttles = append(fm.throttles, fn.MetricThrottles(&awscloudwatch.MetricOptions{
			Period: m.period, Statistic: jsii.String("Sum"), Label: jsii.String(f.Name),
		}))
		fm.durations = append(fm.durations, fn.MetricDuration(&awscloudwatch.MetricOptions{
			Period: m.period, Statistic: jsii.String("p99"), Label: jsii.String(f.Name),
		}))
	}
	return fm
}

// widget is a half-width graph of left.
func widget(title string, left []awscloudwatch.IMetric) awscloudwatch.IWidget {
	return awscloudwatch.NewGraphWidget(&awscloudwatch.GraphWidgetProps{
		Title: jsii.String(title), Left: &left, Width: jsii.Number(12),
	})
}

// addDashboard adds the ops and finance dashboard and the output with its URL.
func (b *BuyflowStack) addDashboard(m monitor, fns functionMetrics) {
	stack, sm, label, custom, search := b.Stack, b.StateMachine, m.label, m.custom, m.search
	outcome := func(o record.ApprovalStatus) map[string]*string {
		return map[string]*string{"Outcome": jsii.String(string(o))}
	}
	b.Dashboard = awscloudwatch.NewDashboard(stack, jsii.String("Dashboard"), &awscloudwatch.DashboardProps{
		DashboardName: jsii.String(*stack.StackName() + "-buyflow"),
	})
	dash := b.Dashboard
	dash.AddWidgets(
		widget("Executions", []awscloudwatch.IMetric{
			sm.MetricStarted(label("started")), sm.MetricSucceeded(label("succeeded")),
			sm.MetricFailed(label("failed")), sm.MetricTimedOut(label("timed out")), sm.MetricAborted(label("aborted")),
		}),
		widget("API requests", []awscloudwatch.IMetric{
			b.Api.MetricCount(label("requests")), b.Api.MetricClientError(label("4xx")), b.Api.MetricServerError(label("5xx")),
		}),
	)
	dash.AddWidgets(
		widget("Lambda errors", fns.errors),
		widget("Lambda throttles", fns.throttles),
	)
	dash.AddWidgets(
		widget("Lambda duration p99 (ms)", fns.durations),
		widget("Approval latency (ms)", []awscloudwatch.IMetric{
			custom(metrics.ApprovalLatency, outcome(record.ApprovalApproved), "p50", "approved p50"),
			custom(metrics.ApprovalLatency, outcome(record.ApprovalApproved), "p90", "approved p90"),
			custom(metrics.ApprovalLatency, outcome(record.ApprovalRejected), "p50", "rejected p50"),
			custom(metrics.ApprovalLatency, outcome(record.ApprovalRejected), "p90", "rejected p90"),
		}),
	)
	dash.AddWidgets(
		widget("Approvals decided, rejected, past SLA", []awscloudwatch.IMetric{
			custom(metrics.ApprovalDecided, outcome(record.ApprovalApproved), "Sum", "approved"),
			custom(metrics.ApprovalDecided, outcome(record.ApprovalRejected), "Sum", "rejected"),
			custom(metrics.ApprovalRejected, nil, "Sum", "rejected (all)"),
			custom(metrics.Timeouts, approvalTimeouts, "Sum", "expired past SLA"),
		}),
		widget("Governance denied", []awscloudwatch.IMetric{custom(metrics.GovernanceDenied, nil, "Sum", "denied")}),
	)
	dash.AddWidgets(
		widget("AdCP errors by code", []awscloudwatch.IMetric{search(metrics.AdcpErrors, "Code", "Sum", "")}),
		widget("Webhooks: signature failures and duplicates", []awscloudwatch.IMetric{
			custom(metrics.WebhookSignatureFailures, nil, "Sum", "signature failures"),
			custom(metrics.WebhookDuplicates, nil, "Sum", "duplicates"),
			search(metrics.WebhookSignatureFailures, "Code", "Sum", "signature failures "),
		}),
		widget("Webhooks refused by code", []awscloudwatch.IMetric{search(metrics.WebhookRejected, "Code", "Sum", "")}),
	)
	dash.AddWidgets(
		widget("Pending operations by stage", []awscloudwatch.IMetric{search(metrics.PendingOperations, "Stage", "Maximum", "")}),
		widget("Reconcile findings by kind", []awscloudwatch.IMetric{search(metrics.ReconcileFindings, "Kind", "Sum", "")}),
	)
	dash.AddWidgets(
		widget("Seller task duration by status (ms)", []awscloudwatch.IMetric{
			search(metrics.SellerTaskDuration, "Status", "p50", "p50 "), search(metrics.SellerTaskDuration, "Status", "p90", "p90 "),
		}),
		widget("Timeouts by kind", []awscloudwatch.IMetric{search(metrics.Timeouts, "Kind", "Sum", "")}),
	)
	dash.AddWidgets(
		widget("Calls refused by an open circuit breaker, by agent", []awscloudwatch.IMetric{search(metrics.AgentUnavailable, "Agent", "Sum", "")}),
		widget("Circuit breakers opened, by agent", []awscloudwatch.IMetric{search(metrics.BreakerOpened, "Agent", "Sum", "")}),
	)
	addDashboardURL(stack, dash)
}

// addDashboardURL outputs the console URL of dash.
func addDashboardURL(stack awscdk.Stack, dash awscloudwatch.Dashboard) {
	region := stack.Region()
	awscdk.NewCfnOutput(stack, jsii.String("DashboardUrl"), &awscdk.CfnOutputProps{
		Value: awscdk.Fn_Join(jsii.String(""), &[]*string{
			jsii.String("https://"), region, jsii.String(".console.aws.amazon.com/cloudwatch/home?region="), region,
			jsii.String("#dashboards:name="), dash.DashboardName(),
		}),
		Description: jsii.String("CloudWatch dashboard (ops and finance)"),
	})
}

// accessLogFormat is the HTTP API access log line. It has no query string: approval links carry
// their signature there.
var accessLogFormat = mustJSON(map[string]string{
	"requestId":        "$context.requestId",
	"ip":               "$context.identity.sourceIp",
	"caller":           "$context.identity.caller",
	"requestTime":      "$context.requestTime",
	"routeKey":         "$context.routeKey",
	"status":           "$context.status",
	"protocol":         "$context.protocol",
	"responseLength":   "$context.responseLength",
	"responseLatency":  "$context.responseLatency",
	"integrationError": "$context.integrationErrorMessage",
	"error":            "$context.error.message",
})

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// accessLogSettings implements awsapigatewayv2.IAccessLogSettings.
type accessLogSettings struct {
	destination awsapigatewayv2.IAccessLogDestination
	format      awsapigateway.AccessLogFormat
}

func (a *accessLogSettings) Destination() awsapigatewayv2.IAccessLogDestination { return a.destination }
func (a *accessLogSettings) Format() awsapigateway.AccessLogFormat              { return a.format }

// requiredConfig are the deployment settings with no sensible default: without them the
// functions that read them refuse to start. Synth still works (offline checks, diffs) but warns.
var requiredConfig = []struct{ key, env string }{
	{CtxApprovalPolicy, topology.EnvApprovalPolicy},
}

func warnUnsetConfig(stack awscdk.Stack, cfg Config) {
	values := map[string]string{CtxApprovalPolicy: cfg.ApprovalPolicy}
	for _, r := range requiredConfig {
		if strings.TrimSpace(values[r.key]) == "" {
			awscdk.Annotations_Of(stack).AddWarningV2(jsii.String("buyflow:unset:"+r.key), jsii.String(fmt.Sprintf(
				"context %s is not set: %s will be empty and the functions that read it will refuse to start (set it with -c %s=JSON or in cdk.context.json)",
				r.key, r.env, r.key)), nil)
		}
	}
	if ops := strings.TrimSpace(cfg.Operators); ops == "" || ops == "[]" {
		awscdk.Annotations_Of(stack).AddWarningV2(jsii.String("buyflow:unset:"+CtxOperators), jsii.String(fmt.Sprintf(
			"context %s is not set: nobody can add, change or disable agents through the API (set it with -c %s='[\"arn:aws:iam::<account>:role/<operator>\"]')",
			CtxOperators, CtxOperators)), nil)
	}
}

// validate checks what CloudFormation would only find at deploy time, or never.
func validate(app topology.Application, definition, stackName string, cfg Config) error {
	var errs []error
	for key, v := range map[string]string{CtxAgents: cfg.Agents, CtxApprovalPolicy: cfg.ApprovalPolicy, CtxRunConfig: cfg.RunConfig} {
		if v = strings.TrimSpace(v); v != "" && (!json.Valid([]byte(v)) || !strings.HasPrefix(v, "{")) {
			errs = append(errs, fmt.Errorf("infra: context %s is not a JSON object", key))
		}
	}
	if len(errs) == 0 {
		errs = append(errs, validateConfig(cfg, stackName)...)
	}
	if definition == "" {
		errs = append(errs, errors.New("infra: empty state machine definition"))
	}
	if app.StateMachineName == "" {
		errs = append(errs, errors.New("infra: topology has no state machine name"))
	}
	placeholders := map[string]bool{}
	for _, f := range app.Functions {
		if f.Placeholder != "" {
			placeholders[f.Placeholder] = true
		}
	}
	for _, name := range statemachine.Used(definition) {
		if !placeholders[name] {
			errs = append(errs, fmt.Errorf("infra: the definition uses ${%s}, which no topology function supplies", name))
		}
	}
	resources, err := taskResources(definition)
	if err != nil {
		errs = append(errs, err)
	}
	for _, r := range resources {
		if !slices.Contains(supportedResources, r) {
			errs = append(errs, fmt.Errorf("infra: the definition uses %s, which the stack does not grant the state machine", r))
		}
	}
	for _, r := range app.Routes {
		if _, ok := app.Function(r.Function); !ok {
			errs = append(errs, fmt.Errorf("infra: route %s %s names unknown function %s", r.Method, r.Path, r.Function))
		}
	}
	if stackName == "" || len(stackName)+1+len(app.StateMachineName) > 80 {
		errs = append(errs, fmt.Errorf("infra: stack name %q: state machine names are at most 80 characters", stackName))
	}
	return errors.Join(errs...)
}

// substitutions maps every placeholder definition uses to its function's ARN.
func (b *BuyflowStack) substitutions(app topology.Application, definition string) map[string]*string {
	used := statemachine.Used(definition)
	subs := map[string]*string{}
	for _, f := range app.Functions {
		if f.Placeholder != "" && slices.Contains(used, f.Placeholder) {
			subs[f.Placeholder] = b.Functions[f.Name].FunctionArn()
		}
	}
	return subs
}

// addCampaigns adds the Campaign state machine: a Map over a campaign's legs, each a child
// execution of the MediaBuy state machine (StartExecution.sync:2), then the campaign and
// create functions settle the partial-failure policy. Its role may invoke the functions the
// definition names, start MediaBuy executions, follow and stop them, and manage the one
// EventBridge rule Step Functions uses to learn that a child execution ended.
func (b *BuyflowStack) addCampaigns(app topology.Application, definition, name, mediaBuyName string, childExecutions *string, logs awslogs.LogGroup, cfg Config) {
	subs := b.substitutions(app, definition)
	b.CampaignStateMachine = awsstepfunctions.NewStateMachine(b.Stack, jsii.String("CampaignStateMachine"), &awsstepfunctions.StateMachineProps{
		StateMachineName:        jsii.String(name),
		StateMachineType:        awsstepfunctions.StateMachineType_STANDARD,
		DefinitionBody:          awsstepfunctions.DefinitionBody_FromString(jsii.String(definition)),
		DefinitionSubstitutions: &subs,
		Logs:                    &awsstepfunctions.LogOptions{Destination: logs, Level: awsstepfunctions.LogLevel_ALL, IncludeExecutionData: jsii.Bool(false)},
		TracingEnabled:          jsii.Bool(cfg.Tracing),
	})
	sm := b.CampaignStateMachine
	for _, p := range slices.Sorted(maps.Keys(subs)) {
		awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
			Grantee: sm, Actions: jsii.Strings("lambda:InvokeFunction"), ResourceArns: &[]*string{subs[p]},
		})
	}
	rule := b.FormatArn(&awscdk.ArnComponents{
		Service: jsii.String("events"), Resource: jsii.String("rule"),
		ResourceName: jsii.String("StepFunctionsGetEventsForStepFunctionsExecutionRule"), ArnFormat: awscdk.ArnFormat_SLASH_RESOURCE_NAME,
	})
	awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
		Grantee: sm, Actions: jsii.Strings("states:StartExecution"), ResourceArns: &[]*string{b.StateMachineArn},
	})
	awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
		Grantee: sm, Actions: jsii.Strings("states:DescribeExecution", "states:StopExecution"), ResourceArns: &[]*string{childExecutions},
	})
	awsiam.Grant_AddToPrincipal(&awsiam.GrantOnPrincipalOptions{
		Grantee: sm, Actions: jsii.Strings("events:PutTargets", "events:PutRule", "events:DescribeRule"), ResourceArns: &[]*string{rule},
	})
	star := reasonLogDelivery
	if cfg.Tracing {
		star += " " + reasonXRay
	} else {
		suppress(sm.Node().DefaultChild(), "AwsSolutions-SF2", reasonNoXRayStateMachine)
	}
	suppress(sm.Role(), "AwsSolutions-IAM5", star, "Resource::*")
	suppress(sm.Role(), "AwsSolutions-IAM5", reasonChildExecutions, arnFinding("states", "execution", mediaBuyName+":*"))
}

// supportedResources are the Task resources whose permissions the stack grants.
var supportedResources = []string{
	"arn:aws:states:::lambda:invoke",
	"arn:aws:states:::lambda:invoke.waitForTaskToken",
	"arn:aws:states:::states:startExecution",
	"arn:aws:states:::states:startExecution.sync:2",
}

func usesStartExecution(definition string) bool {
	rs, _ := taskResources(definition)
	return slices.Contains(rs, "arn:aws:states:::states:startExecution")
}

// taskResources returns the distinct Resource of every Task state, nested states included.
func taskResources(definition string) ([]string, error) {
	var doc any
	if err := json.Unmarshal([]byte(definition), &doc); err != nil {
		return nil, fmt.Errorf("infra: state machine definition is not JSON: %w", err)
	}
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch t := v.(type) {
		case map[string]any:
			if t["Type"] == "Task" {
				if r, ok := t["Resource"].(string); ok && !slices.Contains(out, r) {
					out = append(out, r)
				}
			}
			for _, c := range t {
				walk(c)
			}
		case []any:
			for _, c := range t {
				walk(c)
			}
		}
	}
	walk(doc)
	slices.Sort(out)
	return out, nil
}

// sellerIDs returns the ids of the seller agents in the agents setting (none when it is unset;
// validateConfig has refused one that does not parse).
func sellerIDs(agents string) []string {
	return agentIDs(agents, func(a adcp.Agent) bool { return a.Role == adcp.RoleSeller })
}

// agentIDs are the ids of the agents in the seed document that keep accepts.
func agentIDs(agents string, keep func(adcp.Agent) bool) []string {
	var doc adcp.RegistryConfig
	if json.Unmarshal([]byte(agents), &doc) != nil {
		return nil
	}
	var ids []string
	for _, a := range doc.Agents {
		if keep(a) {
			ids = append(ids, a.ID)
		}
	}
	return ids
}

// schedule invokes fn every period through EventBridge Scheduler, with a role of its own that
// may invoke only fn (named function, id prefix of the constructs) and, when set, input.
func schedule(stack awscdk.Stack, id string, fn awslambda.Function, function, what, reason, description string,
	period awscdk.Duration, input awsscheduler.ScheduleTargetInput) {
	role := awsiam.NewRole(stack, jsii.String(id+"ScheduleRole"), &awsiam.RoleProps{
		AssumedBy: awsiam.NewServicePrincipal(jsii.String("scheduler.amazonaws.com"), &awsiam.ServicePrincipalOpts{
			Conditions: &map[string]any{"StringEquals": map[string]any{"aws:SourceAccount": stack.Account()}},
		}),
		Description: jsii.String("buyflow: EventBridge Scheduler invokes " + what),
	})
	awsscheduler.NewSchedule(stack, jsii.String(id+"Schedule"), &awsscheduler.ScheduleProps{
		Description: jsii.String(description),
		Schedule:    awsscheduler.ScheduleExpression_Rate(period),
		Target:      awsschedulertargets.NewLambdaInvoke(fn, &awsschedulertargets.ScheduleTargetBaseProps{Role: role, Input: input}),
	})
	// After the schedule: the target adds the role's policy when it binds.
	suppress(role, "AwsSolutions-IAM5", reason, `/^Resource::<`+topology.ConstructID(function)+`Function[0-9A-F]{8}\.Arn>:\*$/`)
}

var retentions = map[int]awslogs.RetentionDays{
	1: awslogs.RetentionDays_ONE_DAY, 3: awslogs.RetentionDays_THREE_DAYS, 5: awslogs.RetentionDays_FIVE_DAYS,
	7: awslogs.RetentionDays_ONE_WEEK, 14: awslogs.RetentionDays_TWO_WEEKS, 30: awslogs.RetentionDays_ONE_MONTH,
	60: awslogs.RetentionDays_TWO_MONTHS, 90: awslogs.RetentionDays_THREE_MONTHS, 120: awslogs.RetentionDays_FOUR_MONTHS,
	150: awslogs.RetentionDays_FIVE_MONTHS, 180: awslogs.RetentionDays_SIX_MONTHS, 365: awslogs.RetentionDays_ONE_YEAR,
	400: awslogs.RetentionDays_THIRTEEN_MONTHS, 545: awslogs.RetentionDays_EIGHTEEN_MONTHS, 731: awslogs.RetentionDays_TWO_YEARS,
	1096: awslogs.RetentionDays_THREE_YEARS, 1827: awslogs.RetentionDays_FIVE_YEARS, 2192: awslogs.RetentionDays_SIX_YEARS,
	2557: awslogs.RetentionDays_SEVEN_YEARS, 2922: awslogs.RetentionDays_EIGHT_YEARS, 3288: awslogs.RetentionDays_NINE_YEARS,
	3653: awslogs.RetentionDays_TEN_YEARS,
}

func retentionDays(days int) (awslogs.RetentionDays, error) {
	if r, ok := retentions[days]; ok {
		return r, nil
	}
	valid := make([]int, 0, len(retentions))
	for d := range retentions {
		valid = append(valid, d)
	}
	slices.Sort(valid)
	return "", fmt.Errorf("infra: %s=%d: CloudWatch Logs accepts %v", CtxLogRetentionDays, days, valid)
}

// maxApprovalTimeoutSeconds is the longest approval SLA a Standard execution can wait for: an
// execution lasts at most one year.
const maxApprovalTimeoutSeconds = 365 * 24 * 3600

// validateConfig parses the JSON settings with the functions' own parsers (so a value that a
// function would refuse at cold start fails synth instead) and checks the alarm e-mail.
func validateConfig(cfg Config, stackName string) []error {
	var errs []error
	bad := func(key string, err error) { errs = append(errs, fmt.Errorf("infra: context %s: %w", key, err)) }
	if v := strings.TrimSpace(cfg.Agents); v != "" {
		if _, err := adcp.ParseRegistry([]byte(v)); err != nil {
			bad(CtxAgents, err)
		} else {
			// The functions may read secrets under <stack>/agents/ only.
			var doc adcp.RegistryConfig
			_ = json.Unmarshal([]byte(v), &doc) // ParseRegistry accepted it
			prefix := stackName + "/agents/"
			for _, a := range doc.Agents {
				if cfg.Sandbox && (a.ID == topology.SandboxSellerAgent || a.ID == topology.SandboxGovernanceAgent) {
					bad(CtxAgents, fmt.Errorf("agent %s: the id is the sandbox's (%s=true registers it)", a.ID, CtxSandbox))
				}
				refs := map[string]string{"credential_ref": a.CredentialRef}
				if a.Webhook != nil {
					refs["webhook.hmac_secret_ref"], refs["webhook.bearer_secret_ref"] = a.Webhook.HMACSecretRef, a.Webhook.BearerSecretRef
				}
				for field, ref := range refs {
					if ref != "" && !strings.HasPrefix(ref, prefix) {
						bad(CtxAgents, fmt.Errorf("agent %s: %s %q is not under %s (the only secrets the functions may read)", a.ID, field, ref, prefix))
					}
				}
			}
		}
	}
	var operators []string
	if err := json.Unmarshal([]byte(cfg.Operators), &operators); err != nil {
		bad(CtxOperators, fmt.Errorf("not a JSON array of IAM ARNs: %w", err))
	} else if err := agents.CheckOperators(operators); err != nil {
		bad(CtxOperators, err)
	}
	if v := strings.TrimSpace(cfg.ApprovalPolicy); v != "" {
		if _, err := approvalpolicy.Parse([]byte(v)); err != nil {
			bad(CtxApprovalPolicy, err)
		}
	}
	if v := strings.TrimSpace(cfg.RunConfig); v != "" {
		run := workflow.DefaultRunConfig()
		dec := json.NewDecoder(strings.NewReader(v))
		dec.DisallowUnknownFields()
		switch err := dec.Decode(&run); {
		case err != nil:
			bad(CtxRunConfig, err)
		case run.Validate() != nil:
			bad(CtxRunConfig, run.Validate())
		case run.ApprovalTimeoutSeconds > maxApprovalTimeoutSeconds:
			bad(CtxRunConfig, fmt.Errorf("approval_timeout_seconds (the approval SLA) %d is over one year (%d), the longest a Standard execution runs",
				run.ApprovalTimeoutSeconds, maxApprovalTimeoutSeconds))
		}
	}
	errs = append(errs, validateSigningKeys(cfg)...)
	if v := cfg.AlarmEmail; v != "" {
		addr, err := mail.ParseAddress(v)
		if err != nil || addr.Name != "" || addr.Address != v || !strings.Contains(v[strings.LastIndex(v, "@")+1:], ".") {
			bad(CtxAlarmEmail, fmt.Errorf("%q is not a plain e-mail address such as ops@example.com", v))
		}
	}
	return errs
}

// maxSigningKeys bounds buyflow:signingKeys: a rotation needs the previous, the current and
// the next key at most.
const maxSigningKeys = 3

// validateSigningKeys checks buyflow:signingKeys and buyflow:signingKey: one to three distinct
// names a logical id can carry, the signing one among them.
func validateSigningKeys(cfg Config) []error {
	var errs []error
	bad := func(key string, err error) { errs = append(errs, fmt.Errorf("infra: context %s: %w", key, err)) }
	if n := len(cfg.SigningKeys); n == 0 || n > maxSigningKeys {
		bad(CtxSigningKeys, fmt.Errorf("%d keys; name 1 to %d (the previous, the current, the next)", n, maxSigningKeys))
	}
	seen := map[string]bool{}
	for _, name := range cfg.SigningKeys {
		if !signingKeyName().MatchString(name) {
			bad(CtxSigningKeys, fmt.Errorf("key name %q: 1 to 16 letters or digits", name))
		}
		if seen[name] {
			bad(CtxSigningKeys, fmt.Errorf("key %q is named twice", name))
		}
		seen[name] = true
	}
	if !seen[cfg.SigningKey] {
		bad(CtxSigningKey, fmt.Errorf("%q is not one of the stack's keys %v: a key is published (in %s) before it signs",
			cfg.SigningKey, cfg.SigningKeys, CtxSigningKeys))
	}
	return errs
}

// signingKeyName is what a request-signing key's name may be (a part of its logical id).
var signingKeyName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9]{1,16}$`) })
