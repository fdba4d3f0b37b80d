package record

import "time"

// breakerState is where an agent's circuit breaker stands.
type breakerState string

// The breaker states: closed lets calls through, open lets none through until RetryAt,
// half_open lets one probe through (until ProbeUntil) and refuses the others.
const (
	BreakerClosed   breakerState = "closed"
	BreakerOpen     breakerState = "open"
	BreakerHalfOpen breakerState = "half_open"
)

// Breaker is the circuit breaker of one agent (seller or governance agent), shared by every
// function that calls it. It is deployment-wide, like the agent registry: agent ids are. The
// rules that move it live in internal/breaker; the ledger stores it under a version so that
// concurrent functions never lose each other's updates.
type Breaker struct {
	AgentID string       `dynamodbav:"agent_id"`
	State   breakerState `dynamodbav:"state"`
	// Failures counts the consecutive transient failures since FirstFailureAt.
	Failures       int       `dynamodbav:"failures"`
	FirstFailureAt time.Time `dynamodbav:"first_failure_at,omitempty"`
	// LastFailureAt is when the last failure counted ended: the streak goes on while each
	// failed call began within the window after it.
	LastFailureAt time.Time `dynamodbav:"last_failure_at,omitempty"`
	// OpenedAt is when the breaker last opened from closed (a failed probe keeps it).
	OpenedAt time.Time `dynamodbav:"opened_at,omitempty"`
	// RetryAt is when an open breaker lets a probe through.
	RetryAt time.Time `dynamodbav:"retry_at,omitempty"`
	// ProbeUntil is when a half-open breaker's probe counts as lost and another may be claimed.
	ProbeUntil time.Time `dynamodbav:"probe_until,omitempty"`
	// LastError is the last transient failure counted (the agent's text, clipped).
	LastError string `dynamodbav:"last_error,omitempty"`
	// Trips counts the times the breaker opened from closed.
	Trips int64 `dynamodbav:"trips"`
	// Version counts the writes; every write is conditioned on the version it read (0: none).
	Version   int64     `dynamodbav:"version"`
	UpdatedAt time.Time `dynamodbav:"updated_at,omitempty"`
}
