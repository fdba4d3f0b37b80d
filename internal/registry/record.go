// Package registry is the registry of the AdCP agents buyflow calls (sellers and governance
// agents): a store in the ledger table that operators change through the API without a
// deploy, and a cache that every function reads at cold start and refreshes after a short
// TTL.
//
// The lookup API is small on purpose. A caller that places new work (submit, a campaign that
// spreads a plan across sellers) asks [Cache.Lookup] and refuses an agent that is unknown or
// disabled ([ErrUnknown], [Record.Disabled]); a caller that finishes open work (create, poll,
// governance, the sweep, webhooks) asks [Cache.Agent], which answers for disabled agents too,
// so a disabled seller's open buys finish.
//
// Credentials are never stored here: an agent names its Secrets Manager secret
// (credential_ref) and the functions read the secret.
package registry

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/breaker"
	"github.com/buyflow/buyflow/internal/charclass"
	"github.com/buyflow/buyflow/internal/reqsign"
)

// Record is one agent of the registry: its AdCP configuration (adcp.Agent, the fields of the
// CDK context's agents document), its state and what buyflow learnt from it.
type Record struct {
	adcp.Agent
	// Settings are per-agent settings (the circuit breaker's thresholds under
	// breaker.SettingsKey, checked here…): a JSON object whose readers decode the keys they
	// own. At most MaxSettingsBytes.
	Settings json.RawMessage `json:"settings,omitempty"`
	// Disabled agents get no new buys; their open buys finish.
	Disabled       bool   `json:"disabled"`
	DisabledReason string `json:"disabled_reason,omitempty"`
	// Capabilities is the last get_adcp_capabilities check (absent until the first one).
	Capabilities *Capabilities `json:"capabilities,omitempty"`
	// Version counts the changes; every write is conditioned on the version it read.
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// UpdatedBy is the IAM principal of the last change ("deploy" for the CDK seed).
	UpdatedBy string `json:"updated_by"`
}

// Capabilities is what buyflow keeps of an agent's get_adcp_capabilities answer.
type Capabilities struct {
	CheckedAt time.Time `json:"checked_at"`
	// SupportedVersions are the AdCP releases the agent speaks (adcp.supported_versions).
	SupportedVersions []string `json:"supported_versions,omitempty"`
	// WireVersion is the AdCP version buyflow speaks with the agent, negotiated from
	// SupportedVersions and the agent's pin (adcp.Negotiate) at the check.
	WireVersion string `json:"wire_version,omitempty"`
	// ReplayTTLSeconds is the idempotency replay window; 0 when the agent declares none, in
	// which case no mutating call is ever retried at it.
	ReplayTTLSeconds int `json:"replay_ttl_seconds"`
	// Tools are the MCP tools the agent lists (get_task_status, tasks/get, list_tasks…).
	Tools []string `json:"tools,omitempty"`
	// WebhookSigning is the agent's webhook_signing block, verbatim.
	WebhookSigning json.RawMessage `json:"webhook_signing,omitempty"`
	// RequestSigning is the agent's request_signing block, verbatim: the operations it
	// refuses unsigned (required_for) and its content-digest policy.
	RequestSigning json.RawMessage `json:"request_signing,omitempty"`
	// SigningKeyID is the key buyflow signed the agent's requests with at the check; empty:
	// the deployment had no request-signing key.
	SigningKeyID string `json:"signing_key_id,omitempty"`
	// Error is why the last check failed; the values above are then the previous check's.
	Error string `json:"error,omitempty"`
}

// RequiresSignedCreate reports whether the agent's last capabilities check lists
// create_media_buy in request_signing.required_for.
func (r Record) RequiresSignedCreate() bool {
	if r.Capabilities == nil {
		return false
	}
	c, err := reqsign.ParseCapability(r.Capabilities.RequestSigning)
	return err == nil && c.Requires(adcp.ToolCreateMediaBuy)
}

// MaxSettingsBytes bounds an agent's settings object.
const MaxSettingsBytes = 4096

// settingKeyPattern is what a setting's name must be: isSettingKey checks it.
const settingKeyPattern = `^[a-z][a-z0-9_]{0,63}$`

func isSettingKey(k string) bool {
	return k != "" && lowerChars.Has(k[0]) && settingKeyChars.Span(k[1:], 0, 63)
}

var (
	lowerChars      = charclass.Of("a-z")
	settingKeyChars = charclass.Of("a-z0-9_")
)

// Errors of the registry.
var (
	// ErrUnknown wraps adcp.ErrUnknownAgent: errors.Is matches both.
	ErrUnknown = fmt.Errorf("registry: %w", adcp.ErrUnknownAgent)
	// ErrExists reports an add of an id the registry already has.
	ErrExists = errors.New("registry: the agent already exists")
	// ErrConflict reports a change that lost a race with another change of the same agent.
	ErrConflict = errors.New("registry: the agent changed meanwhile, retry")
	// ErrInvalid reports an agent the registry refuses to store; its message says why.
	ErrInvalid = errors.New("registry: invalid agent")
)

// Validate checks an agent as the functions will use it: adcp's rules for an agent (id, role,
// URLs, webhook verification), every secret it names under secretPrefix (the only secrets the
// functions may read; empty: no constraint), and the settings object. Every problem is
// reported at once, wrapping ErrInvalid.
func Validate(r Record, secretPrefix string) error {
	var problems []string
	if _, err := adcp.NewRegistry(adcp.RegistryConfig{Agents: []adcp.Agent{r.Agent}}); err != nil {
		problems = append(problems, strings.TrimPrefix(err.Error(), "adcp: invalid registry config: "))
	}
	if secretPrefix != "" {
		for field, ref := range secretRefs(r.Agent) {
			if ref != "" && !strings.HasPrefix(ref, secretPrefix) {
				problems = append(problems, fmt.Sprintf("%s %q is not under %s (the only secrets the functions may read)", field, ref, secretPrefix))
			}
		}
	}
	if len(r.Settings) > 0 {
		var obj map[string]json.RawMessage
		switch {
		case len(r.Settings) > MaxSettingsBytes:
			problems = append(problems, fmt.Sprintf("settings are over %d bytes", MaxSettingsBytes))
		case json.Unmarshal(r.Settings, &obj) != nil || obj == nil:
			problems = append(problems, "settings must be a JSON object")
		default:
			for k := range obj {
				if !isSettingKey(k) {
					problems = append(problems, fmt.Sprintf("setting %q must match %s", k, settingKeyPattern))
				}
			}
			if _, err := breaker.ParseSettings(r.Settings); err != nil {
				problems = append(problems, err.Error())
			}
		}
	}
	if len(r.DisabledReason) > 500 {
		problems = append(problems, "disabled_reason is over 500 bytes")
	}
	if len(problems) == 0 {
		return nil
	}
	slices.Sort(problems)
	return fmt.Errorf("%w: %s", ErrInvalid, strings.Join(problems, "; "))
}

// secretRefs are the Secrets Manager names an agent refers to, by field.
func secretRefs(a adcp.Agent) map[string]string {
	refs := map[string]string{"credential_ref": a.CredentialRef}
	if a.Webhook != nil {
		refs["webhook.hmac_secret_ref"] = a.Webhook.HMACSecretRef
		refs["webhook.bearer_secret_ref"] = a.Webhook.BearerSecretRef
	}
	return refs
}
