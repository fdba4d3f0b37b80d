// Command governance is the governance stage Lambda of the MediaBuy state machine: action
// "check" (CheckGovernance), "report" (ReportOutcome) and "fail" (RecordFailure).
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/buyflow/buyflow/functions/internal/agentwire"
	"github.com/buyflow/buyflow/functions/internal/wire"
	"github.com/buyflow/buyflow/internal/approvalpolicy"
	"github.com/buyflow/buyflow/internal/config"
	"github.com/buyflow/buyflow/internal/governance"
	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/stage"
)

func main() { wire.Main(run) }

func run(ctx context.Context, getenv func(string) string) error {
	var policy approvalpolicy.Policy
	c, err := wire.Load("governance", getenv,
		func(env config.Env) (err error) { policy, err = approvalpolicy.Parse(env.ApprovalPolicy); return err })
	if err != nil {
		return err
	}
	client, err := agentwire.GuardedClient(ctx, c)
	if err != nil {
		return err
	}
	governanceStage := governance.New(c.Ledger(), client, policy, c.Env.CallerURI, stage.Options{Metrics: c.Metrics})
	lambda.Start(metrics.Flushing(c.Metrics, governanceStage.Handle)) // blocks
	return nil
}
