package adcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Recovery is the AdCP recovery class of an error (core/error.json).
type Recovery string

// The three recovery classes of AdCP 3.1. Any other value read off the wire is
// kept verbatim and treated as terminal.
const (
	RecoveryTransient   Recovery = "transient"
	RecoveryCorrectable Recovery = "correctable"
	RecoveryTerminal    Recovery = "terminal"
)

// ErrorKind says where an *Error came from.
type ErrorKind string

// Error kinds.
const (
	// KindAdCP is an error the agent reported in AdCP form: adcp_error on an
	// isError tool result, error.data.adcp_error on a JSON-RPC error, or the
	// payload's errors[] / a failed task's error.
	KindAdCP ErrorKind = "adcp"
	// KindTool is an isError tool result with no usable adcp_error (legacy or
	// non-AdCP server). The spec vectors call this "generic_error".
	KindTool ErrorKind = "tool"
	// KindJSONRPC is a JSON-RPC error response without data.adcp_error.
	KindJSONRPC ErrorKind = "jsonrpc"
	// KindTransport is a failure to get an answer at all: connection errors,
	// timeouts, HTTP 429/5xx and other non-2xx HTTP statuses.
	KindTransport ErrorKind = "transport"
	// KindProtocol is an answer this client cannot interpret as AdCP.
	KindProtocol ErrorKind = "protocol"
	// KindLocal is a refusal decided by this client before anything was sent.
	KindLocal ErrorKind = "local"
)

// Local error codes this client uses for refusals of its own. They are not
// part of the AdCP enum.
const (
	// CodeNoReplayWindow: a mutating call may not be retried because the agent
	// declares no adcp.idempotency.replay_ttl_seconds.
	CodeNoReplayWindow = "BUYFLOW_NO_REPLAY_WINDOW"
	// CodeReplayWindowPassed: the intent is older than the agent's replay window,
	// so a resend could execute twice. Reconcile (get_media_buys) instead.
	CodeReplayWindowPassed = "BUYFLOW_REPLAY_WINDOW_PASSED"
	// CodeToolNotOffered: the agent's tools/list lacks the tool this call needs.
	CodeToolNotOffered = "BUYFLOW_TOOL_NOT_OFFERED"
	// CodeAgentUnavailable: the agent's circuit breaker is open (Options.Guard refused the
	// call); nothing was sent. Transient: try again after RetryAfter.
	CodeAgentUnavailable = "BUYFLOW_AGENT_UNAVAILABLE"
	// CodeVersionUnsupported: the agent's pinned AdCP version cannot be spoken with it (see
	// Negotiate); nothing was sent. Terminal until the pin or the agent changes.
	CodeVersionUnsupported = "BUYFLOW_VERSION_UNSUPPORTED"
)

// UnavailableError is a Guard's refusal to let an agent be called: its circuit breaker opened
// at Since after consecutive transient failures, and lets a call through again at RetryAt.
type UnavailableError struct {
	Agent   string
	Since   time.Time
	RetryAt time.Time
	// Probing is set when the breaker's probe is out and its answer is due by RetryAt, a few
	// seconds away: a caller may wait less than its usual interval, this once (the guard
	// sets it only while the probe is young, so it cannot make a caller loop).
	Probing bool
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("agent %s is unavailable since %s (circuit breaker open; next try at %s)",
		e.Agent, e.Since.UTC().Format(time.RFC3339), e.RetryAt.UTC().Format(time.RFC3339))
}

// NotSent reports whether err proves that the call it came from sent nothing to the agent:
// the Guard refused it (an *UnavailableError: the agent's circuit breaker is open), the
// schemas refused the request (a *ValidationError), or the client failed before it opened a
// connection (the agent's capabilities, read before a mutating call, or its credential could
// not be had). A caller that wrote a mutating call ahead may then forget that it might have
// been sent. Any other error may have reached the agent.
func NotSent(err error) bool {
	return errors.As(err, new(*UnavailableError)) || errors.As(err, new(*ValidationError)) || errors.As(err, new(beforeSend))
}

// beforeSend marks an error the client met before any byte of the call left (NotSent).
type beforeSend struct{ error }

func (e beforeSend) Unwrap() error { return e.error }

// maxRetryAfter is the clamp the spec asks clients to apply to retry_after.
const maxRetryAfter = time.Hour

