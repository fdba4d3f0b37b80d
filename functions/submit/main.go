// Command submit is the buyer-facing API: POST /v1/media-buys (validate, claim the
// Idempotency-Key, lock the PO number, create the operation, start the execution) and the
// tenant-scoped reads GET /v1/media-buys, /v1/media-buys/{id} and /v1/media-buys/{id}/events;
// changes to a placed buy (PATCH /v1/media-buys/{id}, POST /v1/media-buys/{id}/cancel) and its
// delivery (GET /v1/media-buys/{id}/delivery).
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
	"github.com/buyflow/buyflow/internal/config"
	"github.com/buyflow/buyflow/internal/httpapi"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/logging"
	"github.com/buyflow/buyflow/internal/mediabuy"
	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/modification"
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
	agentsJSON := env.Required(topology.EnvAgentsConfig)
	run := workflow.DefaultRunConfig()
	env.JSON(topology.EnvRunConfig, false, &run)
	env.Check(topology.EnvRunConfig, run.Validate())
	var registry *adcp.Registry
	if agentsJSON != "" {
		var err error
		registry, err = adcp.ParseRegistry([]byte(agentsJSON))
		env.Check(topology.EnvAgentsConfig, err)
	}
	if err := env.Err(); err != nil {
		return err
	}

	// Unpacked and compiled on the first validation, off the cold path.
	validator := adcp.NewLazyValidator(adcpschemas.FS)
	awsCfg, err := awsenv.Load(getenv)
	if err != nil {
		return fmt.Errorf("load aws config: %w", err)
	}
	store := ledger.New(dynamodb.NewFromConfig(awsCfg), table)
	execs := sfn.New(sfnapi.NewFromConfig(awsCfg), smARN)
	svc := mediabuy.New(
		store,
		execs,
		agentLookup(registry),
		validator,
		mediabuy.Config{Run: run, StateMachineARN: smARN},
	)
	changes := modification.NewRequests(store, execs, modification.RequestConfig{Run: run, StateMachineARN: smARN})
	rec := metrics.New(os.Stdout, metrics.Namespace, time.Now)
	h := httpapi.ChangesHandler(changes, httpapi.MediaBuysHandler(svc, devHeader, slog.Default()), devHeader, slog.Default())
	lambda.Start(metrics.Flushing(rec, httpapi.Recovering(rec, h))) // blocks
	return nil
}

// agentLookup answers which configured agent an id names and in which role.
func agentLookup(r *adcp.Registry) mediabuy.AgentLookup {
	return func(id string) (string, bool) {
		a, err := r.Agent(id)
		if err != nil {
			return "", false
		}
		return string(a.Role), true
	}
}
