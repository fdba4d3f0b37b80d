package adcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sort"
	"strings"

	"github.com/buyflow/buyflow/internal/charclass"
)

// Role is what an agent does for buyflow.
type Role string

// Agent roles.
const (
	RoleSeller     Role = "seller"
	RoleGovernance Role = "governance"
)

// webhookMode is how an agent's webhooks are verified.
type webhookMode string

// Webhook verification modes. The mode is a switch, never a
// fallback: a webhook signed another way is refused.
const (
	WebhookRFC9421 webhookMode = "rfc9421"
	WebhookHMAC    webhookMode = "hmac"
	WebhookBearer  webhookMode = "bearer"
)

// Agent is one configured AdCP agent. Only configured agents are ever called.
type Agent struct {
	ID   string `json:"id"`
	Role Role   `json:"role"`
	// MCPURL is the agent's MCP streamable HTTP endpoint (https; http only on
	// loopback, for tests and the local stack).
	MCPURL string `json:"mcp_url"`
	// CredentialRef names the agent's credential (a Secrets Manager secret
	// name): the static bearer token, or with OAuth the client secret. The
	// value is resolved through Credentials at call time.
	CredentialRef string `json:"credential_ref"`
	// Auth says how buyflow authenticates to the agent; absent: the static
	// bearer token CredentialRef names.
	Auth *AuthConfig `json:"auth,omitempty"`
	// Webhook says how this agent's webhooks are verified. Required for
	// sellers, optional for governance agents.
	Webhook *WebhookConfig `json:"webhook,omitempty"`
	// AdCPVersion pins the AdCP version spoken with the agent ("3.1", "3.2", or a release
	// candidate such as "3.3-rc.0"); empty: negotiated from its capabilities (Negotiate).
	AdCPVersion string `json:"adcp_version,omitempty"`
	// SignRequests signs every request to the agent, not only the operations its
	// get_adcp_capabilities.request_signing.required_for lists (for sellers that verify
	// signatures they do not yet require, or whose capabilities lag their verifier).
	SignRequests bool `json:"sign_requests,omitempty"`
}

// authMode is how buyflow authenticates to an agent.
type authMode string

// Authentication modes. Like the webhook modes they are a switch, never a
// fallback: an OAuth agent never gets the client secret as a bearer token.
const (
	// AuthBearer sends CredentialRef's value as the bearer token (the default).
	AuthBearer authMode = "bearer"
	// AuthOAuth2ClientCredentials gets tokens with the OAuth 2.0 client
	// credentials grant (RFC 6749 §4.4): ClientID and CredentialRef's value as
	// the client secret, at TokenURL or at the token endpoint discovered from
	// the agent's 401 (RFC 9728 protected-resource metadata, then RFC 8414
	// authorization server metadata), as the MCP authorization spec asks.
	AuthOAuth2ClientCredentials authMode = "oauth2_client_credentials"
)

// AuthConfig is how buyflow authenticates to one agent. It says nothing about
// request signing, which is a setting of its own beside it.
type AuthConfig struct {
	Mode authMode `json:"mode"`
	// ClientID is the OAuth client id the seller registered for buyflow.
	ClientID string `json:"client_id,omitempty"`
	// TokenURL is the token endpoint (https; http only on loopback). Empty:
	// discovered from the agent's 401 challenge.
	TokenURL string `json:"token_url,omitempty"`
	// Scopes are requested with every token. Empty: the scopes the agent's
	// challenge names, else its metadata's scopes_supported.
	Scopes []string `json:"scopes,omitempty"`
	// Resource is the RFC 8707 resource indicator sent with every token
	// request. Empty: the resource of the agent's protected-resource metadata,
	// else mcp_url.
	Resource string `json:"resource,omitempty"`
	// Audience is sent as the "audience" parameter, for authorization servers
	// that bind tokens by it rather than by resource.
	Audience string `json:"audience,omitempty"`
}

// OAuth reports whether the agent is reached with OAuth tokens.
func (a Agent) OAuth() bool { return a.Auth != nil && a.Auth.Mode == AuthOAuth2ClientCredentials }

