// Command create is the create stage Lambda of the MediaBuy state machine: action "create"
// (CreateMediaBuy, write-ahead intent) and "cancel" (Compensate).
package main

import (
	"context"

	"github.com/buyflow/buyflow/functions/internal/agentclient"
	"github.com/buyflow/buyflow/functions/internal/keywire"
	"github.com/buyflow/buyflow/functions/internal/wire"
	"github.com/buyflow/buyflow/internal/create"
	"github.com/buyflow/buyflow/internal/stage"
)

func main() { wire.Main(run) }

func run(ctx context.Context, getenv func(string) string) error {
	c, err := wire.Load("create", getenv)
	if err != nil {
		return err
	}
	signer, err := keywire.RequestSigner(ctx, c)
	if err != nil {
		return err
	}
	client, err := agentclient.GuardedClient(ctx, c, signer)
	if err != nil {
		return err
	}
	createStage := create.New(c.Ledger(), client, c.Env.CallerURI, c.Env.PublicBaseURL, stage.Options{Metrics: c.Metrics, Routes: c.Routes()})
	wire.Start(c, createStage.Handle) // blocks
	return nil
}
