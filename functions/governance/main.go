// Command governance is the governance stage Lambda of the MediaBuy state machine: action
// "check" (CheckGovernance), "report" (ReportOutcome) and "fail" (RecordFailure).
package main

import (
	"context"

	"github.com/buyflow/buyflow/functions/internal/agentclient"
	"github.com/buyflow/buyflow/functions/internal/keywire"
	"github.com/buyflow/buyflow/functions/internal/wire"
	"github.com/buyflow/buyflow/internal/governance"
	"github.com/buyflow/buyflow/internal/stage"
)

func main() { wire.Main(run) }

func run(ctx context.Context, getenv func(string) string) error {
	c, err := wire.Load("governance", getenv)
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
	governanceStage := governance.New(c.Ledger(), client, c.Env.ApprovalPolicy, c.Env.CallerURI, stage.Options{Metrics: c.Metrics})
	wire.Start(c, governanceStage.Handle) // blocks
	return nil
}
