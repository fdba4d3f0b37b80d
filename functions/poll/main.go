// Command poll is the seller wait-loop Lambda of the MediaBuy state machine: action "park"
// (AwaitSeller, stores the task token) and "poll" (PollSeller).
package main

import (
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

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
	svc, rec, err := stages.FromEnv("poll", getenv, nil)
	if err != nil {
		return err
	}
	lambda.Start(metrics.Flushing(rec, svc.Poll)) // blocks
	return nil
}
