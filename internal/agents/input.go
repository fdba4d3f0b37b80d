package agents

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/registry"
)

// MaxBodyBytes bounds an operator request (an agent with an inline JWKS is a few KB).
const MaxBodyBytes = 64 << 10

// InputError is a request the operator API refuses: a 4xx with a machine-readable code, the
// offending field (a JSON pointer) and a message a person understands.
type InputError struct {
	Status        int
	Code, Message string
	Field         string
}

func (e *InputError) Error() string { return e.Code + ": " + e.Message }

func refuse(status int, code, field, format string, args ...any) *InputError {
	return &InputError{Status: status, Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

// newAgent is the body of an add: the agent's AdCP configuration (the fields of an entry of
// the CDK context's agents document) and its settings.
type newAgent struct {
	adcp.Agent
	Settings json.RawMessage `json:"settings,omitempty"`
}

// patch is the body of an update: each field present replaces the stored one; "webhook":
// null removes a governance agent's webhook settings, "auth": null returns an agent to its
// static bearer token. The id and role never change (an agent
// with open buys keeps its meaning): add another agent instead.
type patch struct {
	Role          *adcp.Role      `json:"role,omitempty"`
	MCPURL        *string         `json:"mcp_url,omitempty"`
	CredentialRef *string         `json:"credential_ref,omitempty"`
	SignRequests  *bool           `json:"sign_requests,omitempty"`
	Auth          json.RawMessage `json:"auth,omitempty"`
	Webhook       json.RawMessage `json:"webhook,omitempty"`
	Settings      json.RawMessage `json:"settings,omitempty"`
}

// Reason is the body of a disable (why, for the audit trail and the submit refusal).
type Reason struct {
	Reason string `json:"reason"`
}

// decodeStrict decodes one JSON object into v: unknown fields, trailing data and bodies over
// MaxBodyBytes are refused.
func decodeStrict(body []byte, v any) error {
	if len(body) > MaxBodyBytes {
		return refuse(413, "body_too_large", "", "the body is over %d bytes", MaxBodyBytes)
	}
	if len(bytes.TrimSpace(body)) == 0 || bytes.TrimSpace(body)[0] != '{' {
		return refuse(400, "malformed_json", "", "the body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return refuse(400, "malformed_json", "", "the body is not a valid request: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return refuse(400, "malformed_json", "", "the body has data after its JSON object")
	}
	return nil
}

// ParseNewAgent decodes and validates an add. secretPrefix is the prefix every secret the
// agent names must lie under (the only secrets the functions may read).
func ParseNewAgent(body []byte, secretPrefix string) (registry.Record, error) {
	var in newAgent
	if err := decodeStrict(body, &in); err != nil {
		return registry.Record{}, err
	}
	r := registry.Record{Agent: in.Agent, Settings: in.Settings}
	if err := registry.Validate(r, secretPrefix); err != nil {
		return registry.Record{}, refuse(422, "invalid_agent", "", "%s", err.Error())
	}
	return r, nil
}

// ParsePatch decodes an update into a change of the stored record (validated by the store's
// caller before it is written).
func ParsePatch(body []byte) (registry.Change, error) {
	var p patch
	if err := decodeStrict(body, &p); err != nil {
		return nil, err
	}
	var webhook *adcp.WebhookConfig
	removeWebhook := string(bytes.TrimSpace(p.Webhook)) == "null"
	if len(p.Webhook) > 0 && !removeWebhook {
		dec := json.NewDecoder(bytes.NewReader(p.Webhook))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&webhook); err != nil {
			return nil, refuse(400, "malformed_json", "/webhook", "webhook is not valid webhook settings: %v", err)
		}
	}
	var auth *adcp.AuthConfig
	removeAuth := string(bytes.TrimSpace(p.Auth)) == "null"
	if len(p.Auth) > 0 && !removeAuth {
		dec := json.NewDecoder(bytes.NewReader(p.Auth))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&auth); err != nil {
			return nil, refuse(400, "malformed_json", "/auth", "auth is not valid auth settings: %v", err)
		}
	}
	if p.Role == nil && p.MCPURL == nil && p.CredentialRef == nil && p.SignRequests == nil && len(p.Auth) == 0 && len(p.Webhook) == 0 && len(p.Settings) == 0 {
		return nil, refuse(422, "empty_update", "", "name at least one of mcp_url, credential_ref, sign_requests, auth, webhook, settings")
	}
	return func(r *registry.Record) (string, string, error) {
		var changed []string
		if p.Role != nil && *p.Role != r.Role {
			return "", "", refuse(422, "role_immutable", "/role", "agent %s is a %s and stays one: add another agent for another role", r.ID, r.Role)
		}
		if p.MCPURL != nil {
			r.MCPURL, changed = *p.MCPURL, append(changed, "mcp_url")
		}
		if p.CredentialRef != nil {
			r.CredentialRef, changed = *p.CredentialRef, append(changed, "credential_ref")
		}
		if p.SignRequests != nil {
			r.SignRequests, changed = *p.SignRequests, append(changed, "sign_requests")
		}
		switch {
		case removeAuth:
			r.Auth, changed = nil, append(changed, "auth removed")
		case auth != nil:
			r.Auth, changed = auth, append(changed, "auth")
		}
		switch {
		case removeWebhook:
			r.Webhook, changed = nil, append(changed, "webhook removed")
		case webhook != nil:
			r.Webhook, changed = webhook, append(changed, "webhook")
		}
		if len(p.Settings) > 0 {
			r.Settings, changed = append(json.RawMessage(nil), p.Settings...), append(changed, "settings")
		}
		return registry.ActionUpdated, fmt.Sprint(changed), nil
	}, nil
}
