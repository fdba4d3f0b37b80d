package adcp

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// Capabilities is the part of get_adcp_capabilities buyflow reads.
type Capabilities struct {
	SupportedVersions    []string // adcp.supported_versions, e.g. ["3.0","3.1"]
	MajorVersions        []int    // adcp.major_versions (deprecated)
	Idempotency          *idempotencyCapability
	SupportedProtocols   []string        // supported_protocols
	ExperimentalFeatures []string        // experimental_features
	RequestSigning       json.RawMessage // request_signing, verbatim
	WebhookSigning       json.RawMessage // webhook_signing, verbatim
	// Raw is the whole payload.
	Raw json.RawMessage
}

// idempotencyCapability is adcp.idempotency.
type idempotencyCapability struct {
	Supported          bool `json:"supported"`
	ReplayTTLSeconds   int  `json:"replay_ttl_seconds"`
	InFlightMaxSeconds int  `json:"in_flight_max_seconds"`
}

// ReplayWindow returns adcp.idempotency.replay_ttl_seconds as a duration, and
// false when the agent declares no usable window (absent, unsupported, or
// zero). No default is ever assumed.
func (c *Capabilities) ReplayWindow() (time.Duration, bool) {
	if c == nil || c.Idempotency == nil || !c.Idempotency.Supported || c.Idempotency.ReplayTTLSeconds <= 0 {
		return 0, false
	}
	return time.Duration(c.Idempotency.ReplayTTLSeconds) * time.Second, true
}

// SupportsVersion reports whether the agent lists release v (e.g. "3.1").
func (c *Capabilities) SupportsVersion(v string) bool {
	return slices.Contains(c.SupportedVersions, v)
}

// PushesDelivery reports whether the agent pushes delivery reports to a buy's
// reporting_webhook (media_buy.reporting_delivery_methods lists "webhook"). Polling
// get_media_buy_delivery is always available besides.
func (c *Capabilities) PushesDelivery() bool {
	var w struct {
		MediaBuy struct {
			Methods []string `json:"reporting_delivery_methods"`
		} `json:"media_buy"`
	}
	return c != nil && json.Unmarshal(c.Raw, &w) == nil && slices.Contains(w.MediaBuy.Methods, "webhook")
}

// HasExperimental reports whether the agent declares experimental feature f
// (e.g. "governance.campaign").
func (c *Capabilities) HasExperimental(f string) bool {
	return slices.Contains(c.ExperimentalFeatures, f)
}

// Capabilities returns the agent's get_adcp_capabilities answer, cached per
// agent for Options.CapabilitiesTTL.
func (c *Client) Capabilities(ctx context.Context, agentID string) (*Capabilities, error) {
	c.mu.Lock()
	if e, ok := c.caps[agentID]; ok && c.opts.Now().Sub(e.at) < c.opts.CapabilitiesTTL {
		c.mu.Unlock()
		return e.val, nil
	}
	c.mu.Unlock()
	resp, err := c.Call(ctx, agentID, ToolGetAdCPCapabilities, struct{}{})
	if err != nil {
		return nil, err
	}
	caps, err := decodeCapabilities(resp.Body)
	if err != nil {
		return nil, &Error{Kind: KindProtocol, Agent: agentID, Tool: ToolGetAdCPCapabilities,
			Recovery: RecoveryTerminal, Err: err}
	}
	c.mu.Lock()
	c.caps[agentID] = cached[*Capabilities]{val: caps, at: c.opts.Now()}
	c.mu.Unlock()
	return caps, nil
}

func decodeCapabilities(body json.RawMessage) (*Capabilities, error) {
	var w struct {
		AdCP struct {
			SupportedVersions []string               `json:"supported_versions"`
			MajorVersions     []int                  `json:"major_versions"`
			Idempotency       *idempotencyCapability `json:"idempotency"`
		} `json:"adcp"`
		SupportedProtocols   []string        `json:"supported_protocols"`
		ExperimentalFeatures []string        `json:"experimental_features"`
		RequestSigning       json.RawMessage `json:"request_signing"`
		WebhookSigning       json.RawMessage `json:"webhook_signing"`
	}
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, fmt.Errorf("decode get_adcp_capabilities: %w", err)
	}
	return &Capabilities{
		SupportedVersions:    w.AdCP.SupportedVersions,
		MajorVersions:        w.AdCP.MajorVersions,
		Idempotency:          w.AdCP.Idempotency,
		SupportedProtocols:   w.SupportedProtocols,
		ExperimentalFeatures: w.ExperimentalFeatures,
		RequestSigning:       w.RequestSigning,
		WebhookSigning:       w.WebhookSigning,
		Raw:                  body,
	}, nil
}
