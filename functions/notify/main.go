// Command notify is the notify stage Lambda: action "request" parks the RequestApproval task
// token in the ledger and posts the Slack request; action "expire" handles the approval timeout.
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

	"github.com/buyflow/buyflow/internal/approvals"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/logging"
	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/secrets"
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
	env, err := approvals.LoadEnv(getenv, topology.EnvTableName, topology.EnvLinkKeySecret,
		topology.EnvSlackSecret, topology.EnvPublicBaseURL, topology.EnvApprovalPolicy)
	if err != nil {
		return err
	}
	policy, err := approvals.ParsePolicy([]byte(env[topology.EnvApprovalPolicy]))
	if err != nil {
		return err
	}
	if err := approvals.CheckBaseURL(env[topology.EnvPublicBaseURL]); err != nil {
		return err
	}
	awsCfg, err := awsenv.Load(getenv)
	if err != nil {
		return fmt.Errorf("load aws config: %w", err)
	}
	sec := secrets.New(secretsmanager.NewFromConfig(awsCfg))
	signer, err := approvals.LoadSigner(ctx, sec, env[topology.EnvLinkKeySecret], time.Now)
	if err != nil {
		return err
	}
	sl, delivery, err := approvals.LoadSlack(ctx, sec, env[topology.EnvSlackSecret])
	if err != nil {
		return err
	}
	rec := metrics.New(os.Stdout, metrics.Namespace, time.Now)
	svc, err := approvals.New(approvals.Config{
		Ledger: ledger.New(dynamodb.NewFromConfig(awsCfg), env[topology.EnvTableName]),
		Slack:  sl, Delivery: delivery, Signer: signer, Policy: policy,
		BaseURL: env[topology.EnvPublicBaseURL], Now: time.Now, Metrics: rec,
	})
	if err != nil {
		return err
	}
	lambda.Start(metrics.Flushing(rec, svc.Notify)) // blocks
	return nil
}
