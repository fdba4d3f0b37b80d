package adcp

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/buyflow/buyflow/internal/reqsign"
)

// Error codes of request signing. Like the other BUYFLOW_ codes they are buyflow's.
const (
	// CodeSignatureRequired: the agent refused a request unsigned (its answer
	// request_signature_required), or it lists the operation in
	// get_adcp_capabilities.request_signing.required_for while buyflow has no request-signing
	// key (then nothing was sent). Terminal until buyflow signs for the agent.
	CodeSignatureRequired = "BUYFLOW_REQUEST_SIGNATURE_REQUIRED"
	// CodeSignatureRejected: the agent refused buyflow's request signature (any other
	// request_signature_* answer: a key it does not know or no longer accepts, a window or
	// digest it refuses). Terminal: sending the same request again gets the same answer.
	CodeSignatureRejected = "BUYFLOW_REQUEST_SIGNATURE_REJECTED"
)

// signingPlan is how the requests of one session to an agent are signed.
type signingPlan struct {
	policy  reqsign.Policy
	profile reqsign.Profile
	signer  *reqsign.Signer // nil: buyflow has no request-signing key
}

// signingPlan returns the plan for agent, whose requests go out in AdCP version (""
// when not yet negotiated: the version the last capabilities choose). The capabilities are
// the last ones read (Send reads them before every mutating call, so a create sees the
// agent's current required_for); an agent buyflow has not asked yet requires nothing.
func (c *Client) signingPlan(agent Agent, version string) signingPlan {
	c.mu.Lock()
	e, ok := c.caps[agent.ID]
	c.mu.Unlock()
	plan := signingPlan{policy: reqsign.Policy{All: agent.SignRequests}, signer: c.opts.RequestSigner}
	var supported []string
	if ok {
		supported = e.val.SupportedVersions
		// An unreadable block is treated as requiring nothing: the agent's
		// request_signature_required answer then says what it wants, under its own code.
		plan.policy.Capability, _ = reqsign.ParseCapability(e.val.RequestSigning)
	}
	if version == "" {
		version, _ = Negotiate(agent.AdCPVersion, supported) // a bad pin fails the call elsewhere
	}
	if speaks32(version) {
		plan.profile = reqsign.Profile32
	}
	return plan
}

// refuseUnsigned is the refusal, before anything is sent, of tool at an agent that requires it
// signed while buyflow has no key; nil when the call may go.
func (p signingPlan) refuseUnsigned(agentID, tool string) error {
	if p.signer != nil || !p.policy.Capability.Requires(tool) {
		return nil
	}
	return beforeSend{&Error{Kind: KindLocal, Agent: agentID, Tool: tool, Code: CodeSignatureRequired, Recovery: RecoveryTerminal,
		Message: fmt.Sprintf("agent %s requires %s to be signed (request_signing.required_for) and buyflow has no request-signing key; nothing was sent: configure the key (docs/ARCHITECTURE.md, Request signing)", agentID, tool)}}
}

// sign signs r when the plan covers its body. The body is read and put back: the signature
// and Content-Digest are over exactly these bytes. A resend (the OAuth refresh) comes through
// here again and gets a fresh nonce, since verifiers refuse a replayed one.
func (p signingPlan) sign(r *http.Request) (signed bool, err error) {
	if p.signer == nil || r.Body == nil || r.Method != http.MethodPost {
		return false, nil
	}
	body, err := io.ReadAll(r.Body)
	_ = r.Body.Close() // an in-memory body from the go-sdk; nothing to lose
	if err != nil {
		return false, fmt.Errorf("adcp: read request body to sign: %w", err)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	if !p.policy.Covers(body) {
		return false, nil
	}
	if err := p.signer.Sign(r, body, p.profile, p.policy.Capability.CoversContentDigest); err != nil {
		return false, fmt.Errorf("adcp: sign request: %w", err)
	}
	return true, nil
}

// signatureChallenge returns the request_signature_* code of a 401's Signature challenge
// (`WWW-Authenticate: Signature error="request_signature_required"`), "" when there is none.
func signatureChallenge(challenges []oauthex.Challenge) string {
	for _, ch := range challenges {
		if ch.Scheme == "signature" && strings.HasPrefix(ch.Params["error"], "request_signature_") {
			return ch.Params["error"]
		}
	}
	return ""
}

// signatureError is the *Error of an agent's refusal of a request's signature, or of its
// absence. signed says whether buyflow signed the refused request.
func (c *Client) signatureError(agentID, tool, code string, status int, signed bool) *Error {
	e := &Error{Kind: KindTransport, Agent: agentID, Tool: tool, HTTPStatus: status, Recovery: RecoveryTerminal}
	kid := ""
	if c.opts.RequestSigner != nil {
		kid = c.opts.RequestSigner.KeyID
	}
	switch {
	case code == "request_signature_required" && c.opts.RequestSigner == nil:
		e.Code = CodeSignatureRequired
		e.Message = fmt.Sprintf("agent %s requires a signed request for %s (request_signature_required) and buyflow has no request-signing key: configure one (docs/ARCHITECTURE.md, Request signing)", agentID, tool)
	case code == "request_signature_required":
		e.Code = CodeSignatureRequired
		e.Message = fmt.Sprintf("agent %s requires a signed request for %s (request_signature_required), which its request_signing capabilities did not list when buyflow sent it unsigned: run `buyflow agents check %s`, or set sign_requests on the agent", agentID, tool, agentID)
	case signed:
		e.Code = CodeSignatureRejected
		e.Message = fmt.Sprintf("agent %s rejected buyflow's request signature on %s (%s, key %s): the seller must accept buyflow's current key, published in its JWKS (/v1/jwks.json)", agentID, tool, code, kid)
	default:
		e.Code = CodeSignatureRejected
		e.Message = fmt.Sprintf("agent %s refused %s for its request signature (%s), which buyflow did not sign: it may require signing that its capabilities do not list; set sign_requests on the agent", agentID, tool, code)
	}
	return e
}
