package breaker

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/workflow"
)

// Waiting is what a stage does about a call the breaker refused: wait before it runs again,
// or, past the operation's deadline, give up.
type Waiting struct {
	Refusal *adcp.UnavailableError
	// Wait is the state machine's wait; nil once the operation is past Deadline.
	Wait     *workflow.AgentUnavailable
	Deadline time.Time
	role     adcp.Role
	tool     string
}

// WaitFor returns the waiting of an operation created at created whose call of tool to an
// agent in role (the agent's role for this operation) ended in err, or nil when err is not the breaker's
// refusal. Each wait lasts until the breaker lets a probe through, and at least
// cfg.PollInitialSeconds (as an async governance review's rounds do), which keeps a day of
// waiting within an execution's history; the one exception is a refusal while the probe is
// young (Probing), which waits only until the probe's answer is due: the gate grants that
// once per probe. An operation still waiting cfg.DeadlineSeconds after it was created has
// waited long enough.
func WaitFor(err error, role adcp.Role, tool string, created, now time.Time, cfg workflow.RunConfig) *Waiting {
	var u *adcp.UnavailableError
	if !errors.As(err, &u) {
		return nil
	}
	w := &Waiting{Refusal: u, Deadline: created.Add(time.Duration(cfg.DeadlineSeconds) * time.Second), role: role, tool: tool}
	if !now.Before(w.Deadline) {
		return w
	}
	least := cfg.PollInitialSeconds
	if u.Probing {
		least = 1
	}
	wait := max(int(math.Ceil(u.RetryAt.Sub(now).Seconds())), least, 1)
	w.Wait = &workflow.AgentUnavailable{AgentID: u.Agent, Role: string(role), Since: rfc3339(u.Since), RetryInSeconds: wait}
	return w
}

// Err is the stage's error: a DeadlineExceededError once the operation opID is past its
// deadline (the state machine records it expired), else nil.
func (w *Waiting) Err(opID string) error {
	if w.Wait != nil {
		return nil
	}
	return &workflow.DeadlineExceededError{OperationID: opID, Deadline: rfc3339(w.Deadline)}
}

// Reason is the timeline entry's text.
func (w *Waiting) Reason() string {
	if w.Wait == nil {
		return fmt.Sprintf("%s; the operation passed its deadline %s", w.Refusal.Error(), rfc3339(w.Deadline))
	}
	return w.Refusal.Error()
}

// Detail is the timeline entry's detail (record.EventAgentUnavailable).
func (w *Waiting) Detail() map[string]any {
	d := map[string]any{"agent_id": w.Refusal.Agent, "role": w.role, "tool": w.tool, "since": rfc3339(w.Refusal.Since),
		"retry_at": rfc3339(w.Refusal.RetryAt)}
	if w.Wait == nil {
		d["deadline"] = rfc3339(w.Deadline)
	}
	return d
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }
