// Command create is the create stage Lambda of the MediaBuy state machine: action "create"
// (CreateMediaBuy, write-ahead intent) and "cancel" (Compensate).
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/buyflow/buyflow/internal/awsenv"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/adcpschemas"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/logging"
	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/secrets"
	"github.com/buyflow/buyflow/internal/stages"
	"github.com/buyflow/buyflow/internal/topology"
)

func main() {
	slog.SetDefault(logging.New())
	if err := run(context.Background(), os.Getenv); err != nil {
		slog.Error("cold start failed", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, getenv func(string) string) error {
	env, err := stages.LoadEnv("create", getenv)
	if err != nil {
		return err
	}
	schemas, err := adcpschemas.FS()
	if err != nil {
		return err
	}
	validator, err := adcp.NewValidator(schemas)
	if err != nil {
		return fmt.Errorf("load AdCP schemas: %w", err)
	}
	awsCfg, err := awsenv.Load(getenv)
	if err != nil {
		return fmt.Errorf("load aws config: %w", err)
	}
	client, err := stages.NewAgentClient(env[topology.EnvAgentsConfig], env[topology.EnvAgentsSecretPrefix],
		secrets.New(secretsmanager.NewFromConfig(awsCfg)), validator)
	if err != nil {
		return err
	}

	rec := metrics.New(os.Stdout, metrics.Namespace, time.Now)
	svc := stages.New(ledger.New(dynamodb.NewFromConfig(awsCfg), env[topology.EnvTableName]), client, nil, nil,
		stages.Config{CallerURI: env[topology.EnvCallerURI], PublicBaseURL: env[topology.EnvPublicBaseURL], Now: time.Now, Metrics: rec})
	lambda.Start(metrics.Flushing(rec, svc.Create)) // blocks
	return nil
}
