// Command submit is the buyer-facing API: POST /v1/media-buys (validate, claim the
// Idempotency-Key, lock the PO number, create the operation, start the execution), POST
// /v1/campaigns (the same for every leg of a campaign) and the tenant-scoped reads of both.
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
	"github.com/buyflow/buyflow/internal/campaign"
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
	campaignsARN := env.Required(topology.EnvCampaignsARN)
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
	sellers := agentLookup(registry)
	sfnClient := sfnapi.NewFromConfig(awsCfg)
	buys := mediabuy.New(store, sfn.New(sfnClient, smARN), sellers, validator,
		mediabuy.Config{Run: run, StateMachineARN: smARN})
	campaigns := campaign.New(store, buys, sfn.New(sfnClient, campaignsARN), sellers, validator,
		campaign.Config{Run: run, MediaBuyStateMachineARN: smARN})
	rec := metrics.New(os.Stdout, metrics.Namespace, time.Now)
	lambda.Start(metrics.Flushing(rec, httpapi.Recovering(rec, httpapi.BuyerAPI(buys, campaigns, devHeader, slog.Default())))) // blocks
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
