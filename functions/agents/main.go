// Command agents serves the operators' agent registry: the IAM-only routes under
// /v1/operator/agents (add, update, disable, enable, list, show, check capabilities), the
// deploy's seed (a CloudFormation custom resource carrying the CDK context's agents) and the
// scheduled get_adcp_capabilities check of every enabled agent.
package main

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/adcpschemas"
	"github.com/buyflow/buyflow/internal/agentops"
	"github.com/buyflow/buyflow/internal/agents"
	"github.com/buyflow/buyflow/internal/awsenv"
	"github.com/buyflow/buyflow/internal/config"
	"github.com/buyflow/buyflow/internal/logging"
	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/secrets"
	"github.com/buyflow/buyflow/internal/topology"
)

func main() {
	slog.SetDefault(logging.New())
	if err := run(os.Getenv); err != nil {
		slog.Error("cold start failed", "err", err)
		os.Exit(1)
	}
}

func run(getenv func(string) string) error {
	env := config.New(getenv)
	table := env.Required(topology.EnvTableName)
	secretPrefix := env.Required(topology.EnvAgentsSecretPrefix)
	var operators []string
	env.JSON(topology.EnvOperators, true, &operators)
	env.Check(topology.EnvOperators, agentops.CheckOperators(operators))
	devHeader := env.Optional(topology.EnvLocalTenantHeader, "")
	if err := env.Err(); err != nil {
		return err
	}
	awsCfg, err := awsenv.Load(getenv)
	if err != nil {
		return fmt.Errorf("load aws config: %w", err)
	}
	store := agents.NewStore(dynamodb.NewFromConfig(awsCfg), table)
	// The prober reads each agent straight from the store and caches nothing: it runs right
	// after a change, and a check must ask the agent, not remember its last answer.
	prober, err := adcp.New(adcp.Options{Agents: store, Credentials: secrets.New(secretsmanager.NewFromConfig(awsCfg)),
		Validator: adcp.NewLazyValidator(adcpschemas.FS), CapabilitiesTTL: time.Nanosecond})
	if err != nil {
		return err
	}
	rec := metrics.New(os.Stdout, metrics.Namespace, time.Now)
	svc, err := agentops.New(agentops.Config{Registry: store, Prober: prober, SecretPrefix: secretPrefix,
		Operators: operators, DevTenantHeader: devHeader, Metrics: rec})
	if err != nil {
		return err
	}
	lambda.Start(metrics.Flushing(rec, svc.Invoke)) // blocks
	return nil
}
