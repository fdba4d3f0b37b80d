// Command campaign is the Lambda of the Campaign state machine: action "sync_plans" (push the
// campaign's plan to its governance agent), "close" (fail the legs that never started when that
// failed), "release" (where each leg starts; the approval policy's threshold on the campaign's
// total), "leg" (a leg's status), "settle" (the campaign's outcome and, under
// all_or_nothing, the placed legs to cancel) and "fail" (a step of the campaign that failed,
// recorded with its reason).
package main

import (
	"context"

	"github.com/buyflow/buyflow/functions/internal/agentclient"
	"github.com/buyflow/buyflow/functions/internal/keywire"
	"github.com/buyflow/buyflow/functions/internal/wire"
	"github.com/buyflow/buyflow/internal/campaign"
)

func main() { wire.Main(run) }

func run(ctx context.Context, getenv func(string) string) error {
	c, err := wire.Load("campaign", getenv)
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
	wire.Start(c, campaign.NewSettler(c.Ledger(), client, c.Env.ApprovalPolicy).Handle) // blocks
	return nil
}