// Error is the one error type every failed AdCP call returns (wrapped or not;
// use errors.As). Decide turns it into a retry decision.
type Error struct {
	Kind  ErrorKind // where the error came from
	Agent string    // configured agent id
	Tool  string    // MCP tool name called

	Code       string          // AdCP error code; empty for generic errors
	Message    string          // human-readable; untrusted text from the agent
	Field      string          // offending field as reported by the agent
	Suggestion string          // agent's hint
	Recovery   Recovery        // as sent, or defaulted from the code (see RecoveryGiven)
	RetryAfter time.Duration   // from retry_after or Retry-After, clamped to 1 h; 0 if none
	Details    json.RawMessage // error.details verbatim
	// RecoveryGiven is false when Recovery was inferred from the code (recoveryFallback).
	RecoveryGiven bool
	// BuyerReason is the agent's buyer_reason (3.2): why, in words meant for the buyer.
	BuyerReason string
	// retryHint is retry_after as sent, kept in case the recovery is re-read as transient.
	retryHint time.Duration
	// Errors holds the payload's errors[] when the failure came with one.
	Errors []ErrorDetail
	// HTTPStatus is set for KindTransport errors that got an HTTP answer.
	HTTPStatus int
	// JSONRPCCode is set for JSON-RPC error responses.
	JSONRPCCode int64
	// Err is the underlying cause, if any.
	Err error
}

// ErrorDetail is one AdCP error object (core/error.json) as it appears in a
// payload's errors[] or as adcp_error.
type ErrorDetail struct {
	Code       string   `json:"code"`
	Message    string   `json:"message,omitempty"`
	Field      string   `json:"field,omitempty"`
	Suggestion string   `json:"suggestion,omitempty"`
	RetryAfter *float64 `json:"retry_after,omitempty"`
	Recovery   string   `json:"recovery,omitempty"`
	// BuyerReason is 3.2's buyer_reason.
	BuyerReason string          `json:"buyer_reason,omitempty"`
	Severity    string          `json:"severity,omitempty"`
	Details     json.RawMessage `json:"details,omitempty"`
	Issues      json.RawMessage `json:"issues,omitempty"`
}

// Error implements error. Credentials never appear here; Message is the
// agent's text and must be treated as untrusted.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("adcp")
	if e.Tool != "" {
		b.WriteString(": " + e.Tool)
	}
	if e.Agent != "" {
		b.WriteString(" at " + e.Agent)
	}
	b.WriteString(": ")
	switch {
	case e.Code != "":
		b.WriteString(e.Code)
	case e.HTTPStatus != 0:
		fmt.Fprintf(&b, "http %d", e.HTTPStatus)
	case e.JSONRPCCode != 0:
		fmt.Fprintf(&b, "json-rpc %d", e.JSONRPCCode)
	default:
		b.WriteString(string(e.Kind) + " error")
	}
	fmt.Fprintf(&b, " (%s)", e.Recovery)
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	if e.Field != "" {
		b.WriteString(" [field " + e.Field + "]")
	}
	if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the underlying cause.
func (e *Error) Unwrap() error { return e.Err }

// Decision is what a caller does after a failed AdCP call.
type Decision int

// Decisions.
const (
	// DecisionNone: there was no error.
	DecisionNone Decision = iota
	// DecisionRetry: resend the same Intent (same key, same bytes) after
	// RetryAfter or a bounded exponential backoff. Polls and reads simply
	// repeat (they take fresh keys).
	DecisionRetry
	// DecisionFix: the request was wrong; fix it and send a new intent (a new
	// key if the payload changes) or surface the problem to the caller.
	DecisionFix
	// DecisionStop: do not resend; escalate to a human or fail the operation.
	DecisionStop
)

// String names the decision.
func (d Decision) String() string {
	switch d {
	case DecisionNone:
		return "none"
	case DecisionRetry:
		return "retry"
	case DecisionFix:
		return "fix"
	case DecisionStop:
		return "stop"
	}
	return fmt.Sprintf("decision(%d)", int(d))
}

// Decide is the one place that maps an error from this package to
// retry-with-the-same-key, fix-and-resend, or stop.
//
//   - *ValidationError (our request broke the schema): fix.
//   - *Error: by Recovery — transient: retry; correctable: fix; terminal or
//     any unknown value: stop.
//   - context cancellation or deadline not wrapped in *Error: retry.
//   - anything else (configuration, unknown agent, programming errors): stop.
func Decide(err error) Decision {
	if err == nil {
		return DecisionNone
	}
	var ve *ValidationError
	if errors.As(err, &ve) {
		return DecisionFix
	}
	var ae *Error
	if errors.As(err, &ae) {
		switch ae.Recovery {
		case RecoveryTransient:
			return DecisionRetry
		case RecoveryCorrectable:
			return DecisionFix
		default:
			return DecisionStop
		}
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return DecisionRetry
	}
	return DecisionStop
}

// RetryAfter returns the wait an agent asked for before a retry, or 0; only a
// transient error has one.
func RetryAfter(err error) time.Duration {
	var ae *Error
	if errors.As(err, &ae) && ae.Recovery == RecoveryTransient {
		return ae.RetryAfter
	}
	return 0
}

// DefaultRecovery is the recovery class the 3.1.19 error-code enum assigns to
// code (plus the few newer codes the spec vectors pin). Codes outside the enum
// (vendor codes) are terminal, as the spec's transport-error-mapping vectors
// require.
func DefaultRecovery(code string) Recovery {
	return recoveryFallback(WireVersion, code)
}

