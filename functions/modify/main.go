// Command modify is the Lambda of a change to a placed buy, in the MediaBuy state machine:
// actions check_change (governance, phase modification), update (update_media_buy, write-ahead
// intent), apply (the buy's new state, forward-only) and fail_change.
package main

import (
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/buyflow/buyflow/internal/logging"
	"github.com/buyflow/buyflow/internal/modifyfn"
)

func main() {
	slog.SetDefault(logging.New())
	svc, err := modifyfn.FromEnv(os.Getenv)
	if err != nil {
		slog.Error("cold start failed", "err", err)
		os.Exit(1)
	}
	lambda.Start(svc.Handle)
}
