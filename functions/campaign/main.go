// Command campaign is the Lambda of the Campaign state machine: action "sync_plans" (push the
// campaign's plan to its governance agent), "close" (fail the legs that never started when that
// failed), "leg" (a leg's status) and "settle" (the campaign's outcome and, under
// all_or_nothing, the placed legs to cancel).
package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/adcpschemas"
	"github.com/buyflow/buyflow/internal/awsenv"
	"github.com/buyflow/buyflow/internal/campaign"
	"github.com/buyflow/buyflow/internal/config"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/logging"
	"github.com/buyflow/buyflow/internal/secrets"
	"github.com/buyflow/buyflow/internal/stages"
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
	agents := env.Required(topology.EnvAgentsConfig)
	prefix := env.Optional(topology.EnvAgentsSecretPrefix, "")
	if err := env.Err(); err != nil {
		return err
	}
	awsCfg, err := awsenv.Load(getenv)
	if err != nil {
		return fmt.Errorf("load aws config: %w", err)
	}
	// Unpacked and compiled on the first validation, off the cold path.
	client, err := stages.NewAgentClient(agents, prefix, secrets.New(secretsmanager.NewFromConfig(awsCfg)), adcp.NewLazyValidator(adcpschemas.FS))
	if err != nil {
		return err
	}
	lambda.Start(campaign.NewSettler(ledger.New(dynamodb.NewFromConfig(awsCfg), table), client).Handle) // blocks
	return nil
}
