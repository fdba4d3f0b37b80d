// Package agents builds a function's view of the configured AdCP agents once per cold start:
// the registry from BUYFLOW_AGENTS, checked against the function's secret prefix, and the AdCP
// client over it. It is apart from package wire so that the functions without agents (notify,
// approve) do not link the MCP client.
package agents

import (
	"errors"
	"fmt"
	"strings"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/adcpschemas"
	"github.com/buyflow/buyflow/internal/config"
	"github.com/buyflow/buyflow/internal/topology"
)

// Registry parses env's agent registry and checks that every secret it names (each agent's
// credential_ref, its webhook's HMAC and Bearer secrets) lies under env's secret prefix, the
// only secrets the function's role may read; every agent outside it is reported. An absent
// registry (config.Load reports it missing) is nil.
func Registry(env config.Env) (*adcp.Registry, error) {
	if len(env.Agents) == 0 {
		return nil, nil
	}
	reg, err := adcp.ParseRegistry(env.Agents)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", topology.EnvAgentsConfig, err)
	}
	if env.AgentSecretPrefix == "" {
		return reg, nil
	}
	var errs []error
	for _, id := range reg.IDs() {
		a, err := reg.Agent(id)
		if err != nil {
			return nil, err
		}
		refs := map[string]string{"credential_ref": a.CredentialRef}
		if a.Webhook != nil {
			refs["webhook secret"], refs["webhook bearer secret"] = a.Webhook.HMACSecretRef, a.Webhook.BearerSecretRef
		}
		for what, ref := range refs {
			if ref != "" && !strings.HasPrefix(ref, env.AgentSecretPrefix) {
				errs = append(errs, fmt.Errorf("agent %s: %s %s is not under %s", id, what, ref, env.AgentSecretPrefix))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%s: %w", topology.EnvAgentsConfig, err)
	}
	return reg, nil
}

// Client is the AdCP client over reg, bearer credentials resolved through creds (Secrets
// Manager). Each tool's request schema is compiled on that tool's first call, not here:
// compiling every request schema took ~70 ms of CPU, most of a cold start, while an invocation
// calls one or two tools.
func Client(reg *adcp.Registry, creds adcp.Credentials) (*adcp.Client, error) {
	return adcp.New(adcp.Options{Registry: reg, Credentials: creds, Validator: adcp.NewLazyValidator(adcpschemas.FS)})
}

// Parse is the parse step of wire.Load for a function with agents: it keeps env's checked
// registry in *into, so that its problems are reported with the environment's.
func Parse(into **adcp.Registry) func(config.Env) error {
	return func(env config.Env) (err error) {
		*into, err = Registry(env)
		return err
	}
}
