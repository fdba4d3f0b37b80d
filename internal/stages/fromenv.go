package stages

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	sfnapi "github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/adcpschemas"
	"github.com/buyflow/buyflow/internal/awsenv"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/secrets"
	"github.com/buyflow/buyflow/internal/sfn"
	"github.com/buyflow/buyflow/internal/topology"
)

// FromEnv builds the Service of the stage function fn (governance, create or poll) from its
// Lambda environment, once per cold start: the variables topology lists for fn (all missing
// ones reported together), the embedded AdCP schemas, the agent registry with credentials from
// Secrets Manager, the ledger, a task completer when topology says fn completes tasks, and a
// metrics recorder writing EMF lines to stdout (wrap the handler with metrics.Flushing).
// parsePolicy, when not nil, reads the approval policy from its variable after every variable
// was checked.
func FromEnv(fn string, getenv func(string) string, parsePolicy func([]byte) (Policy, error)) (*Service, *metrics.Recorder, error) {
	ctx := context.Background()
	env, err := LoadEnv(fn, getenv)
	if err != nil {
		return nil, nil, err
	}
	var policy Policy
	if parsePolicy != nil {
		if policy, err = parsePolicy([]byte(env[topology.EnvApprovalPolicy])); err != nil {
			return nil, nil, err
		}
	}
	// Unpacked and compiled on the first validation, off the cold path.
	validator := adcp.NewLazyValidator(adcpschemas.FS)
	awsCfg, err := awsenv.Load(getenv)
	if err != nil {
		return nil, nil, fmt.Errorf("load aws config: %w", err)
	}
	ddb := dynamodb.NewFromConfig(awsCfg)
	client, err := NewAgentClient(ctx, ddb, env[topology.EnvTableName], env[topology.EnvAgentsSecretPrefix],
		secrets.New(secretsmanager.NewFromConfig(awsCfg)), validator)
	if err != nil {
		return nil, nil, err
	}
	var tasks Tasks
	if f, _ := topology.App.Function(fn); f.CompletesTasks {
		tasks = sfn.New(sfnapi.NewFromConfig(awsCfg), env[topology.EnvStateMachineARN])
	}
	rec := metrics.New(os.Stdout, metrics.Namespace, time.Now)
	svc := New(ledger.New(ddb, env[topology.EnvTableName]), client, tasks, policy,
		Config{CallerURI: env[topology.EnvCallerURI], PublicBaseURL: env[topology.EnvPublicBaseURL], Now: time.Now, Metrics: rec})
	return svc, rec, nil
}