// recoveryFallback is the recovery of an error whose producer sent none, read as AdCP
// version: the class the error-code enum gives its code; for a code outside the enum, terminal
// in 3.1 (the transport-error-mapping vectors) and transient in 3.2, which requires producers
// to send recovery and tells consumers to fall back to the code's class, or transient.
func recoveryFallback(version, code string) Recovery {
	if r, ok := defaultRecovery[code]; ok {
		return r
	}
	if r, ok := newerCodeRecovery[code]; ok {
		return r
	}
	if speaks32(version) {
		return RecoveryTransient
	}
	return RecoveryTerminal
}

// readAs re-reads an AdCP error in the rules of version (the version the request was sent in,
// or the answer echoed): only a recovery the agent did not send can change.
func (e *Error) readAs(version string) {
	if e.Kind != KindAdCP || e.RecoveryGiven || e.Code == "" {
		return
	}
	e.Recovery = recoveryFallback(version, e.Code)
	if e.Recovery == RecoveryTransient && e.RetryAfter == 0 {
		e.RetryAfter = e.retryHint
	}
}

// newerCodeRecovery holds codes added after 3.1.19 whose canonical fallback
// the spec's transport-error-mapping vectors pin (3.2 development tree).
var newerCodeRecovery = map[string]Recovery{
	"ACCOUNT_MOVED":             RecoveryCorrectable,
	"ACCOUNT_IDENTITY_CONFLICT": RecoveryCorrectable,
}

// clampRetryAfter converts retry_after seconds to a duration in [1 s, 1 h].
func clampRetryAfter(sec float64) time.Duration {
	if sec <= 0 {
		return 0
	}
	d := time.Duration(sec * float64(time.Second))
	if d < time.Second {
		d = time.Second
	}
	if d > maxRetryAfter {
		d = maxRetryAfter
	}
	return d
}

// errorFromDetail builds a KindAdCP *Error from one AdCP error object,
// defaulting the recovery from the code when the object has none.
func errorFromDetail(d ErrorDetail) *Error {
	e := &Error{
		Kind:       KindAdCP,
		Code:       d.Code,
		Message:    d.Message,
		Field:      d.Field,
		Suggestion: d.Suggestion,
		Details:    d.Details,
		// buyer_reason is the agent's text: untrusted, like Message.
		BuyerReason: d.BuyerReason,
	}
	if d.Recovery != "" {
		e.Recovery = Recovery(d.Recovery)
		e.RecoveryGiven = true
	} else {
		e.Recovery = DefaultRecovery(d.Code)
	}
	// retry_after (seconds; 3.2 sellers send integers) is a hint for when to
	// resend, which only a transient error gets.
	if d.RetryAfter != nil {
		e.retryHint = clampRetryAfter(*d.RetryAfter)
	}
	if e.Recovery == RecoveryTransient {
		e.RetryAfter = e.retryHint
	}
	return e
}

// parseAdCPError decodes an adcp_error value. It reports false when the value
// is not an object with a non-empty string code (the vectors require such
// values to be ignored).
func parseAdCPError(raw json.RawMessage) (ErrorDetail, bool) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(raw, &probe); err != nil {
		return ErrorDetail{}, false
	}
	var code string
	if err := json.Unmarshal(probe["code"], &code); err != nil || code == "" {
		return ErrorDetail{}, false
	}
	var d ErrorDetail
	if err := json.Unmarshal(raw, &d); err != nil {
		// A mistyped optional field must not hide the code: keep what parses.
		d = ErrorDetail{Code: code}
		_ = json.Unmarshal(probe["message"], &d.Message)   // best effort; message is optional
		_ = json.Unmarshal(probe["recovery"], &d.Recovery) // best effort; recovery is optional
	}
	return d, true
}

// ErrorCode is the agent's AdCP error code of a failed call, or "" when it has none.
func ErrorCode(err error) string {
	var ae *Error
	if errors.As(err, &ae) {
		return ae.Code
	}
	return ""
}

// MetricCode names a failed AdCP call for a metric's Code dimension (AdcpErrors), with
// bounded cardinality: the agent's AdCP error code when it looks like one (at most 64 letters,
// digits, '_', '-' or '.'), "invalid_code" when it does not, the error's kind (transport,
// protocol, tool, jsonrpc, local) for an error without a code, "unknown_agent" for an agent
// that is not configured, and "other" for anything else.
func MetricCode(err error) string {
	var ae *Error
	switch {
	case errors.As(err, &ae) && ae.Code != "":
		if !metricSafe(ae.Code) {
			return "invalid_code"
		}
		return ae.Code
	case errors.As(err, &ae) && ae.Kind != "":
		return string(ae.Kind)
	case errors.Is(err, ErrUnknownAgent):
		return "unknown_agent"
	}
	return "other"
}

func metricSafe(code string) bool {
	if len(code) > 64 {
		return false
	}
	for _, c := range code {
		ok := c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.'
		if !ok {
			return false
		}
	}
	return true
}
