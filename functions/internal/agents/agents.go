// Package agents builds a function's view of the AdCP agents once per cold start: the agent
// registry in the ledger table (internal/agents: cached, agents whose secrets lie outside the
// function's prefix left out), and the AdCP client over it. It is apart from package wire so
// that the functions without agents (notify, approve) do not link the MCP client.
package agents

import (
	"context"

	"github.com/buyflow/buyflow/functions/internal/wire"
	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/adcpschemas"
	registry "github.com/buyflow/buyflow/internal/agents"
)

// Registry is the function's agent registry, loaded now: a missing table or permission fails
// the cold start rather than the first invocation.
func Registry(ctx context.Context, c *wire.Cold) (*registry.Cache, error) {
	return registry.Open(ctx, c.DynamoDB(), c.Env.TableName, c.Env.AgentSecretPrefix)
}

// Client is the AdCP client over reg, bearer credentials resolved through creds (Secrets
// Manager). Each tool's request schema is compiled on that tool's first call, not here:
// compiling every request schema took ~70 ms of CPU, most of a cold start, while an invocation
// calls one or two tools.
func Client(reg adcp.Agents, creds adcp.Credentials) (*adcp.Client, error) {
	return adcp.New(adcp.Options{Agents: reg, Credentials: creds, Validator: adcp.NewLazyValidator(adcpschemas.FS)})
}
