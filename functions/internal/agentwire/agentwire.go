// Package agentwire loads a function's agent registry once per cold start: the registry in the
// ledger table (internal/registry: cached, agents whose secrets lie outside the function's
// prefix left out). It is apart from package wire so that the functions without agents (notify,
// approve) do not link it, and apart from agentclient so that a function that reads the
// registry but calls no agent (webhook) does not link the AdCP request validator.
package agentwire

import (
	"context"

	"github.com/buyflow/buyflow/functions/internal/wire"
	"github.com/buyflow/buyflow/internal/registry"
)

// Registry is the function's agent registry, loaded now: a missing table or permission fails
// the cold start rather than the first invocation.
func Registry(ctx context.Context, c *wire.Cold) (*registry.Cache, error) {
	return registry.Open(ctx, c.DynamoDB(), c.Env.TableName, c.Env.AgentSecretPrefix)
}
