// Command campaign is the Lambda of the Campaign state machine: action "leg" (a leg's status)
// and "settle" (the campaign's outcome and, under all_or_nothing, the placed legs to cancel).
// It reads the ledger and writes only a campaign's final status.
package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/buyflow/buyflow/internal/awsenv"
	"github.com/buyflow/buyflow/internal/campaign"
	"github.com/buyflow/buyflow/internal/config"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/logging"
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
	if err := env.Err(); err != nil {
		return err
	}
	awsCfg, err := awsenv.Load(getenv)
	if err != nil {
		return fmt.Errorf("load aws config: %w", err)
	}
	lambda.Start(campaign.NewSettler(ledger.New(dynamodb.NewFromConfig(awsCfg), table)).Handle) // blocks
	return nil
}
