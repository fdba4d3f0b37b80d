// Command agents serves the operators' agent registry: the IAM-only routes under
// /v1/operator/agents (add, update, disable, enable, list, show, check capabilities), the
// deploy's seed (a CloudFormation custom resource carrying the CDK context's agents) and the
// scheduled get_adcp_capabilities check of every enabled agent.
package main

import (
	"context"

	"github.com/buyflow/buyflow/functions/internal/agentclient"
	"github.com/buyflow/buyflow/functions/internal/keywire"
	"github.com/buyflow/buyflow/functions/internal/wire"
	"github.com/buyflow/buyflow/internal/agents"
	"github.com/buyflow/buyflow/internal/config"
	"github.com/buyflow/buyflow/internal/registry"
)

func main() { wire.Main(run) }

func run(ctx context.Context, getenv func(string) string) error {
	c, err := wire.Load("agents", getenv, func(env config.Env) error { return agents.CheckOperators(env.Operators) })
	if err != nil {
		return err
	}
	store := registry.NewStore(c.DynamoDB(), c.Env.TableName)
	// The prober reads each agent straight from the store: it runs right after a change. An
	// operator's check is not held back by the agent's circuit breaker.
	signer, err := keywire.RequestSigner(ctx, c)
	if err != nil {
		return err
	}
	prober, err := agentclient.Client(store, c.Secrets(), nil, signer)
	if err != nil {
		return err
	}
	svc, err := agents.New(agents.Config{Registry: store, Prober: prober, Signer: signer, SecretPrefix: c.Env.AgentSecretPrefix, Secrets: c.Secrets(),
		Operators: c.Env.Operators, DevTenantHeader: c.Env.DevTenantHeader, Metrics: c.Metrics})
	if err != nil {
		return err
	}
	wire.Start(c, svc.Invoke) // blocks
	return nil
}
