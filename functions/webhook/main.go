// Command webhook serves POST /v1/webhooks/adcp/{operation_id}: seller task updates,
// authenticated per seller (RFC 9421 or the seller's legacy mode), deduplicated, applied forward
// only, and waking the parked AwaitSeller task.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	sfnapi "github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/buyflow/buyflow/internal/agents"
	"github.com/buyflow/buyflow/internal/awsenv"
	"github.com/buyflow/buyflow/internal/config"
	"github.com/buyflow/buyflow/internal/httpapi"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/logging"
	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/secrets"
	"github.com/buyflow/buyflow/internal/sfn"
	"github.com/buyflow/buyflow/internal/topology"
	"github.com/buyflow/buyflow/internal/webhookrx"
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
	secretPrefix := env.Required(topology.EnvAgentsSecretPrefix)
	// Optional until the topology passes them: the public root the create stage registered
	// (exact target URIs behind custom domains; http for local stacks) and the timings.
	publicBase := env.Optional(topology.EnvPublicBaseURL, "")
	runCfg := workflow.DefaultRunConfig()
	env.JSON(topology.EnvRunConfig, false, &runCfg)
	env.Check(topology.EnvRunConfig, runCfg.Validate())
	if err := env.Err(); err != nil {
		return err
	}

	awsCfg, err := awsenv.Load(getenv)
	if err != nil {
		return fmt.Errorf("load aws config: %w", err)
	}
	ddb := dynamodb.NewFromConfig(awsCfg)
	store := ledger.New(ddb, table)
	registry, err := agents.Open(ctx, ddb, table, secretPrefix)
	if err != nil {
		return err
	}
	// A seller's verifier is built on its first webhook (secrets read then, JWKS fetched and
	// cached by internal/webhook) and again when the registry changes its settings; (keyid,
	// nonce) replays are recorded in the ledger for every instance.
	verifiers := &webhookrx.RegistryVerifiers{Registry: registry, Secrets: secrets.New(secretsmanager.NewFromConfig(awsCfg)),
		Options: webhookrx.VerifierOptions{Replay: store, AllowHTTP: strings.HasPrefix(publicBase, "http://"), Now: time.Now}}
	rec := metrics.New(os.Stdout, metrics.Namespace, time.Now)
	svc, err := webhookrx.New(webhookrx.Config{
		Ledger: store, Operations: store, Sellers: verifiers,
		// Completing a task needs no state machine ARN.
		Tasks:     sfn.New(sfnapi.NewFromConfig(awsCfg), ""),
		RunConfig: runCfg, PublicBaseURL: publicBase, Now: time.Now, Metrics: rec,
	})
	if err != nil {
		return err
	}
	lambda.Start(metrics.Flushing(rec, httpapi.Recovering(rec, svc.HandleHTTP))) // blocks
	return nil
}
