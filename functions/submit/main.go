// Command submit is the buyer-facing API: POST /v1/media-buys (validate, claim the
// Idempotency-Key, lock the PO number, create the operation, start the execution) and the
// tenant-scoped reads GET /v1/media-buys, /v1/media-buys/{id} and /v1/media-buys/{id}/events;
// changes to a placed buy (PATCH /v1/media-buys/{id}, POST /v1/media-buys/{id}/cancel) and its
// delivery (GET /v1/media-buys/{id}/delivery).
package main

import (
	"context"
	"log/slog"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/buyflow/buyflow/functions/internal/wire"
	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/adcpschemas"
	registry "github.com/buyflow/buyflow/internal/agents"
	"github.com/buyflow/buyflow/internal/httpapi"
	"github.com/buyflow/buyflow/internal/mediabuy"
	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/modification"
)

func main() { wire.Main(run) }

func run(_ context.Context, getenv func(string) string) error {
	c, err := wire.Load("submit", getenv)
	if err != nil {
		return err
	}
	// Unpacked and compiled on the first validation, off the cold path.
	validator := adcp.NewLazyValidator(adcpschemas.FS)
	// Submit reads the agents a buy names as stored now (Cache.Current): no load at cold start.
	reg := registry.ForFunction(c.DynamoDB(), c.Env.TableName, c.Env.AgentSecretPrefix)
	svc := mediabuy.New(c.Ledger(), c.Tasks(), mediabuy.RegistryLookup(reg), validator,
		mediabuy.Config{Run: c.Env.Run, StateMachineARN: c.Env.StateMachineARN})
	changes := modification.NewRequests(c.Ledger(), c.Tasks(), modification.RequestConfig{Run: c.Env.Run, StateMachineARN: c.Env.StateMachineARN})
	buys := mediabuy.HTTPHandler(svc, c.Env.DevTenantHeader, slog.Default())
	lambda.Start(metrics.Flushing(c.Metrics, httpapi.Recovering(c.Metrics, modification.HTTPHandler(changes, buys, c.Env.DevTenantHeader, slog.Default())))) // blocks
	return nil
}
