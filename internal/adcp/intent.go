package adcp

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// WireVersion is the release-precision AdCP version sent on every request.
const WireVersion = "3.1"

// wireMajor is the deprecated integer version, still sent through 3.x because
// the version envelope says buyers SHOULD emit both.
const wireMajor = 3

// MCP tool names of the AdCP tasks this client calls.
const (
	ToolGetAdCPCapabilities = "get_adcp_capabilities"
	ToolCheckGovernance     = "check_governance"
	ToolCreateMediaBuy      = "create_media_buy"
	ToolUpdateMediaBuy      = "update_media_buy"
	ToolGetMediaBuys        = "get_media_buys"
	ToolReportPlanOutcome   = "report_plan_outcome"
	ToolSyncPlans           = "sync_plans"
	toolSyncGovernance      = "sync_governance"
	// ToolGetTaskStatus is the 3.1 polling alias; ToolTasksGet the legacy name
	// every 3.x agent keeps; ToolTasksGetUnderscore the @adcp/sdk spelling.
	ToolGetTaskStatus      = "get_task_status"
	ToolTasksGet           = "tasks/get"
	ToolTasksGetUnderscore = "tasks_get"
	// ToolListTasks is the 3.1 alias of legacy ToolTasksList.
	ToolListTasks = "list_tasks"
	ToolTasksList = "tasks/list"
)

// toolInfo says how a tool's requests are checked and keyed.
type toolInfo struct {
	schema   string // 3.1.19 request schema, relative to the schema root
	schema32 string // 3.2.3's, when it differs from schema ("-": 3.2.3 ships none)
	mutating bool   // needs an Intent: key and bytes fixed per intent
	noKey    bool   // exempt from idempotency_key (get_adcp_capabilities)
}

// schemaIn returns the tool's request schema in wire version's release ("" for none).
func (t toolInfo) schemaIn(version string) string {
	if shapesOf(version) == WireVersion || t.schema32 == "" {
		return t.schema
	}
	if t.schema32 == "-" {
		return ""
	}
	return t.schema32
}

var tools = map[string]toolInfo{
	ToolGetAdCPCapabilities: {schema: "protocol/get-adcp-capabilities-request.json", noKey: true},
	ToolCheckGovernance:     {schema: "governance/check-governance-request.json"},
	ToolCreateMediaBuy:      {schema: "media-buy/create-media-buy-request.json", mutating: true},
	ToolUpdateMediaBuy:      {schema: "media-buy/update-media-buy-request.json", mutating: true},
	ToolGetMediaBuys:        {schema: "media-buy/get-media-buys-request.json"},
	toolGetMediaBuyDelivery: {}, // 3.1.19 ships no schema for it (see delivery.go)
	ToolReportPlanOutcome:   {schema: "governance/report-plan-outcome-request.json", mutating: true},
	ToolSyncPlans:           {schema: "governance/sync-plans-request.json", mutating: true},
	// The 3.2.3 buyer subset vendored here (internal/adcpschemas) carries neither: upstream
	// ships list_tasks only bundled and sync_governance outside a buyer's closure. A 3.2 call
	// of either is refused before it is sent; tasks/list and a 3.1 sync_governance remain.
	toolSyncGovernance:     {schema: "account/sync-governance-request.json", schema32: "-", mutating: true},
	ToolGetTaskStatus:      {schema: "protocol/get-task-status-request.json"},
	ToolTasksGet:           {schema: "core/tasks-get-request.json"},
	ToolTasksGetUnderscore: {schema: "core/tasks-get-request.json"},
	ToolListTasks:          {schema: "protocol/list-tasks-request.json", schema32: "-"},
	ToolTasksList:          {schema: "core/tasks-list-request.json"},
}

// Intent is one mutating call, fixed once: the idempotency key and the exact
// argument bytes (envelope fields included) never change across retries.
// Store it write-ahead (the ledger keeps Body verbatim) and hand the same
// value to Client.Send on every attempt, bumping only Attempt.
type Intent struct {
	Task    string    `json:"task"`    // MCP tool name, e.g. ToolCreateMediaBuy
	Key     string    `json:"key"`     // idempotency_key inside Body; a secret: log a prefix at most
	Body    []byte    `json:"body"`    // exact tools/call arguments, compact JSON; store verbatim
	Created time.Time `json:"created"` // when the intent was fixed; bounds resends by the replay window (zero = refuse resends)
	// Attempt is 0 for the first send and counts resends. A resend (Attempt > 0)
	// is refused at an agent that declares no replay window.
	Attempt int `json:"attempt"`
}

// Retry returns a copy of in marked as the next attempt; Key and Body are
// unchanged.
func (in Intent) Retry() Intent {
	in.Attempt++
	return in
}

