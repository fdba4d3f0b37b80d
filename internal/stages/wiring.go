package stages

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/agents"
	"github.com/buyflow/buyflow/internal/topology"
)

// LoadEnv reads every environment variable topology lists for the function named fn and
// reports all the missing ones together; it also checks the URLs among them.
func LoadEnv(fn string, getenv func(string) string) (map[string]string, error) {
	f, ok := topology.App.Function(fn)
	if !ok {
		return nil, fmt.Errorf("config: no function %q in the topology", fn)
	}
	env := make(map[string]string, len(f.Env))
	var missing []string
	for _, name := range f.Env {
		v := strings.TrimSpace(getenv(name))
		if v == "" {
			missing = append(missing, name)
		}
		env[name] = v
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("config: missing environment variables: %s", strings.Join(missing, ", "))
	}
	var errs []error
	if v, ok := env[topology.EnvPublicBaseURL]; ok {
		if u, err := url.Parse(v); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			errs = append(errs, fmt.Errorf("config: %s must be an absolute http(s) URL without query, fragment or user info", topology.EnvPublicBaseURL))
		}
	}
	if v, ok := env[topology.EnvCallerURI]; ok {
		if u, err := url.Parse(v); err != nil || u.Scheme == "" {
			errs = append(errs, fmt.Errorf("config: %s must be an absolute URI", topology.EnvCallerURI))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return env, nil
}

// NewAgentClient builds a stage's AdCP client once per cold start: the agent registry read
// from the store in table (internal/agents: cached, reloaded after a short TTL, agents whose
// secrets lie outside secretPrefix left out: the function may read only those), bearer
// credentials resolved through creds (Secrets Manager), and the request-schema validator v. v
// compiles each tool's schema on that tool's first call, not here: compiling every request
// schema took ~70 ms of CPU, most of a cold start, while an invocation calls one or two tools.
func NewAgentClient(ctx context.Context, api agents.API, table, secretPrefix string, creds adcp.Credentials, v *adcp.Validator) (*adcp.Client, error) {
	reg, err := agents.Open(ctx, api, table, secretPrefix)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return adcp.New(adcp.Options{Agents: reg, Credentials: creds, Validator: v})
}