// WebhookConfig is an agent's webhook verification settings.
type WebhookConfig struct {
	Mode webhookMode `json:"mode"`
	// JWKSURI (https) or inline JWKS (a JWK Set object) for rfc9421; exactly one.
	JWKSURI string          `json:"jwks_uri,omitempty"`
	JWKS    json.RawMessage `json:"jwks,omitempty"`
	// HMACSecretRef names the HMAC-SHA256 shared secret (mode hmac).
	HMACSecretRef string `json:"hmac_secret_ref,omitempty"`
	// BearerSecretRef names the expected bearer credential (mode bearer).
	BearerSecretRef string `json:"bearer_secret_ref,omitempty"`
}

// RegistryConfig is the JSON configuration document of the agent registry.
type RegistryConfig struct {
	Agents []Agent `json:"agents"`
}

// Registry holds the configured agents. It is immutable after loading and
// safe for concurrent use.
type Registry struct {
	agents map[string]Agent
}

// ErrUnknownAgent is returned (wrapped) for an agent id that is not configured.
var ErrUnknownAgent = errors.New("adcp: unknown agent")

// agentIDPattern is what an agent's id must be: isAgentID checks it.
const agentIDPattern = `^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`

func isAgentID(id string) bool {
	return id != "" && agentIDFirst.Has(id[0]) && agentIDChars.Span(id[1:], 0, 63)
}

var (
	agentIDFirst = charclass.Of("A-Za-z0-9")
	agentIDChars = charclass.Of("A-Za-z0-9_.-")
)

// ParseRegistry decodes and validates a registry configuration document.
// Unknown fields are rejected, and every problem is reported at once (the
// returned error joins them).
func ParseRegistry(data []byte) (*Registry, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var cfg RegistryConfig
	if err := dec.Decode(&cfg); err != nil {
		return nil, fmt.Errorf("adcp: registry config: %w", err)
	}
	return NewRegistry(cfg)
}

// NewRegistry validates cfg and builds a Registry, reporting all problems
// together.
func NewRegistry(cfg RegistryConfig) (*Registry, error) {
	var errs []error
	bad := func(i int, id, format string, args ...any) {
		errs = append(errs, fmt.Errorf("agents[%d] (%s): %s", i, id, fmt.Sprintf(format, args...)))
	}
	if len(cfg.Agents) == 0 {
		errs = append(errs, errors.New("no agents configured"))
	}
	r := &Registry{agents: map[string]Agent{}}
	for i, a := range cfg.Agents {
		if !isAgentID(a.ID) {
			bad(i, a.ID, "id must match %s", agentIDPattern)
		} else if _, dup := r.agents[a.ID]; dup {
			bad(i, a.ID, "duplicate id")
		}
		switch a.Role {
		case RoleSeller, RoleGovernance:
		default:
			bad(i, a.ID, "role %q is not seller or governance", a.Role)
		}
		if err := checkAgentURL(a.MCPURL, true); err != nil {
			bad(i, a.ID, "mcp_url: %v", err)
		}
		if a.CredentialRef == "" {
			bad(i, a.ID, "credential_ref is required")
		}
		if a.Auth != nil {
			for _, p := range a.Auth.problems() {
				bad(i, a.ID, "auth: %s", p)
			}
		}
		if err := CheckPin(a.AdCPVersion); err != nil {
			bad(i, a.ID, "%v", err)
		}
		if a.Webhook == nil {
			if a.Role == RoleSeller {
				bad(i, a.ID, "webhook verification settings are required for sellers")
			}
		} else {
			for _, p := range a.Webhook.problems() {
				bad(i, a.ID, "webhook: %s", p)
			}
		}
		r.agents[a.ID] = a
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("adcp: invalid registry config: %w", errors.Join(errs...))
	}
	return r, nil
}

