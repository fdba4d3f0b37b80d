// Command modify is the Lambda of a change to a placed buy, in the MediaBuy state machine:
// actions check_change (governance, phase modification), update (update_media_buy, write-ahead
// intent), apply (the buy's new state, forward-only) and fail_change.
package main

import (
	"context"

	"github.com/buyflow/buyflow/functions/internal/agentclient"
	"github.com/buyflow/buyflow/functions/internal/keywire"
	"github.com/buyflow/buyflow/functions/internal/wire"
	"github.com/buyflow/buyflow/internal/modify"
)

func main() { wire.Main(run) }

func run(ctx context.Context, getenv func(string) string) error {
	c, err := wire.Load(modify.Function, getenv)
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
	policy := c.Env.ApprovalPolicy
	changes, err := modify.NewPolicy(policy.ChangeIncreaseThreshold, policy.ChangeAnyThreshold, policy.Currency)
	if err != nil {
		return err
	}
	svc := modify.New(c.Ledger(), client, changes, modify.Config{CallerURI: c.Env.CallerURI, PublicBaseURL: c.Env.PublicBaseURL, Routes: c.Routes()})
	wire.Start(c, svc.Handle) // blocks
	return nil
}
