package adcp

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxTextJSON is the largest content[].text item parsed as JSON.
const maxTextJSON = 1 << 20

// TaskStatus is an AdCP task status (enums/task-status.json).
type TaskStatus string

// Task statuses. Terminal: completed, failed, canceled, rejected.
const (
	StatusSubmitted     TaskStatus = "submitted"
	StatusWorking       TaskStatus = "working"
	StatusInputRequired TaskStatus = "input-required"
	StatusCompleted     TaskStatus = "completed"
	statusCanceled      TaskStatus = "canceled"
	statusFailed        TaskStatus = "failed"
	statusRejected      TaskStatus = "rejected"
	statusAuthRequired  TaskStatus = "auth-required"
	statusUnknown       TaskStatus = "unknown"
)

// Terminal reports whether s ends a task.
func (s TaskStatus) Terminal() bool {
	switch s {
	case StatusCompleted, statusFailed, statusCanceled, statusRejected:
		return true
	}
	return false
}

func validTaskStatus(s string) bool {
	switch TaskStatus(s) {
	case StatusSubmitted, StatusWorking, StatusInputRequired, StatusCompleted, statusCanceled,
		statusFailed, statusRejected, statusAuthRequired, statusUnknown:
		return true
	}
	return false
}

// Response is one successfully extracted AdCP answer: the flat payload and
// the envelope fields read from it.
type Response struct {
	Agent string // configured agent id
	Tool  string // MCP tool called

	// Status is the envelope status. It is StatusCompleted when the payload has
	// no status, or when its status is not a task status (3.0 peers put
	// verdicts and media-buy statuses there; see LegacyStatus).
	Status TaskStatus
	// LegacyStatus holds a root "status" that is not a task status, verbatim
	// (e.g. "pending_creatives", "approved", "accepted" from 3.0 peers).
	LegacyStatus string
	TaskID       string
	ContextID    string
	Message      string
	AdCPVersion  string // empty when the agent does not echo it (3.0 peers)
	// SentVersion is the AdCP version the request went out in (set by the Client).
	SentVersion string
	Replayed    bool
	// Body is the whole flat payload object (envelope and task fields).
	Body json.RawMessage
}

// envelope is the subset of core/protocol-envelope.json read from a payload.
type envelope struct {
	Status      string          `json:"status"`
	TaskID      string          `json:"task_id"`
	ContextID   string          `json:"context_id"`
	Message     string          `json:"message"`
	AdCPVersion string          `json:"adcp_version"`
	Replayed    bool            `json:"replayed"`
	AdCPError   json.RawMessage `json:"adcp_error"`
	Errors      []ErrorDetail   `json:"errors"`
	Error       json.RawMessage `json:"error"`
}

// decode decodes the body of an answer that did not fail into w; a failed answer is its
// *Error (see Failure), and a body that does not decode a terminal protocol error on what
// (decodeJSON).
func (r *Response) decode(w any, what, agent, tool string) error {
	if f := r.Failure(); f != nil {
		return f
	}
	return decodeJSON(r.Body, w, what, agent, tool)
}

// decodeJSON decodes raw into w; JSON that does not decode is a terminal protocol error on what,
// from agent's tool ("" when not known here: the caller tags it).
func decodeJSON(raw json.RawMessage, w any, what, agent, tool string) error {
	if err := json.Unmarshal(raw, w); err != nil {
		return &Error{Kind: KindProtocol, Agent: agent, Tool: tool, Recovery: RecoveryTerminal, Err: fmt.Errorf("decode %s: %w", what, err)}
	}
	return nil
}

// Failure returns the failure a payload reports about the call itself
// (envelope status failed or rejected, with adcp_error or errors[]), or nil.
// It is not used for polls: a poll's status describes the polled task.
func (r *Response) Failure() *Error {
	if r.Status != statusFailed && r.Status != statusRejected {
		return nil
	}
	var env envelope
	_ = json.Unmarshal(r.Body, &env) // Body was already decoded once as an object
	e := failureFromEnvelope(env)
	if e == nil {
		e = &Error{Kind: KindAdCP, Recovery: RecoveryTerminal, Message: "task " + string(r.Status) + " without an error object"}
	}
	e.Agent, e.Tool = r.Agent, r.Tool
	if e.Message == "" {
		e.Message = r.Message
	}
	return e
}

// failureFromEnvelope builds an error from adcp_error, else the first
// non-warning errors[] entry, else nil. errors[] is always attached.
func failureFromEnvelope(env envelope) *Error {
	var e *Error
	if d, ok := parseAdCPError(env.AdCPError); ok {
		e = errorFromDetail(d)
	} else if d, ok := firstFatal(env.Errors); ok {
		e = errorFromDetail(d)
	}
	if e != nil {
		e.Errors = env.Errors
		e.readAs(env.AdCPVersion) // the release the agent says it answered in
	}
	return e
}

func firstFatal(errs []ErrorDetail) (ErrorDetail, bool) {
	for _, d := range errs {
		if d.Code != "" && d.Severity != "warning" {
			return d, true
		}
	}
	return ErrorDetail{}, false
}