func (c *AuthConfig) problems() []string {
	var p []string
	switch c.Mode {
	case AuthBearer:
		if c.ClientID != "" || c.TokenURL != "" || len(c.Scopes) > 0 || c.Resource != "" || c.Audience != "" {
			p = append(p, "bearer takes no client_id, token_url, scopes, resource or audience (credential_ref is the token)")
		}
	case AuthOAuth2ClientCredentials:
		if c.ClientID == "" {
			p = append(p, "oauth2_client_credentials needs client_id (credential_ref names the client secret)")
		}
		if c.TokenURL != "" {
			if err := checkAgentURL(c.TokenURL, true); err != nil {
				p = append(p, "token_url: "+err.Error())
			}
		}
		if c.Resource != "" {
			if u, err := url.Parse(c.Resource); err != nil || !u.IsAbs() || u.Fragment != "" {
				p = append(p, "resource must be an absolute URI without a fragment (RFC 8707)")
			}
		}
		for _, s := range c.Scopes {
			if s == "" || strings.ContainsAny(s, " \t\r\n\"\\") {
				p = append(p, fmt.Sprintf("scope %q must be one non-empty token without spaces or quotes", s))
			}
		}
	default:
		p = append(p, fmt.Sprintf("mode %q is not bearer or oauth2_client_credentials", c.Mode))
	}
	return p
}

func (w *WebhookConfig) problems() []string {
	var p []string
	switch w.Mode {
	case WebhookRFC9421:
		hasInline := len(bytes.TrimSpace(w.JWKS)) > 0
		switch {
		case w.JWKSURI == "" && !hasInline:
			p = append(p, "rfc9421 needs jwks_uri or jwks")
		case w.JWKSURI != "" && hasInline:
			p = append(p, "give jwks_uri or jwks, not both")
		case w.JWKSURI != "":
			if err := checkAgentURL(w.JWKSURI, true); err != nil {
				p = append(p, "jwks_uri: "+err.Error())
			}
		default:
			var set struct {
				Keys []json.RawMessage `json:"keys"`
			}
			if err := json.Unmarshal(w.JWKS, &set); err != nil || len(set.Keys) == 0 {
				p = append(p, "jwks must be a JWK Set with at least one key")
			}
		}
		if w.HMACSecretRef != "" || w.BearerSecretRef != "" {
			p = append(p, "rfc9421 takes no hmac_secret_ref or bearer_secret_ref")
		}
	case WebhookHMAC:
		if w.HMACSecretRef == "" {
			p = append(p, "hmac needs hmac_secret_ref")
		}
		if w.JWKSURI != "" || len(w.JWKS) > 0 || w.BearerSecretRef != "" {
			p = append(p, "hmac takes only hmac_secret_ref")
		}
	case WebhookBearer:
		if w.BearerSecretRef == "" {
			p = append(p, "bearer needs bearer_secret_ref")
		}
		if w.JWKSURI != "" || len(w.JWKS) > 0 || w.HMACSecretRef != "" {
			p = append(p, "bearer takes only bearer_secret_ref")
		}
	default:
		p = append(p, fmt.Sprintf("mode %q is not rfc9421, hmac or bearer", w.Mode))
	}
	return p
}

// checkAgentURL accepts absolute https URLs, and http URLs on loopback hosts
// when allowLoopbackHTTP is set.
func checkAgentURL(s string, allowLoopbackHTTP bool) error {
	if s == "" {
		return errors.New("is required")
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("not a URL: %w", err)
	}
	if u.Host == "" {
		return errors.New("must be absolute")
	}
	if u.User != nil {
		return errors.New("must not carry credentials")
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		if allowLoopbackHTTP && isLoopback(u.Hostname()) {
			return nil
		}
		return errors.New("http is allowed only on loopback")
	}
	return fmt.Errorf("scheme %q is not https", u.Scheme)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Agents answers which agent an id names: a fixed *Registry (through Options.Registry) or a
// registry that changes while the process runs (internal/registry). An unknown id is an error
// wrapping ErrUnknownAgent; any other error means the registry could not be read.
type Agents interface {
	Agent(ctx context.Context, id string) (Agent, error)
}

// fixedAgents serves a fixed Registry as Agents.
type fixedAgents struct{ r *Registry }

func (f fixedAgents) Agent(_ context.Context, id string) (Agent, error) { return f.r.Agent(id) }

// Agent returns the configured agent id, or an error wrapping ErrUnknownAgent.
func (r *Registry) Agent(id string) (Agent, error) {
	a, ok := r.agents[id]
	if !ok {
		return Agent{}, fmt.Errorf("%w %q", ErrUnknownAgent, id)
	}
	return a, nil
}

// IDs returns the configured agent ids, sorted.
func (r *Registry) IDs() []string {
	ids := make([]string, 0, len(r.agents))
	for id := range r.agents {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}
