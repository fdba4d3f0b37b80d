// Command submit is the buyer-facing API: POST /v1/media-buys (validate, claim the
// Idempotency-Key, lock the PO number, create the operation, start the execution) and the
// tenant-scoped reads GET /v1/media-buys, /v1/media-buys/{id} and /v1/media-buys/{id}/events.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	sfnapi "github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/buyflow/buyflow/internal/awsenv"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/adcpschemas"
	"github.com/buyflow/buyflow/internal/agents"
	"github.com/buyflow/buyflow/internal/config"
	"github.com/buyflow/buyflow/internal/httpapi"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/logging"
	"github.com/buyflow/buyflow/internal/mediabuy"
	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/sfn"
	"github.com/buyflow/buyflow/internal/topology"
	"github.com/buyflow/buyflow/internal/workflow"
)

func main() {
	slog.SetDefault(logging.New())
	if err := run(context.Background(), os.Getenv); err != nil {
		slog.Error("cold start failed", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, getenv func(string) string) error {
	env := config.New(getenv)
	table := env.Required(topology.EnvTableName)
	smARN := env.Required(topology.EnvStateMachineARN)
	devHeader := env.Optional(topology.EnvLocalTenantHeader, "")
	secretPrefix := env.Required(topology.EnvAgentsSecretPrefix)
	run := workflow.DefaultRunConfig()
	env.JSON(topology.EnvRunConfig, false, &run)
	env.Check(topology.EnvRunConfig, run.Validate())
	if err := env.Err(); err != nil {
		return err
	}

	// Unpacked and compiled on the first validation, off the cold path.
	validator := adcp.NewLazyValidator(adcpschemas.FS)
	awsCfg, err := awsenv.Load(getenv)
	if err != nil {
		return fmt.Errorf("load aws config: %w", err)
	}
	ddb := dynamodb.NewFromConfig(awsCfg)
	// Submit reads the agents a buy names as stored now (Cache.Current): no load at cold start.
	registry := agents.ForFunction(ddb, table, secretPrefix)
	svc := mediabuy.New(
		ledger.New(ddb, table),
		sfn.New(sfnapi.NewFromConfig(awsCfg), smARN),
		registry.Submittable,
		validator,
		mediabuy.Config{Run: run, StateMachineARN: smARN},
	)
	rec := metrics.New(os.Stdout, metrics.Namespace, time.Now)
	lambda.Start(metrics.Flushing(rec, httpapi.Recovering(rec, httpapi.MediaBuysHandler(svc, devHeader, slog.Default())))) // blocks
	return nil
}
