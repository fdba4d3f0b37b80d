// Command publish is the ledger stream's Lambda: one status event on the event bus for every
// status change the ledger records.
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"

	"github.com/buyflow/buyflow/functions/internal/wire"
	"github.com/buyflow/buyflow/internal/publish"
)

func main() { wire.Main(run) }

func run(_ context.Context, getenv func(string) string) error {
	c, err := wire.Load("publish", getenv)
	if err != nil {
		return err
	}
	p := publish.New(eventbridge.NewFromConfig(c.AWS), c.Env.EventBusName, c.Env.PublicBaseURL)
	lambda.Start(p.Handle) // blocks
	return nil
}
