// Command submit is the buyer-facing API: POST /v1/media-buys (validate, claim the
// Idempotency-Key, lock the PO number, create the operation, start the execution), POST
// /v1/campaigns (the same for every leg of a campaign, run by one Campaign execution) and the
// tenant-scoped reads of both.
package main

import (
	"context"
	"log/slog"

	"github.com/aws/aws-lambda-go/lambda"
	sfnapi "github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/buyflow/buyflow/functions/internal/agents"
	"github.com/buyflow/buyflow/functions/internal/wire"
	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/adcpschemas"
	"github.com/buyflow/buyflow/internal/campaign"
	"github.com/buyflow/buyflow/internal/httpapi"
	"github.com/buyflow/buyflow/internal/mediabuy"
	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/sfn"
)

func main() { wire.Main(run) }

func run(_ context.Context, getenv func(string) string) error {
	var reg *adcp.Registry
	c, err := wire.Load("submit", getenv, agents.Parse(&reg))
	if err != nil {
		return err
	}
	// Unpacked and compiled on the first validation, off the cold path.
	validator := adcp.NewLazyValidator(adcpschemas.FS)
	sellers, store := agentLookup(reg), c.Ledger()
	buys := mediabuy.New(store, c.Tasks(), sellers, validator,
		mediabuy.Config{Run: c.Env.Run, StateMachineARN: c.Env.StateMachineARN})
	campaigns := campaign.New(store, buys, sfn.New(sfnapi.NewFromConfig(c.AWS), c.Env.CampaignStateMachineARN), sellers, validator,
		campaign.Config{Run: c.Env.Run, MediaBuyStateMachineARN: c.Env.StateMachineARN})
	api := httpapi.Prefixed("/v1/campaigns", campaign.HTTPHandler(campaigns, c.Env.DevTenantHeader, slog.Default()),
		mediabuy.HTTPHandler(buys, c.Env.DevTenantHeader, slog.Default()))
	lambda.Start(metrics.Flushing(c.Metrics, httpapi.Recovering(c.Metrics, api))) // blocks
	return nil
}

// agentLookup answers which configured agent an id names and in which role: the one seller
// lookup of a single buy and of a campaign's legs.
func agentLookup(r *adcp.Registry) mediabuy.AgentLookup {
	return func(id string) (string, bool) {
		a, err := r.Agent(id)
		if err != nil {
			return "", false
		}
		return string(a.Role), true
	}
}
