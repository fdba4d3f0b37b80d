// Command submit is the buyer-facing API: POST /v1/media-buys (validate, claim the
// Idempotency-Key, lock the PO number, create the operation, start the execution) and the
// tenant-scoped reads GET /v1/media-buys, /v1/media-buys/{id} and /v1/media-buys/{id}/events;
// changes to a placed buy (PATCH /v1/media-buys/{id}, POST /v1/media-buys/{id}/cancel) and its
// delivery (GET /v1/media-buys/{id}/delivery); POST/GET /v1/campaigns (every leg of a
// campaign placed as a buy, run by one Campaign execution).
package main

import (
	"context"
	"log/slog"

	"github.com/buyflow/buyflow/functions/internal/wire"
	"github.com/buyflow/buyflow/internal/adcpschemas"
	"github.com/buyflow/buyflow/internal/adcpvalidate"
	"github.com/buyflow/buyflow/internal/buy"
	"github.com/buyflow/buyflow/internal/campaign"
	"github.com/buyflow/buyflow/internal/httpapi"
	"github.com/buyflow/buyflow/internal/modify"
	"github.com/buyflow/buyflow/internal/registry"
	"github.com/buyflow/buyflow/internal/sfn"
	"github.com/buyflow/buyflow/internal/submit"
	"github.com/buyflow/buyflow/internal/topology"
)

func main() { wire.Main(run) }

func run(_ context.Context, getenv func(string) string) error {
	c, err := wire.Load("submit", getenv)
	if err != nil {
		return err
	}
	// Unpacked and compiled on the first validation, off the cold path.
	validator := adcpvalidate.NewReleasesValidator(adcpschemas.Open)
	// Submit reads the agents a buy names as stored now (Cache.Current): no load at cold start.
	// A campaign's legs are looked up the same way.
	reg := registry.ForFunction(c.DynamoDB(), c.Env.TableName, c.Env.AgentSecretPrefix)
	// A seller that requires signed creates gets no buy while the deployment has no signing key.
	sellers, store := buy.RegistryLookup(reg, c.Env.SigningKey != ""), c.Ledger()
	placer := buy.NewPlacer(store, buy.PlaceConfig{Run: c.Env.Run, StateMachineARN: c.Env.StateMachineARN})
	buys := submit.New(store, c.Tasks(), placer, sellers, validator)
	campaigns := campaign.New(store, placer, buys, sfn.New(sfn.Connect(c.AWS), c.Env.CampaignStateMachineARN), sellers, validator,
		campaign.Config{Run: c.Env.Run, MediaBuyStateMachineARN: c.Env.StateMachineARN})
	changes := modify.NewRequests(c.Ledger(), c.Tasks(), modify.RequestConfig{Run: c.Env.Run, StateMachineARN: c.Env.StateMachineARN})
	api := httpapi.ByRouteKey(topology.App, submit.Routes(buys, c.Env.DevTenantHeader, slog.Default()),
		modify.Routes(changes, c.Env.DevTenantHeader, slog.Default()), campaign.Routes(campaigns, c.Env.DevTenantHeader, slog.Default()))
	wire.Start(c, httpapi.Recovering(c.Metrics, api)) // blocks
	return nil
}
