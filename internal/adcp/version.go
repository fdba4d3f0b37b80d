package adcp

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Version32 is the newest stable AdCP release buyflow speaks (schemas 3.2.3). WireVersion
// ("3.1") is the other one, and the default.
const Version32 = "3.2"

// spoken are the stable releases buyflow has schemas for, oldest first.
var spoken = []string{WireVersion, Version32}

// rcPattern is a release candidate of a release newer than buyflow's: "3.3-rc.0".
var rcPattern = regexp.MustCompile(`^3\.(\d+)-rc\.\d+$`)

// Negotiate returns the AdCP version buyflow speaks with an agent that lists supported
// (get_adcp_capabilities adcp.supported_versions) and that the operator pinned to pin ("" for
// none). It is the one place the choice is made:
//
//   - no pin: the highest of buyflow's stable releases ("3.1", "3.2") the agent lists. An agent
//     that lists none of them (nothing, or only "3.0") gets "3.1": 3.0 sellers (the official
//     SDK's 3.0.6) accept 3.1 requests. Release candidates the agent lists are never chosen.
//   - a stable pin ("3.1", "3.2"): spoken as pinned, whatever the agent lists (an operator holds
//     an agent back, or ahead of a stale capabilities answer).
//   - a release-candidate pin ("3.3-rc.0"): buyflow has no schemas for it, so it sends the RC's
//     version string with 3.2 shapes, validated against 3.2.3 — which only an agent that lists
//     both the RC and "3.2" can be trusted to read (it downshifts within the major). At any
//     other agent the pin is an error and nothing is sent.
func Negotiate(pin string, supported []string) (string, error) {
	switch {
	case pin == "":
		for _, v := range slices.Backward(spoken) {
			if slices.Contains(supported, v) {
				return v, nil
			}
		}
		return WireVersion, nil
	case slices.Contains(spoken, pin):
		return pin, nil
	case rcPattern.MatchString(pin):
		if slices.Contains(supported, pin) && slices.Contains(supported, Version32) {
			return pin, nil
		}
		return "", fmt.Errorf("adcp: pinned to %s, which buyflow speaks with 3.2 shapes only at an agent that lists both %s and 3.2; it lists %q", pin, pin, supported)
	}
	return "", fmt.Errorf("adcp: pinned to %q, which is neither a release buyflow speaks (%s) nor a release candidate of a newer 3.x (e.g. 3.3-rc.0)", pin, strings.Join(spoken, ", "))
}

// CheckPin reports whether pin is a version an operator may pin an agent to ("" is none).
func CheckPin(pin string) error {
	if pin == "" || slices.Contains(spoken, pin) {
		return nil
	}
	if m := rcPattern.FindStringSubmatch(pin); m != nil {
		if minor, _ := strconv.Atoi(m[1]); minor > 2 {
			return nil
		}
	}
	return fmt.Errorf("adcp_version %q is neither %s nor a release candidate of a newer 3.x (e.g. 3.3-rc.0)", pin, strings.Join(spoken, " nor "))
}

// shapesOf returns the release whose schemas and shapes a request sent as version follows:
// a release candidate is sent with 3.2 shapes (see Negotiate); anything unknown with 3.1's.
func shapesOf(version string) string {
	switch {
	case version == Version32, rcPattern.MatchString(version):
		return Version32
	}
	return WireVersion
}

// speaks32 reports whether answers to a request sent as version, or answers that echo
// version, are read in 3.2's shape.
func speaks32(version string) bool {
	if shapesOf(version) == Version32 {
		return true
	}
	major, minor, ok := strings.Cut(version, ".")
	if !ok || major != "3" {
		return false
	}
	n, err := strconv.Atoi(strings.SplitN(minor, "-", 2)[0])
	return err == nil && n >= 2
}

// Speaks returns the AdCP version negotiated with agentID: its pin and its capabilities,
// through Negotiate. The capabilities are the last ones read, at any age (read now only when
// there are none): a read or a check costs no extra exchange once the process knows the agent,
// and a circuit breaker's half-open probe stays the call itself. Send refreshes them after
// Options.CapabilitiesTTL, so a version change still reaches a warm process. A transient failure to
// read the capabilities is returned (nothing is sent); a terminal one counts as an agent that
// lists no versions. Every request to the
// agent is built, validated and read in that version.
func (c *Client) Speaks(ctx context.Context, agentID string) (string, error) {
	agent, err := c.opts.Agents.Agent(ctx, agentID)
	if err != nil {
		return "", err
	}
	var supported []string
	caps, err := c.lastCapabilities(ctx, agentID)
	switch {
	case err == nil:
		supported = caps.SupportedVersions
	case Decide(err) == DecisionRetry:
		// Try again later rather than guess: a 3.2-only agent refuses a 3.1 request.
		return "", beforeSend{fmt.Errorf("adcp: %s: read capabilities to choose the AdCP version: %w", agentID, err)}
	default:
		// An agent that cannot answer get_adcp_capabilities at all (older than 3.0, or a
		// credential problem the call itself will report) lists no versions: 3.1, or its pin.
	}
	v, err := Negotiate(agent.AdCPVersion, supported)
	if err != nil {
		return "", &Error{Kind: KindLocal, Agent: agentID, Code: CodeVersionUnsupported, Recovery: RecoveryTerminal, Message: err.Error()}
	}
	return v, nil
}

// bodyVersion is the adcp_version a request body carries ("" when none).
func bodyVersion(body []byte) string {
	var probe struct {
		Version string `json:"adcp_version"`
	}
	_ = json.Unmarshal(body, &probe) // a body that is not an object fails validation later
	return probe.Version
}

// lastCapabilities returns the capabilities last read from agentID, whatever their age, or
// reads them (Capabilities) when there are none.
func (c *Client) lastCapabilities(ctx context.Context, agentID string) (*Capabilities, error) {
	c.mu.Lock()
	e, ok := c.caps[agentID]
	c.mu.Unlock()
	if ok {
		return e.val, nil
	}
	return c.Capabilities(ctx, agentID)
}
