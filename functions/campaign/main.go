// Command campaign is the Lambda of the Campaign state machine: action "sync_plans" (push the
// campaign's plan to its governance agent), "close" (fail the legs that never started when that
// failed), "release" (where each leg starts; the approval policy's threshold on the campaign's
// total), "leg" (a leg's status) and "settle" (the campaign's outcome and, under
// all_or_nothing, the placed legs to cancel).
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/buyflow/buyflow/functions/internal/agentwire"
	"github.com/buyflow/buyflow/functions/internal/wire"
	"github.com/buyflow/buyflow/internal/approvalpolicy"
	"github.com/buyflow/buyflow/internal/campaign"
	"github.com/buyflow/buyflow/internal/config"
	"github.com/buyflow/buyflow/internal/metrics"
)

func main() { wire.Main(run) }

func run(ctx context.Context, getenv func(string) string) error {
	var policy approvalpolicy.Policy
	c, err := wire.Load("campaign", getenv,
		func(env config.Env) (err error) { policy, err = approvalpolicy.Parse(env.ApprovalPolicy); return err })
	if err != nil {
		return err
	}
	client, err := agentwire.GuardedClient(ctx, c)
	if err != nil {
		return err
	}
	lambda.Start(metrics.Flushing(c.Metrics, campaign.NewSettler(c.Ledger(), client, policy).Handle)) // blocks
	return nil
}
