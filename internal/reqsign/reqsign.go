// Package reqsign (internal/reqsign) signs buyflow's outgoing AdCP requests per the AdCP
// request-signing profile: RFC 9421 HTTP Message Signatures with tag adcp/request-signing/v1,
// label sig1, a 300 s window, a fresh nonce per signature, and Content-Digest over the exact
// body bytes sent.
//
// The canonicalisation (@target-uri, @authority), the signature base and the parameter
// serialisation are internal/webhookauth's, shared with the webhook profile; this package adds
// what is particular to requests: the tag, the profile version's binary encoding, and which
// requests an agent's get_adcp_capabilities.request_signing asks to be signed.
//
// Two profile versions exist and are never mixed: 3.1 encodes the signature and the digest as
// base64url without padding; 3.2 as RFC 8941 sf-binary, padded standard base64, and always
// covers content-digest. The version is the wire version spoken with the agent
// (adcp.Negotiate); a 3.2 verifier rejects a 3.1 encoding and the reverse, so there is no
// fallback from one to the other.
package reqsign

import (
	"bytes"
	"crypto"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/buyflow/buyflow/internal/webhookauth"
)

// Tag is the tag parameter of every AdCP request signature.
const Tag = "adcp/request-signing/v1"

// AdCPUse is the adcp_use of the JWKs that verify buyflow's request signatures.
const AdCPUse = "request-signing"

// Profile is a version of the request-signing profile.
type Profile int

// Profile versions.
const (
	// Profile31 encodes binary values as base64url without padding (AdCP 3.0 and 3.1).
	Profile31 Profile = iota
	// Profile32 encodes them as RFC 8941 sf-binary (padded standard base64) and covers
	// content-digest on every request with a body (AdCP 3.2 and later).
	Profile32
)

// String names the profile version.
func (p Profile) String() string {
	if p == Profile32 {
		return "3.2"
	}
	return "3.1"
}

func (p Profile) binary() *base64.Encoding {
	if p == Profile32 {
		return base64.StdEncoding
	}
	return base64.RawURLEncoding
}

// Capability is an agent's get_adcp_capabilities.request_signing block.
type Capability struct {
	Supported bool `json:"supported"`
	// CoversContentDigest is "required", "forbidden" or "either" (absent: "either").
	CoversContentDigest string   `json:"covers_content_digest,omitempty"`
	RequiredFor         []string `json:"required_for,omitempty"`
	SupportedFor        []string `json:"supported_for,omitempty"`
	// ProtocolMethodsRequiredFor are JSON-RPC methods other than tools/call (tasks/cancel…)
	// the agent refuses unsigned.
	ProtocolMethodsRequiredFor []string `json:"protocol_methods_required_for,omitempty"`
}

// ErrCapability reports a request_signing block that cannot be read.
var ErrCapability = errors.New("reqsign: request_signing capability malformed")

// ParseCapability reads a request_signing block; absent or null is the zero Capability (the
// agent requires nothing).
func ParseCapability(raw json.RawMessage) (Capability, error) {
	var c Capability
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return c, nil
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return Capability{}, fmt.Errorf("%w: %w", ErrCapability, err)
	}
	switch c.CoversContentDigest {
	case "", "required", "forbidden", "either":
	default:
		return Capability{}, fmt.Errorf("%w: covers_content_digest %q", ErrCapability, c.CoversContentDigest)
	}
	return c, nil
}

// Requires reports whether the agent refuses tool (an AdCP operation) unsigned.
func (c Capability) Requires(tool string) bool { return slices.Contains(c.RequiredFor, tool) }

// RequiresAny reports whether the agent requires a signature on anything.
func (c Capability) RequiresAny() bool {
	return len(c.RequiredFor) > 0 || len(c.ProtocolMethodsRequiredFor) > 0
}

// Policy says which requests to one agent are signed.
type Policy struct {
	Capability Capability
	// All signs every request, whatever the agent requires (the operator's per-agent flag).
	All bool
}

// Covers reports whether the JSON-RPC request body must be signed: a tools/call of a tool
// the agent lists in required_for, a method it lists in protocol_methods_required_for, or
// anything with All.
func (p Policy) Covers(body []byte) bool {
	if p.All {
		return len(body) > 0
	}
	if !p.Capability.RequiresAny() {
		return false
	}
	var env struct {
		Method string `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &env) != nil {
		return false // not a JSON-RPC request of ours; nothing an agent can require signed
	}
	if env.Method == "tools/call" {
		return p.Capability.Requires(env.Params.Name)
	}
	return slices.Contains(p.Capability.ProtocolMethodsRequiredFor, env.Method)
}

// Signer signs requests with one key. Key may be a local key (the local stack, tests) or a
// remote one (AWS KMS); it must be Ed25519 or ECDSA P-256, the profile's two algorithms.
type Signer struct {
	KeyID string
	Key   crypto.Signer
	Now   func() time.Time // nil means time.Now
	Nonce func() string    // nil means 16 random bytes
}

// Sign signs req, whose body is exactly body, under profile p for an agent whose
// covers_content_digest is coverDigest. Content-Digest is covered under 3.2 always, under 3.1
// unless the agent forbids it (a verifier then rejects a covered digest).
func (s *Signer) Sign(req *http.Request, body []byte, p Profile, coverDigest string) error {
	components := []string{"@method", "@target-uri", "@authority", "content-type"}
	if p == Profile32 || coverDigest != "forbidden" {
		components = append(components, "content-digest")
	} else {
		req.Header.Del("Content-Digest")
	}
	return webhookauth.Sign(req, body, webhookauth.Spec{KeyID: s.KeyID, Key: s.Key, Tag: Tag,
		Components: components, Binary: p.binary(), Now: s.Now, Nonce: s.Nonce})
}
