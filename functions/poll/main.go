// Command poll is the seller wait-loop Lambda of the MediaBuy state machine: action "park"
// (AwaitSeller, stores the task token) and "poll" (PollSeller).
package main

import (
	"context"

	"github.com/buyflow/buyflow/functions/internal/agentclient"
	"github.com/buyflow/buyflow/functions/internal/keywire"
	"github.com/buyflow/buyflow/functions/internal/wire"
	"github.com/buyflow/buyflow/internal/poll"
	"github.com/buyflow/buyflow/internal/stage"
)

func main() { wire.Main(run) }

func run(ctx context.Context, getenv func(string) string) error {
	c, err := wire.Load("poll", getenv)
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
	pollStage := poll.New(c.Ledger(), client, c.Tasks(), stage.Options{Metrics: c.Metrics})
	wire.Start(c, pollStage.Handle) // blocks
	return nil
}
