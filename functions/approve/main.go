// Command approve serves GET and POST /v1/approvals/{approval_id}: the confirm page and the
// ledger-first decision that resumes the parked RequestApproval task; and the IAM-authorized
// approver routes under /v1/approver/approvals (the approvals waiting for the caller).
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
	"github.com/buyflow/buyflow/internal/awsenv"

	"github.com/buyflow/buyflow/internal/approvals"
	"github.com/buyflow/buyflow/internal/httpapi"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/logging"
	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/secrets"
	"github.com/buyflow/buyflow/internal/sfn"
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
	env, err := approvals.LoadEnv(getenv, topology.EnvTableName, topology.EnvLinkKeySecret, topology.EnvSlackSecret,
		topology.EnvPublicBaseURL, topology.EnvApprovalPolicy)
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
		// Completing a task needs no state machine ARN; approve only sends task results.
		Tasks: sfn.New(sfnapi.NewFromConfig(awsCfg), ""),
		Slack: sl, Delivery: delivery, Signer: signer, Now: time.Now, Metrics: rec,
		Policy: policy, BaseURL: env[topology.EnvPublicBaseURL], DevTenantHeader: getenv(topology.EnvLocalTenantHeader),
	})
	if err != nil {
		return err
	}
	lambda.Start(metrics.Flushing(rec, httpapi.Recovering(rec, svc.HandleHTTP))) // blocks
	return nil
}
