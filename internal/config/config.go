// Package config is the one reader of a function's environment: Load reads exactly the
// variables internal/topology declares for that function, once per cold start, into a typed
// Env, and reports every problem together, so a misconfigured deployment fails its first
// invocation with one clear message instead of one variable at a time (or, worse, a failed
// execution in production when a variable is read late).
package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/buyflow/buyflow/internal/approvalpolicy"
	"github.com/buyflow/buyflow/internal/topology"
	"github.com/buyflow/buyflow/internal/workflow"
)

// Env is what one function reads from its environment. A field whose variable topology does
// not declare for the function stays empty.
type Env struct {
	// Function is the function's name in the topology.
	Function string
	// TableName is the ledger table (BUYFLOW_TABLE_NAME).
	TableName string
	// StateMachineARN is the MediaBuy state machine (BUYFLOW_STATE_MACHINE_ARN).
	StateMachineARN string
	// CampaignStateMachineARN is the Campaign state machine (BUYFLOW_CAMPAIGN_STATE_MACHINE_ARN).
	CampaignStateMachineARN string
	// Operators are the IAM principals who may manage the agent registry (BUYFLOW_OPERATORS, a
	// JSON array of user or role ARNs).
	Operators []string
	// AgentSecretPrefix is the prefix every agent secret must lie under
	// (BUYFLOW_AGENT_SECRET_PREFIX): the only secrets the function's role may read.
	AgentSecretPrefix string
	// LinkKeySecret names the approval-link signing keys secret (BUYFLOW_LINK_KEY_SECRET).
	LinkKeySecret string
	// SlackSecret names the Slack bot token or webhook secret (BUYFLOW_SLACK_SECRET).
	SlackSecret string
	// RouteKeySecret names the secret of the routes in seller webhook URLs
	// (BUYFLOW_ROUTE_KEY_SECRET; internal/webhookroute).
	RouteKeySecret string
	// PublicBaseURL is the HTTP API's root, without a trailing slash, for links and webhooks
	// (BUYFLOW_PUBLIC_BASE_URL): an absolute http(s) URL without query, fragment or user info.
	PublicBaseURL string
	// ApprovalPolicy is the approval policy (BUYFLOW_APPROVAL_POLICY), parsed and validated by
	// approvalpolicy.Parse, the parser infra checks the buyflow:approvalPolicy value with.
	ApprovalPolicy approvalpolicy.Policy
	// CallerURI is the caller sent to governance agents (BUYFLOW_CALLER_URI), an absolute URI.
	CallerURI string
	// DevTenantHeader, on the local stack only, names the header the tenant is taken from
	// (BUYFLOW_DEV_TENANT_HEADER); optional, never set by infra.
	DevTenantHeader string
	// EventBusName is the status events' EventBridge bus (BUYFLOW_EVENT_BUS_NAME).
	EventBusName string
	// SweepQueueURL is the sweep's shard queue (BUYFLOW_SWEEP_QUEUE_URL).
	SweepQueueURL string
	// SigningKey names the request-signing key (BUYFLOW_SIGNING_KEY, optional; internal/signingkey).
	SigningKey string
	// SigningKeysPublished names further keys the JWKS publishes (BUYFLOW_SIGNING_KEYS_PUBLISHED,
	// optional, comma-separated): the next key before it signs, the previous until its
	// signatures have expired.
	SigningKeysPublished string
	// Run is the workflow's timings (BUYFLOW_RUN_CONFIG, optional): the defaults with what the
	// variable sets, validated.
	Run workflow.RunConfig
}

// Load reads the variables topology declares for the function fn through getenv (os.Getenv in
// a Lambda, a map in tests) and returns every problem at once: missing required variables,
// URLs that are not, a run configuration or an approval policy that does not decode or validate.
// With an error, the Env still holds every well-formed value, so that a caller parsing one of
// them further (the operators) reports its problems together with these.
func Load(fn string, getenv func(string) string) (Env, error) {
	f, ok := topology.App.Function(fn)
	if !ok {
		return Env{}, fmt.Errorf("config: no function %q in the topology", fn)
	}
	env := Env{Function: fn, Run: workflow.DefaultRunConfig()}
	var missing []string
	var errs []error
	for _, name := range f.Env {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			if !topology.Optional(name) {
				missing = append(missing, name)
			}
			continue
		}
		if err := env.set(name, v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	if len(missing) > 0 {
		errs = append([]error{fmt.Errorf("missing environment variables: %s", strings.Join(missing, ", "))}, errs...)
	}
	if err := errors.Join(errs...); err != nil {
		return env, fmt.Errorf("config of %s: %w", fn, err)
	}
	return env, nil
}

// set stores the value v of the variable name, checking its form.
func (e *Env) set(name, v string) error {
	if field := e.plain(name); field != nil {
		*field = v
		return nil
	}
	switch name {
	case topology.EnvOperators:
		var ops []string
		if err := json.Unmarshal([]byte(v), &ops); err != nil {
			return fmt.Errorf("is not a JSON array of IAM ARNs: %w", err)
		}
		e.Operators = ops
	case topology.EnvApprovalPolicy:
		p, err := approvalpolicy.Parse([]byte(v))
		if err != nil {
			return err
		}
		e.ApprovalPolicy = p
	case topology.EnvPublicBaseURL:
		if err := checkBaseURL(v); err != nil {
			return err
		}
		e.PublicBaseURL = strings.TrimRight(v, "/")
	case topology.EnvCallerURI:
		if u, err := url.Parse(v); err != nil || u.Scheme == "" {
			return errors.New("must be an absolute URI")
		}
		e.CallerURI = v
	case topology.EnvRunConfig:
		run := e.Run
		dec := json.NewDecoder(strings.NewReader(v))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&run); err != nil {
			return fmt.Errorf("is not a run configuration: %w", err)
		}
		if err := run.Validate(); err != nil {
			return err
		}
		e.Run = run
	default:
		return errors.New("topology declares it but config does not know it")
	}
	return nil
}

// plain is the field of a variable whose value is kept as it is; nil for the others.
func (e *Env) plain(name string) *string {
	return map[string]*string{
		topology.EnvTableName:            &e.TableName,
		topology.EnvSweepQueueURL:        &e.SweepQueueURL,
		topology.EnvStateMachineARN:      &e.StateMachineARN,
		topology.EnvCampaignsARN:         &e.CampaignStateMachineARN,
		topology.EnvAgentsSecretPrefix:   &e.AgentSecretPrefix,
		topology.EnvLinkKeySecret:        &e.LinkKeySecret,
		topology.EnvSlackSecret:          &e.SlackSecret,
		topology.EnvRouteKeySecret:       &e.RouteKeySecret,
		topology.EnvLocalTenantHeader:    &e.DevTenantHeader,
		topology.EnvEventBusName:         &e.EventBusName,
		topology.EnvSigningKey:           &e.SigningKey,
		topology.EnvSigningKeysPublished: &e.SigningKeysPublished,
	}[name]
}

// checkBaseURL checks a public base URL that links and webhook addresses are built on: absolute
// http(s), no query, fragment or user info.
func checkBaseURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return errors.New("must be an absolute http(s) URL without query, fragment or user info")
	}
	return nil
}
