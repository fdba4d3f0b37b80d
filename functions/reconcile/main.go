// Command reconcile is the reconciliation sweep, invoked by EventBridge Scheduler every minute:
// it reads the status of every pending seller task (list_tasks, else task by task), records
// what moved on and wakes the workflow, fails operations whose task the seller does not know, records orphans
// and marks stuck operations (internal/reconcile; runbook in internal/reconcile/RUNBOOK.md); then
// it reads the delivery of the live buys that are due (internal/delivery).
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
	sfnapi "github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/adcpschemas"
	"github.com/buyflow/buyflow/internal/awsenv"
	"github.com/buyflow/buyflow/internal/config"
	"github.com/buyflow/buyflow/internal/delivery"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/logging"
	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/reconcile"
	"github.com/buyflow/buyflow/internal/secrets"
	"github.com/buyflow/buyflow/internal/sfn"
	"github.com/buyflow/buyflow/internal/stages"
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

func run(_ context.Context, getenv func(string) string) error {
	env := config.New(getenv)
	table := env.Required(topology.EnvTableName)
	agentsJSON := env.Required(topology.EnvAgentsConfig)
	secretPrefix := env.Required(topology.EnvAgentsSecretPrefix)
	stateMachineARN := env.Required(topology.EnvStateMachineARN)
	// The caller URI is listed for the agents' sake (the sweep sends no governance call).
	_ = env.Optional(topology.EnvCallerURI, "")
	runCfg := workflow.DefaultRunConfig()
	env.JSON(topology.EnvRunConfig, false, &runCfg)
	env.Check(topology.EnvRunConfig, runCfg.Validate())
	if err := env.Err(); err != nil {
		return err
	}
	// Unpacked and compiled on the first validation, off the cold path.
	validator := adcp.NewLazyValidator(adcpschemas.FS)
	awsCfg, err := awsenv.Load(getenv)
	if err != nil {
		return fmt.Errorf("load aws config: %w", err)
	}
	client, err := stages.NewAgentClient(agentsJSON, secretPrefix, secrets.New(secretsmanager.NewFromConfig(awsCfg)), validator)
	if err != nil {
		return err
	}
	ddb := dynamodb.NewFromConfig(awsCfg)
	sfnClient := sfnapi.NewFromConfig(awsCfg)
	svc, err := reconcile.New(reconcile.Config{
		Ledger: ledger.New(ddb, table), AdCP: client, Tasks: sfn.New(sfnClient, stateMachineARN),
		Progress:   &reconcile.TableProgress{API: ddb, Table: table, Now: time.Now},
		Executions: sfnClient, StateMachineARN: stateMachineARN, RunConfig: runCfg,
		Metrics: os.Stdout, Now: time.Now,
	})
	if err != nil {
		return err
	}
	// The sweep writes its own metrics; this recorder carries a recovered panic's count and the
	// delivery read's SpendOverBudget.
	rec := metrics.New(os.Stdout, metrics.Namespace, time.Now)
	reader := delivery.New(ledger.New(ddb, table), client, delivery.Config{Every: time.Duration(runCfg.DeliveryReadMinutes) * time.Minute, Metrics: rec})
	lambda.Start(metrics.Flushing(rec, delivery.AfterSweep(svc.Handle, reader))) // blocks
	return nil
}
