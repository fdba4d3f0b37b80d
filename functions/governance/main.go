// Command governance is the governance stage Lambda of the MediaBuy state machine: action
// "check" (CheckGovernance), "report" (ReportOutcome) and "fail" (RecordFailure).
package main

import (
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/buyflow/buyflow/internal/approvals"
	"github.com/buyflow/buyflow/internal/logging"
	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/stages"
)

func main() {
	slog.SetDefault(logging.New())
	if err := run(os.Getenv); err != nil {
		slog.Error("cold start failed", "err", err)
		os.Exit(1)
	}
}

func run(getenv func(string) string) error {
	svc, rec, err := stages.FromEnv("governance", getenv, func(raw []byte) (stages.Policy, error) {
		return approvals.ParsePolicy(raw)
	})
	if err != nil {
		return err
	}
	lambda.Start(metrics.Flushing(rec, svc.Governance)) // blocks
	return nil
}
