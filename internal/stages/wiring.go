package stages

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/buyflow/buyflow/internal/adcp"
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

// NewAgentClient builds a stage's AdCP client once per cold start: the agent registry from the
// BUYFLOW_AGENTS document, whose credential references must all lie under secretPrefix (the
// only secrets the function may read), bearer credentials resolved through creds (Secrets
// Manager), and the request-schema validator v. v compiles each tool's schema on that tool's
// first call, not here: compiling every request schema took ~70 ms of CPU, most of a cold
// start, while an invocation calls one or two tools.
func NewAgentClient(agentsJSON, secretPrefix string, creds adcp.Credentials, v *adcp.Validator) (*adcp.Client, error) {
	reg, err := adcp.ParseRegistry([]byte(agentsJSON))
	if err != nil {
		return nil, fmt.Errorf("config: %s: %w", topology.EnvAgentsConfig, err)
	}
	var errs []error
	for _, id := range reg.IDs() {
		a, err := reg.Agent(id)
		if err != nil {
			return nil, err
		}
		if secretPrefix != "" && !strings.HasPrefix(a.CredentialRef, secretPrefix) {
			errs = append(errs, fmt.Errorf("agent %s: credential_ref is not under %s", id, secretPrefix))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("config: %s: %w", topology.EnvAgentsConfig, err)
	}
	return adcp.New(adcp.Options{Registry: reg, Credentials: creds, Validator: v})
}