// NewIntent fixes a mutating request. req is a typed request (e.g.
// CreateMediaBuyRequest) or any value that marshals to a JSON object. The
// request's idempotency_key is kept if set, else a fresh UUID v4 is used;
// adcp_version "3.1" (and the deprecated adcp_major_version 3) are added.
// created is the caller's clock reading.
//
// The bytes are compact JSON with sorted keys and HTML-escaped strings, the
// form encoding/json produces, so re-encoding them inside the JSON-RPC
// envelope does not change them.
func NewIntent(task string, req any, created time.Time) (Intent, error) {
	return NewIntentAt(WireVersion, task, req, created)
}

// NewIntentAt is NewIntent for an agent that speaks AdCP version (Client.Speaks): the body
// carries adcp_version version, and Send validates it in that version's schemas.
func NewIntentAt(version, task string, req any, created time.Time) (Intent, error) {
	t, ok := tools[task]
	if !ok || !t.mutating {
		return Intent{}, fmt.Errorf("adcp: new intent: %q is not a mutating AdCP task", task)
	}
	m, err := toObject(req)
	if err != nil {
		return Intent{}, fmt.Errorf("adcp: new intent for %s: %w", task, err)
	}
	var key string
	if raw, ok := m["idempotency_key"]; ok {
		if err := json.Unmarshal(raw, &key); err != nil {
			return Intent{}, fmt.Errorf("adcp: new intent for %s: idempotency_key: %w", task, err)
		}
	}
	if key == "" {
		key = uuid.NewString()
	}
	body, err := finishBody(m, key, version)
	if err != nil {
		return Intent{}, fmt.Errorf("adcp: new intent for %s: %w", task, err)
	}
	return Intent{Task: task, Key: key, Body: body, Created: created}, nil
}

// At returns the intent with its body in AdCP version instead: the same key, arguments,
// creation time and attempt, the envelope's adcp_version replaced. It is for a request fixed
// before its agent was asked (a campaign's plan, built at submit) whose shape the two versions
// share (sync_plans: 3.2 only adds optional fields); the same intent and version always give
// the same bytes, so a resend repeats the first send.
func (in Intent) At(version string) (Intent, error) {
	if bodyVersion(in.Body) == version {
		return in, nil
	}
	m, err := toObject(json.RawMessage(in.Body))
	if err != nil {
		return Intent{}, fmt.Errorf("adcp: %s intent at %s: %w", in.Task, version, err)
	}
	if in.Body, err = finishBody(m, in.Key, version); err != nil {
		return Intent{}, fmt.Errorf("adcp: %s intent at %s: %w", in.Task, version, err)
	}
	return in, nil
}

// toObject marshals v and decodes it as a JSON object.
func toObject(v any) (map[string]json.RawMessage, error) {
	var b []byte
	switch x := v.(type) {
	case json.RawMessage:
		b = x
	case []byte:
		b = x
	default:
		var err error
		if b, err = json.Marshal(v); err != nil {
			return nil, fmt.Errorf("marshal request: %w", err)
		}
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("request must be a JSON object: %w", err)
	}
	if m == nil {
		m = map[string]json.RawMessage{}
	}
	return m, nil
}

// finishBody adds the envelope fields for AdCP version and marshals the arguments. An empty
// key leaves idempotency_key out.
func finishBody(m map[string]json.RawMessage, key, version string) ([]byte, error) {
	if key != "" {
		k, _ := json.Marshal(key) // marshalling a string cannot fail
		m["idempotency_key"] = k
	}
	v, _ := json.Marshal(version) // marshalling a string cannot fail
	m["adcp_version"] = v
	m["adcp_major_version"] = json.RawMessage(fmt.Sprint(wireMajor))
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("marshal arguments: %w", err)
	}
	return b, nil
}

// RequestVersion returns the wire version whose request schema the intent's body is checked
// against (the version its body was shaped for), or an error if the intent's task is not a
// mutating one: a caller refuses to store an intent that could never be sent.
func (in Intent) RequestVersion() (string, error) {
	if !tools[in.Task].mutating {
		return "", fmt.Errorf("adcp: validate intent: %q is not a mutating AdCP task", in.Task)
	}
	return shapesOf(bodyVersion(in.Body)), nil
}

// NewIntent fixes a mutating request for agentID in the AdCP version negotiated with it
// (Speaks), shaped for that version (see shape).
func (c *Client) NewIntent(ctx context.Context, agentID, task string, req any, created time.Time) (Intent, error) {
	version, err := c.Speaks(ctx, agentID)
	if err != nil {
		return Intent{}, err
	}
	return NewIntentAt(version, task, req, created)
}
