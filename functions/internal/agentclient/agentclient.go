// Package agentclient builds the AdCP client of a function that calls agents, once per cold
// start: over the function's registry (agentwire), with every request validated against the
// embedded AdCP schemas (internal/adcpvalidate) and, for calls on a buy's behalf, every exchange
// asked of the agents' circuit breakers first. It is apart from agentwire so that the JSON
// Schema library is linked only by the functions that send requests.
package agentclient

import (
	"context"
	"encoding/json"

	"github.com/buyflow/buyflow/functions/internal/agentwire"
	"github.com/buyflow/buyflow/functions/internal/wire"
	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/adcpschemas"
	"github.com/buyflow/buyflow/internal/adcpvalidate"
	"github.com/buyflow/buyflow/internal/breaker"
	"github.com/buyflow/buyflow/internal/registry"
	"github.com/buyflow/buyflow/internal/reqsign"
)

// breakers is the circuit breaker of every agent in reg, kept in the function's ledger table
// and shared with every other function that calls agents; each agent's thresholds are its
// registry settings' circuit_breaker (internal/breaker).
func breakers(c *wire.Cold, reg *registry.Cache) *breaker.Gate {
	g := breaker.New(c.Ledger(), func(ctx context.Context, id string) (json.RawMessage, error) {
		r, err := reg.Lookup(ctx, id)
		return r.Settings, err
	})
	g.Metrics = c.Metrics
	return g
}

// Client is the AdCP client over reg, bearer credentials resolved through creds (Secrets
// Manager), every exchange with an agent asked of guard first (nil: none), requests signed by
// signer where the agent asks (nil: buyflow has no request-signing key). Each tool's request
// schema is compiled on that tool's first call, not here: compiling every request schema took
// ~70 ms of CPU, most of a cold start, while an invocation calls one or two tools.
func Client(reg adcp.Agents, creds adcp.Credentials, guard adcp.Guard, signer *reqsign.Signer) (*adcp.Client, error) {
	return adcp.New(adcp.Options{Agents: reg, Credentials: creds, Guard: guard, RequestSigner: signer,
		Validator: adcpvalidate.NewReleasesValidator(adcpschemas.Open)})
}

// GuardedClient is what every function that calls agents on a buy's behalf builds at its cold
// start: the registry, loaded now, and the AdCP client over it with every exchange asked of the
// agents' circuit breakers first, signing with signer (keywire.RequestSigner; nil: nothing).
func GuardedClient(ctx context.Context, c *wire.Cold, signer *reqsign.Signer) (*adcp.Client, error) {
	reg, err := agentwire.Registry(ctx, c)
	if err != nil {
		return nil, err
	}
	return Guarded(c, reg, signer)
}

// Guarded is GuardedClient over a registry the function loaded itself (agentwire.Registry):
// for a function that reads the registry too (the sweep lists its sellers).
func Guarded(c *wire.Cold, reg *registry.Cache, signer *reqsign.Signer) (*adcp.Client, error) {
	return Client(reg, c.Secrets(), breakers(c, reg), signer)
}