// extractSuccess applies steps 2 and 3 of the MCP extraction order
// (mcp-response-extraction): structuredContent if it is an object that is not
// only adcp_error, else the first content[].text (≤ 1 MB) that parses as such
// an object. It returns nil when there is nothing to extract, including for
// isError results, which belong to the error path.
func extractSuccess(res *mcp.CallToolResult) json.RawMessage {
	if res == nil || res.IsError {
		return nil
	}
	if obj, ok := res.StructuredContent.(map[string]any); ok && !onlyAdCPError(obj) {
		b, err := json.Marshal(obj)
		if err == nil {
			return b
		}
	}
	for _, c := range res.Content {
		if obj := textObject(c); obj != nil {
			var m map[string]json.RawMessage
			if json.Unmarshal(obj, &m) == nil && !onlyAdCPErrorRaw(m) {
				return obj
			}
		}
	}
	return nil
}

// extractToolError implements the error path for isError results: a valid
// adcp_error, else the first fatal errors[] entry (the spec's Error arm, as
// the official SDK sends it), from structuredContent, else from a JSON text
// item; otherwise a generic KindTool error carrying the first text.
func extractToolError(res *mcp.CallToolResult) *Error {
	if obj, ok := res.StructuredContent.(map[string]any); ok {
		if raw, err := json.Marshal(obj); err == nil {
			if e := toolErrorFrom(raw); e != nil {
				return e
			}
		}
	}
	var firstText string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok && firstText == "" {
			firstText = tc.Text
		}
		if obj := textObject(c); obj != nil {
			if e := toolErrorFrom(obj); e != nil {
				return e
			}
		}
	}
	if len(firstText) > 500 {
		firstText = firstText[:500]
	}
	return &Error{Kind: KindTool, Recovery: RecoveryTerminal, Message: firstText}
}

// toolErrorFrom reads the error of one isError payload object: adcp_error
// first, then errors[]; nil when it holds neither. A mistyped errors[] is
// skipped rather than hiding a valid adcp_error.
func toolErrorFrom(obj json.RawMessage) *Error {
	var m map[string]json.RawMessage
	if json.Unmarshal(obj, &m) != nil {
		return nil
	}
	if d, ok := parseAdCPError(m["adcp_error"]); ok {
		return errorFromDetail(d)
	}
	var errs []ErrorDetail
	if json.Unmarshal(m["errors"], &errs) != nil {
		return nil
	}
	return failureFromEnvelope(envelope{Errors: errs})
}

// textObject returns the text of a text content item when it is a JSON object
// of at most maxTextJSON bytes whose numbers are within bounds.
func textObject(c mcp.Content) json.RawMessage {
	tc, ok := c.(*mcp.TextContent)
	if !ok || len(tc.Text) > maxTextJSON {
		return nil
	}
	t := bytes.TrimSpace([]byte(tc.Text))
	if len(t) == 0 || t[0] != '{' || !json.Valid(t) || boundAnswer(t) != nil {
		return nil
	}
	return t
}

func onlyAdCPError(m map[string]any) bool {
	_, ok := m["adcp_error"]
	return ok && len(m) == 1
}

func onlyAdCPErrorRaw(m map[string]json.RawMessage) bool {
	_, ok := m["adcp_error"]
	return ok && len(m) == 1
}

// interpret turns a tool result into a Response or an *Error.
func interpret(res *mcp.CallToolResult) (*Response, error) {
	if res.IsError {
		return nil, extractToolError(res)
	}
	body := extractSuccess(res)
	if body == nil {
		return nil, &Error{Kind: KindProtocol, Recovery: RecoveryTerminal,
			Message: "tool result carries no AdCP payload (no structuredContent object and no JSON text)"}
	}
	return responseFromBody(body)
}

// responseFromBody reads the envelope fields of a flat payload.
func responseFromBody(body json.RawMessage) (*Response, error) {
	if err := boundAnswer(body); err != nil {
		return nil, err
	}
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		// A mistyped envelope field: keep going with a tolerant read of status.
		var m map[string]json.RawMessage
		if err2 := json.Unmarshal(body, &m); err2 != nil {
			return nil, &Error{Kind: KindProtocol, Recovery: RecoveryTerminal, Err: fmt.Errorf("decode payload: %w", err2)}
		}
		_ = json.Unmarshal(m["status"], &env.Status) // best effort on a malformed envelope
		_ = json.Unmarshal(m["task_id"], &env.TaskID)
	}
	r := &Response{
		TaskID:      env.TaskID,
		ContextID:   env.ContextID,
		Message:     env.Message,
		AdCPVersion: env.AdCPVersion,
		Replayed:    env.Replayed,
		Body:        body,
		Status:      StatusCompleted,
	}
	switch {
	case env.Status == "":
	case validTaskStatus(env.Status):
		r.Status = TaskStatus(env.Status)
	default:
		r.LegacyStatus = env.Status
	}
	return r, nil
}
