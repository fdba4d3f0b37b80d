package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/constructs-go/constructs/v10"
)

// Context keys the app reads (`cdk synth -c KEY=VALUE` or cdk.json "context"). Every key is
// optional; the defaults make a production stack.
const (
	// CtxStackName names the stack (default "Buyflow"). It also prefixes the state machine and
	// the secrets, so two stacks (prod and dev) can live in one account and region.
	CtxStackName = "buyflow:stackName"
	// CtxDev ("true") makes a dev stack: the table has no deletion protection and the table,
	// secrets and log groups are destroyed with the stack. Default false: everything is retained.
	CtxDev = "buyflow:dev"
	// CtxAssetRoot is the folder holding <name>/bootstrap for every function (default "bin",
	// what `make build` writes). Point it at another folder to synth without building.
	CtxAssetRoot = "buyflow:assetRoot"
	// CtxLogRetentionDays is the retention of every log group, in days (default 90); it must be
	// a value CloudWatch Logs accepts (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, ...).
	CtxLogRetentionDays = "buyflow:logRetentionDays"
	// CtxTracing turns X-Ray tracing for the functions and the state machine on (default) or off
	// ("false"; cdk-nag's AwsSolutions-SF2 is then suppressed as the operator's choice).
	CtxTracing = "buyflow:tracing"
	// CtxAlarmEmail, when set, subscribes that address to the alarm topic. It must be a plain
	// address (ops@example.com), checked at synth.
	CtxAlarmEmail = "buyflow:alarmEmail"
	// CtxAgents is the seed of the agent registry (internal/adcp RegistryConfig:
	// {"agents":[...]}; credential refs name secrets under the agents secret prefix). A custom
	// resource hands it to the agents function on the first deploy and on each that changes
	// it; the function adds the agents the registry does not have yet. Operators add and
	// change agents with `buyflow agents` (no deploy). It is in no function's environment.
	// Default empty: no seed.
	CtxAgents = "buyflow:agents"
	// CtxOperators is the JSON array of IAM principals (user or role ARNs) allowed to manage
	// the agent registry through /v1/operator/agents. Default empty: nobody can (the seed
	// still loads).
	CtxOperators = "buyflow:operators"
	// CtxCapabilitiesHours is the period, in hours, of the scheduled get_adcp_capabilities
	// check of every enabled agent (default 6).
	CtxCapabilitiesHours = "buyflow:capabilitiesHours"
	// CtxApprovalPolicy is the JSON approval policy handed to the functions as
	// BUYFLOW_APPROVAL_POLICY. Default empty: the functions' built-in policy.
	CtxApprovalPolicy = "buyflow:approvalPolicy"
	// CtxRunConfig is the JSON workflow.RunConfig (timings: poll intervals, deadlines) handed to
	// the functions as BUYFLOW_RUN_CONFIG. Default empty: the built-in timings.
	CtxRunConfig = "buyflow:runConfig"
	// CtxSigningKeys names the request-signing KMS keys the stack holds (comma-separated, in
	// the order created; default "1"). Every one is published at GET /v1/jwks.json; one signs
	// (CtxSigningKey). Key "1" is the logical id RequestSigningKey, key N RequestSigningKeyN.
	// Rotation adds the next name (published, signing nothing), later signs with it, later
	// drops the old one (docs/cloud-team.md, rotation).
	CtxSigningKeys = "buyflow:signingKeys"
	// CtxSigningKey is the name, among CtxSigningKeys, of the key the functions sign with
	// (default: the first).
	CtxSigningKey = "buyflow:signingKey"
	// ctxSigningKeysPublished is the retired list of KMS key ARNs the JWKS also published; a
	// deploy that still sets it is refused (those keys had no grant; the stack holds the next
	// key itself now).
	ctxSigningKeysPublished = "buyflow:signingKeysPublished"
	// CtxCallerURI is the `caller` URI sent to governance agents (default: the API's URL).
	CtxCallerURI = "buyflow:callerUri"
	// CtxThrottleRate and CtxThrottleBurst are the API stage's default throttling (requests per
	// second, default 50, and burst, default 100).
	CtxThrottleRate  = "buyflow:throttleRate"
	CtxThrottleBurst = "buyflow:throttleBurst"
	// CtxReconcileMinutes is the period of the reconciliation schedule, in minutes (default 1:
	// the sweep is how a buy without webhooks learns that its seller finished).
	// It only applies when the topology declares a "reconcile" function.
	CtxReconcileMinutes = "buyflow:reconcileMinutes"
	// CtxSandbox (true/false, default false) deploys the sandbox next to the stack: the
	// simulated seller and governance agents of topology.Sandbox behind Function URLs,
	// registered as sandbox-seller and sandbox-governance, for `buyflow smoke`. Never in
	// production: deploy again without it to remove them.
	CtxSandbox = "buyflow:sandbox"
)

// Config is the deploy-time configuration of one stack, read from the CDK context.
type Config struct {
	StackName         string
	Dev               bool
	AssetRoot         string
	LogRetentionDays  int
	Tracing           bool
	AlarmEmail        string
	Agents            string
	Operators         string
	CapabilitiesHours int
	ApprovalPolicy    string
	RunConfig         string
	CallerURI         string
	// SigningKeys and SigningKey: see CtxSigningKeys, CtxSigningKey.
	SigningKeys      []string
	SigningKey       string
	ThrottleRate     float64
	ThrottleBurst    float64
	ReconcileMinutes int
	Sandbox          bool
}

// DefaultConfig is the configuration with no context set.
func DefaultConfig() Config {
	return Config{
		StackName:         "Buyflow",
		AssetRoot:         "bin",
		Tracing:           true,
		LogRetentionDays:  90,
		ThrottleRate:      50,
		ThrottleBurst:     100,
		ReconcileMinutes:  1,
		Operators:         "[]",
		CapabilitiesHours: 6,
		SigningKeys:       []string{"1"},
		SigningKey:        "1",
	}
}

// ConfigFromContext reads the buyflow:* context keys from node over DefaultConfig. Values may
// be JSON-typed (cdk.json) or strings (-c on the command line).
func ConfigFromContext(node constructs.Node) (Config, error) {
	cfg := DefaultConfig()
	get := func(key string) (string, bool) {
		v := node.TryGetContext(&key)
		if v == nil {
			return "", false
		}
		switch t := v.(type) {
		case string:
			return t, true
		case bool:
			return strconv.FormatBool(t), true
		case float64:
			return strconv.FormatFloat(t, 'f', -1, 64), true
		case []any: // a list in cdk.json: comma-separated, as on the command line
			parts := make([]string, len(t))
			for i, e := range t {
				parts[i] = fmt.Sprint(e)
			}
			return strings.Join(parts, ","), true
		default:
			return fmt.Sprint(t), true
		}
	}
	var errs []string
	str := func(key string, dst *string) {
		if v, ok := get(key); ok {
			*dst = v
		}
	}
	boolean := func(key string, dst *bool) {
		if v, ok := get(key); ok {
			b, err := strconv.ParseBool(v)
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s: %q is not a boolean", key, v))
				return
			}
			*dst = b
		}
	}
	number := func(key string, dst *float64) {
		if v, ok := get(key); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f <= 0 {
				errs = append(errs, fmt.Sprintf("%s: %q is not a positive number", key, v))
				return
			}
			*dst = f
		}
	}
	integer := func(key string, dst *int) {
		if v, ok := get(key); ok {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				errs = append(errs, fmt.Sprintf("%s: %q is not a positive integer", key, v))
				return
			}
			*dst = n
		}
	}
	str(CtxStackName, &cfg.StackName)
	boolean(CtxDev, &cfg.Dev)
	str(CtxAssetRoot, &cfg.AssetRoot)
	integer(CtxLogRetentionDays, &cfg.LogRetentionDays)
	boolean(CtxTracing, &cfg.Tracing)
	str(CtxAlarmEmail, &cfg.AlarmEmail)
	str(CtxAgents, &cfg.Agents)
	str(CtxOperators, &cfg.Operators)
	integer(CtxCapabilitiesHours, &cfg.CapabilitiesHours)
	str(CtxApprovalPolicy, &cfg.ApprovalPolicy)
	str(CtxRunConfig, &cfg.RunConfig)
	if v, ok := get(CtxSigningKeys); ok {
		cfg.SigningKeys = nil
		for _, name := range strings.Split(v, ",") {
			cfg.SigningKeys = append(cfg.SigningKeys, strings.TrimSpace(name))
		}
		cfg.SigningKey = cfg.SigningKeys[0]
	}
	str(CtxSigningKey, &cfg.SigningKey)
	if _, ok := get(ctxSigningKeysPublished); ok {
		errs = append(errs, ctxSigningKeysPublished+" is retired: the stack holds the next key itself ("+CtxSigningKeys+", "+
			CtxSigningKey+"; docs/cloud-team.md, rotation)")
	}
	str(CtxCallerURI, &cfg.CallerURI)
	number(CtxThrottleRate, &cfg.ThrottleRate)
	number(CtxThrottleBurst, &cfg.ThrottleBurst)
	integer(CtxReconcileMinutes, &cfg.ReconcileMinutes)
	boolean(CtxSandbox, &cfg.Sandbox)
	if len(errs) > 0 {
		return cfg, fmt.Errorf("context: %s", strings.Join(errs, "; "))
	}
	return cfg, nil
}
