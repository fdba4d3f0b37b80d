package adcptest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Version strings the agents speak.
const (
	// version31 is the default wire version: flat 3.1 responses.
	version31 = "3.1"
	// Version30 selects the 3.0 field names (check_governance status instead
	// of verdict, report_plan_outcome status instead of outcome_state, media
	// buy status at the root of a create/update success, no adcp_version).
	Version30 = "3.0"
	// Version32 makes a 3.2-only agent: it advertises ["3.2"], validates every request against
	// the 3.2.3 schemas, refuses a task request that is not pinned to 3.2 or later within
	// major 3 (it cannot downshift to a release it does not list) and answers in 3.2's shapes
	// (adcp_version "3.2"; check_governance with check_type and its verdict rules).
	Version32 = "3.2"
)

// Call is one recorded tool call.
type Call struct {
	// Tool is the MCP tool name ("create_media_buy", "tasks/get", ...).
	Tool string
	// Arguments is the raw JSON of the call's arguments as received.
	Arguments json.RawMessage
	// Time is when the agent received the call (agent clock).
	Time time.Time
	// AuthOK reports whether the bearer token matched.
	AuthOK bool
	// ValidationError is the schema violation, "" when the request was valid.
	ValidationError string
	// Fault names an injected fault that answered the call instead of the
	// tool ("http_500", "slow", "rate_limited"), "" otherwise.
	Fault string
	// Result is the structuredContent returned (nil for HTTP faults).
	Result json.RawMessage
	// IsError reports whether the result carried isError.
	IsError bool
	// ErrorCode is the adcp_error code when IsError.
	ErrorCode string
	// Replayed reports an idempotent replay.
	Replayed bool
}

// AdcpError is the core/error.json shape returned in adcp_error.
type AdcpError struct {
	// Code is the error code (enums/error-code.json, open vocabulary).
	Code string `json:"code"`
	// Message is the human-readable explanation.
	Message string `json:"message"`
	// Field is the offending field in JSONPath-lite form.
	Field string `json:"field,omitempty"`
	// Suggestion says how to fix the request.
	Suggestion string `json:"suggestion,omitempty"`
	// RetryAfter is the wait in seconds for transient errors (1–3600).
	RetryAfter float64 `json:"retry_after,omitempty"`
	// Issues lists schema violations (INVALID_REQUEST).
	Issues []schemaIssue `json:"issues,omitempty"`
	// Details carries code-specific data (e.g. error-details/rate-limited.json).
	Details map[string]any `json:"details,omitempty"`
	// Recovery is transient, correctable or terminal.
	Recovery string `json:"recovery,omitempty"`
}

func (e *AdcpError) Error() string { return strings.ToLower(e.Code) + ": " + e.Message }

// Config is shared by both agents.
type commonOptions struct {
	Name          string
	Token         string
	Tokens        []string
	Version       string
	Now           func() time.Time
	SchemaDir     string
	Validator     *Validator
	PollsPerStep  int
	StepInterval  time.Duration
	SlowDelay     time.Duration
	RetryAfter    int
	ReplayTTL     time.Duration
	IdempotencyOK bool
	SSE           bool
}

// agent is the machinery the seller and governance agents share: MCP
// server, auth, validation, recording, idempotency, tasks and faults.
type agent struct {
	opts      commonOptions
	validator *Validator
	valErr    error
	server    *mcp.Server
	mux       *http.ServeMux
	ts        *httptest.Server
	route     func(*Task) // called after a task changes status (webhooks)

	stepMu      sync.Mutex // serialises task transitions (Advance, Finish, AdvanceDue)
	mu          sync.Mutex
	calls       []Call
	idem        map[string]*idemEntry
	inFlight    map[string]bool
	byPO        map[string]string
	tasks       map[string]*Task
	taskOrder   []string
	faultCounts map[string]int
	rateNext    int
	httpNext    []httpFault
	seq         int
	scenarios   []Scenario // the buyer storyboards' fixture scenarios (scenario.go)
}

type httpFault struct {
	status int
	delay  time.Duration
	after  bool // delay the response after the call ran (a lost response)
}

type idemEntry struct {
	hash   string
	at     time.Time
	result map[string]any
}

func newAgent(o commonOptions) *agent {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Version == "" {
		o.Version = version31
	}
	if o.SlowDelay == 0 {
		o.SlowDelay = 2 * time.Second
	}
	if o.RetryAfter == 0 {
		o.RetryAfter = 1
	}
	if o.ReplayTTL == 0 {
		o.ReplayTTL = 24 * time.Hour
	}
	a := &agent{
		opts:        o,
		idem:        map[string]*idemEntry{},
		inFlight:    map[string]bool{},
		byPO:        map[string]string{},
		tasks:       map[string]*Task{},
		faultCounts: map[string]int{},
		mux:         http.NewServeMux(),
	}
	a.validator = o.Validator
	switch {
	case o.Version == Version32:
		a.validator, a.valErr = NewValidator32() // its own schemas, whatever it was given
	case a.validator == nil:
		a.validator, a.valErr = NewValidator(o.SchemaDir)
	}
	a.server = mcp.NewServer(&mcp.Implementation{Name: o.Name, Version: "3.1.19"}, nil)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return a.server },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: !o.SSE})
	a.mux.Handle("/mcp", a.faultMiddleware(h))
	return a
}

func (a *agent) now() time.Time { return a.opts.Now().UTC() }

func (a *agent) nextID(prefix string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seq++
	return fmt.Sprintf("%s_%04d_%s", prefix, a.seq, uuid.NewString()[:8])
}

// ServeHTTP serves /mcp (and whatever else the agent registered).
func (a *agent) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.mux.ServeHTTP(w, r) }

// start serves h on 127.0.0.1 on a free port.
func (a *agent) start(h http.Handler) string {
	a.ts = httptest.NewUnstartedServer(h)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("adcptest: listen on loopback: %v", err))
	}
	_ = a.ts.Listener.Close()
	a.ts.Listener = ln
	a.ts.Start()
	return a.ts.URL
}

func (a *agent) close() {
	if a.ts != nil {
		a.ts.CloseClientConnections()
		a.ts.Close()
	}
}

// Calls returns every recorded call in arrival order.
func (a *agent) Calls() []Call {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Call(nil), a.calls...)
}

// CallsTo returns the recorded calls to tool.
func (a *agent) CallsTo(tool string) []Call {
	var out []Call
	for _, c := range a.Calls() {
		if c.Tool == tool {
			out = append(out, c)
		}
	}
	return out
}

func (a *agent) record(c Call) {
	a.mu.Lock()
	a.calls = append(a.calls, c)
	a.mu.Unlock()
}

// RateLimitNext makes the next n tool calls (any tool but
// get_adcp_capabilities) answer RATE_LIMITED.
func (a *agent) RateLimitNext(n int) {
	a.mu.Lock()
	a.rateNext += n
	a.mu.Unlock()
}

// FailNextHTTP makes the next n MCP tool-call POSTs answer with HTTP status
// code (e.g. 503) before reaching MCP.
func (a *agent) FailNextHTTP(n, status int) {
	a.mu.Lock()
	for range n {
		a.httpNext = append(a.httpNext, httpFault{status: status})
	}
	a.mu.Unlock()
}

// DelayNext makes the next n MCP tool-call POSTs wait d (or until the client
// gives up) before they are served.
func (a *agent) DelayNext(n int, d time.Duration) {
	a.mu.Lock()
	for range n {
		a.httpNext = append(a.httpNext, httpFault{delay: d})
	}
	a.mu.Unlock()
}

// ---- request context ----

// call is the parsed state of one tool call handed to a tool body.
type call struct {
	tool    string
	raw     json.RawMessage
	args    map[string]any
	fields  map[string]json.RawMessage
	owner   string
	version string
	script  script
	now     time.Time
}

func (c *call) str(key string) string {
	s, _ := c.args[key].(string)
	return s
}

// reply is what a tool body returns.
type reply struct {
	body map[string]any // flat body; envelope fields are added by the wrapper
	err  *AdcpError     // tool-level error (isError)
	// isError answers body itself with isError, for tools whose error arm is not
	// core/error.json (comply_test_controller's success: false).
	isError bool
}

type toolFunc func(ctx context.Context, c *call) reply

var openObjectSchema = map[string]any{"type": "object", "properties": map[string]any{}}

// addTool registers name with the AdCP wrapper around fn.
func (a *agent) addTool(name, desc string, fn toolFunc) {
	a.server.AddTool(&mcp.Tool{Name: name, Description: desc, InputSchema: openObjectSchema},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return a.handle(ctx, name, req, fn), nil
		})
}

func (a *agent) handle(ctx context.Context, tool string, req *mcp.CallToolRequest, fn toolFunc) *mcp.CallToolResult {
	raw := json.RawMessage(`{}`)
	if req.Params != nil && len(req.Params.Arguments) > 0 {
		raw = append(json.RawMessage(nil), req.Params.Arguments...)
	}
	rec := Call{Tool: tool, Arguments: raw, Time: a.now()}
	var hdr http.Header
	if req.Extra != nil {
		hdr = req.Extra.Header
	}
	c := &call{tool: tool, raw: raw, now: rec.Time, version: a.opts.Version}
	_ = json.Unmarshal(raw, &c.args)
	_ = json.Unmarshal(raw, &c.fields)
	if c.args == nil {
		c.args = map[string]any{}
	}
	finish := func(res map[string]any, e *AdcpError, replayed bool) *mcp.CallToolResult {
		out := a.envelope(c, res, e)
		b, _ := json.Marshal(out)
		rec.Result, rec.IsError, rec.Replayed = b, e != nil, replayed
		if e != nil {
			rec.ErrorCode = e.Code
		}
		a.record(rec)
		return &mcp.CallToolResult{
			Content:           []mcp.Content{&mcp.TextContent{Text: string(b)}},
			StructuredContent: json.RawMessage(b),
			IsError:           e != nil,
		}
	}

	// Auth: Authorization: Bearer is canonical; x-adcp-auth is the legacy alias. The HTTP
	// middleware already refused the request without them; this keeps a tool body from ever
	// running unauthenticated should a request reach MCP another way.
	tok, present := bearer(hdr)
	if !present {
		return finish(nil, &AdcpError{Code: "AUTH_MISSING", Message: "no bearer credential on the request", Recovery: "terminal"}, false)
	}
	if !a.tokenOK(tok) {
		return finish(nil, &AdcpError{Code: "AUTH_INVALID", Message: "bearer credential not recognised", Recovery: "terminal"}, false)
	}
	rec.AuthOK = true
	c.owner = tok

	if a.valErr != nil {
		return finish(nil, &AdcpError{Code: "SERVICE_UNAVAILABLE", Message: "schemas unavailable: " + a.valErr.Error(), Recovery: "terminal"}, false)
	}
	if err := a.validator.ValidateRequest(tool, raw); err != nil {
		rec.ValidationError = err.Error()
		e := &AdcpError{Code: "INVALID_REQUEST", Message: err.Error(), Recovery: "correctable"}
		var se *SchemaError
		if errors.As(err, &se) {
			e.Field, e.Issues, e.Message = se.Field, se.Issues, "request does not match "+se.Schema+": "+se.Message
		}
		return finish(nil, e, false)
	}

	// Version negotiation: downshift within major 3, refuse other majors. A 3.2-only agent
	// has nothing to downshift to: it refuses a task in an older release (or none); the
	// capabilities read, which is how a buyer learns the versions, is answered whatever it says.
	if a.opts.Version == Version32 {
		if v := c.str("adcp_version"); tool != "get_adcp_capabilities" && !atLeast32(v) {
			return finish(nil, &AdcpError{Code: "VERSION_UNSUPPORTED", Message: fmt.Sprintf("adcp_version %q is not supported; supported: 3.2", v), Field: "adcp_version", Recovery: "correctable"}, false)
		}
	} else if v := c.str("adcp_version"); v != "" {
		if !strings.HasPrefix(v, "3.") {
			return finish(nil, &AdcpError{Code: "VERSION_UNSUPPORTED", Message: "adcp_version " + v + " is not supported; supported: 3.0, 3.1", Field: "adcp_version", Recovery: "correctable"}, false)
		}
		if v < c.version {
			c.version = Version30
		}
	} else if m, ok := c.args["adcp_major_version"].(float64); ok && m != 3 {
		return finish(nil, &AdcpError{Code: "VERSION_UNSUPPORTED", Message: "adcp_major_version " + strconv.Itoa(int(m)) + " is not supported", Field: "adcp_major_version", Recovery: "correctable"}, false)
	} else if ok {
		// The integer alone is how a 3.0 client pins its version (adcp_version arrived in
		// 3.1, whose clients send both): answer it in 3.0's shape, as a 3.0 seller would.
		c.version = Version30
	}

	c.script = a.parse(c.args)
	key := c.str("idempotency_key")
	if sc := a.scenarioFor(tool, c.args); sc != nil && sc.Tokens != "" {
		c.script.add(sc.Tokens)
	}
	if e := a.scenarioError(c); e != nil {
		rec.Fault = "scenario"
		return finish(nil, e, false)
	}

	if tool != "get_adcp_capabilities" {
		a.mu.Lock()
		limited := a.rateNext > 0
		if limited {
			a.rateNext--
		} else if n := c.script.count("rate_limited"); n > 0 {
			fk := "rate_limited|" + key
			if key == "" || a.faultCounts[fk] < n {
				a.faultCounts[fk]++
				limited = true
			}
		}
		a.mu.Unlock()
		if limited {
			rec.Fault = "rate_limited"
			return finish(nil, &AdcpError{Code: "RATE_LIMITED", Message: "request rate exceeded", Recovery: "transient",
				RetryAfter: float64(a.opts.RetryAfter),
				Details:    map[string]any{"limit": 10, "remaining": 0, "window_seconds": 60, "scope": "account"}}, false)
		}
	}

	var hash, ikey string
	if key != "" && tool != "get_adcp_capabilities" && a.opts.IdempotencyOK {
		hash = canonicalHash(tool, c.args)
		ikey = tok + "|" + key
		// One critical section for lookup and in-flight claim, so a
		// concurrent same-key call either replays or sees IN_FLIGHT.
		a.mu.Lock()
		ent := a.idem[ikey]
		busy := false
		if ent == nil {
			fk := "in_flight|" + key
			busy = a.inFlight[ikey]
			if !busy && c.script.count("in_flight") > a.faultCounts[fk] {
				a.faultCounts[fk]++
				busy = true
				rec.Fault = "in_flight"
			}
			if !busy {
				a.inFlight[ikey] = true
			}
		}
		a.mu.Unlock()
		switch {
		case ent != nil && c.now.Sub(ent.at) > a.opts.ReplayTTL:
			return finish(nil, &AdcpError{Code: "IDEMPOTENCY_EXPIRED", Message: "idempotency_key is past the replay window", Field: "idempotency_key", Recovery: "correctable"}, false)
		case ent != nil && ent.hash != hash:
			return finish(nil, &AdcpError{Code: "IDEMPOTENCY_CONFLICT", Message: "idempotency_key was used with a different request", Field: "idempotency_key", Recovery: "correctable"}, false)
		case ent != nil:
			res := cloneMap(ent.result)
			res["replayed"] = true
			delete(res, "context")
			if ctxRaw, ok := c.fields["context"]; ok {
				res["context"] = ctxRaw // echo this request's context
			}
			b, _ := json.Marshal(res)
			rec.Result, rec.Replayed = b, true
			a.record(rec)
			return &mcp.CallToolResult{
				Content:           []mcp.Content{&mcp.TextContent{Text: string(b)}},
				StructuredContent: json.RawMessage(b),
			}
		case busy:
			return finish(nil, &AdcpError{Code: "IDEMPOTENCY_IN_FLIGHT", Message: "a request with this idempotency_key is still being processed", Field: "idempotency_key", Recovery: "transient", RetryAfter: float64(a.opts.RetryAfter)}, false)
		}
		defer func() {
			a.mu.Lock()
			delete(a.inFlight, ikey)
			a.mu.Unlock()
		}()
	}
	r := fn(ctx, c)
	if r.err != nil {
		return finish(nil, r.err, false)
	}
	res := a.envelope(c, r.body, nil)
	if r.isError {
		out := finish(res, nil, false)
		out.IsError = true
		return out
	}
	if ikey != "" {
		a.mu.Lock()
		a.idem[ikey] = &idemEntry{hash: hash, at: c.now, result: cloneMap(res)}
		a.mu.Unlock()
	}
	return finish(res, nil, false)
}

// envelope adds the flat protocol-envelope fields to a body (or builds an
// error body). It is idempotent on an already enveloped body.
func (a *agent) envelope(c *call, body map[string]any, e *AdcpError) map[string]any {
	out := map[string]any{}
	for k, v := range body {
		out[k] = v
	}
	if e != nil {
		// Two-layer error model: the envelope adcp_error and the payload errors[].
		out["adcp_error"] = e
		out["errors"] = []*AdcpError{e}
		out["status"] = "failed"
		if c.version == Version30 {
			delete(out, "status")
		}
	}
	if _, ok := out["status"]; !ok && e == nil {
		// 3.0 carries the task status at the root too (v3_envelope_integrity grades it);
		// only its create/update and governance answers put another status there.
		out["status"] = "completed"
	}
	if ctxRaw, ok := c.fields["context"]; ok {
		out["context"] = ctxRaw
	}
	switch c.version {
	case Version30:
	case Version32:
		out["adcp_version"] = Version32
	default:
		out["adcp_version"] = version31
	}
	if _, ok := out["timestamp"]; !ok {
		out["timestamp"] = c.now.Format(time.RFC3339)
	}
	return out
}

// tokenOK reports whether tok is one of the agent's bearer credentials.
func (a *agent) tokenOK(tok string) bool {
	ok := subtle.ConstantTimeCompare([]byte(tok), []byte(a.opts.Token)) == 1
	for _, t := range a.opts.Tokens {
		ok = subtle.ConstantTimeCompare([]byte(tok), []byte(t)) == 1 || ok
	}
	return ok
}

func bearer(h http.Header) (string, bool) {
	if h == nil {
		return "", false
	}
	if v := h.Get("Authorization"); v != "" {
		if t, ok := strings.CutPrefix(v, "Bearer "); ok {
			return strings.TrimSpace(t), true
		}
		return "", true // present but not a bearer credential
	}
	if v := h.Get("X-Adcp-Auth"); v != "" {
		return v, true
	}
	return "", false
}

// canonicalHash hashes the request the way the idempotency rules say:
// SHA-256 over the canonical JSON (sorted keys, compact) of the arguments
// minus idempotency_key, context, governance_context and
// push_notification_config.authentication.credentials. Go's encoder sorts
// map keys and prints float64 the ECMAScript way, which matches RFC 8785
// for the values AdCP requests carry.
func canonicalHash(tool string, args map[string]any) string {
	m := cloneMap(args)
	delete(m, "idempotency_key")
	delete(m, "context")
	delete(m, "governance_context")
	if pnc, ok := m["push_notification_config"].(map[string]any); ok {
		pnc = cloneMap(pnc)
		if au, ok := pnc["authentication"].(map[string]any); ok {
			au = cloneMap(au)
			delete(au, "credentials")
			pnc["authentication"] = au
		}
		m["push_notification_config"] = pnc
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(map[string]any{"tool": tool, "args": m})
	sum := sha256.Sum256(bytes.TrimSpace(buf.Bytes()))
	return hex.EncodeToString(sum[:])
}

func cloneMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// faultMiddleware applies HTTP-level faults (5xx, slow responses) to MCP
// tools/call POSTs before the MCP handler sees them.
func (a *agent) faultMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
		if err != nil {
			http.Error(w, "read body", http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			} `json:"params"`
		}
		parseErr := json.Unmarshal(body, &msg)
		// Credentials are checked before MCP sees the request, the handshake included, as
		// the SDK's sellers do (RFC 6750: HTTP 401 and a challenge), never as a tool result.
		{
			tok, present := bearer(r.Header)
			if !present || !a.tokenOK(tok) {
				code, jcode, text := "AUTH_INVALID", -32028, "bearer credential not recognised"
				if !present {
					code, text = "AUTH_MISSING", "no bearer credential on the request"
				}
				if msg.Method == "tools/call" {
					a.record(Call{Tool: msg.Params.Name, Arguments: append(json.RawMessage(nil), msg.Params.Arguments...), Time: a.now(), Fault: "http_401", IsError: true, ErrorCode: code})
				}
				e, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "error": map[string]any{
					"code": jcode, "message": text,
					"data": map[string]any{"adcp_error": AdcpError{Code: code, Message: text, Recovery: "terminal"}},
				}})
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("WWW-Authenticate", `Bearer realm="adcp"`)
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = w.Write(e)
				return
			}
		}
		if jsonOK, streamOK := accepts(r.Header.Values("Accept")); !jsonOK || !streamOK {
			// The MCP TypeScript SDK's answer (a JSON 406), not the Go SDK's text/plain 400:
			// a buyer that reads the body of an error must get JSON from an SDK seller.
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotAcceptable)
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","error":{"code":-32000,"message":"Not Acceptable: Client must accept both application/json and text/event-stream"},"id":null}`))
			return
		}
		if parseErr != nil || msg.Method != "tools/call" || msg.Params.Name == "get_adcp_capabilities" {
			next.ServeHTTP(w, r)
			return
		}
		var args map[string]any
		_ = json.Unmarshal(msg.Params.Arguments, &args)
		if a.scenarioHTTP(w, msg.ID, msg.Params.Name, msg.Params.Arguments, args, true) {
			return
		}
		sc := a.parse(args)
		key, _ := args["idempotency_key"].(string)

		var f httpFault
		name := ""
		a.mu.Lock()
		if len(a.httpNext) > 0 {
			f, a.httpNext = a.httpNext[0], a.httpNext[1:]
		} else {
			for _, tok := range []string{"http_500", "http_503", "slow", "slow_commit"} {
				n := sc.count(tok)
				if n == 0 {
					continue
				}
				fk := tok + "|" + key
				if key != "" && a.faultCounts[fk] >= n {
					continue
				}
				a.faultCounts[fk]++
				switch tok {
				case "http_500":
					f.status = http.StatusInternalServerError
				case "http_503":
					f.status = http.StatusServiceUnavailable
				case "slow":
					f.delay = a.opts.SlowDelay
				case "slow_commit":
					f.delay, f.after = a.opts.SlowDelay, true
				}
				break
			}
		}
		a.mu.Unlock()
		switch {
		case f.status != 0:
			name = "http_" + strconv.Itoa(f.status)
		case f.after:
			// The call runs (and is recorded by the tool wrapper); only the
			// response is held back, as when a reply is lost after commit.
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, r)
			if !sleep(r.Context(), f.delay) {
				return
			}
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
			return
		case f.delay != 0:
			name = "slow"
		default:
			next.ServeHTTP(w, r)
			return
		}
		tok, authOK := bearer(r.Header)
		authOK = authOK && a.tokenOK(tok)
		a.record(Call{Tool: msg.Params.Name, Arguments: append(json.RawMessage(nil), msg.Params.Arguments...), Time: a.now(), AuthOK: authOK, Fault: name})
		if f.delay > 0 {
			if !sleep(r.Context(), f.delay) {
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(f.status)
		_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","error":{"code":-32603,"message":"simulated HTTP %d"}}`, f.status)
	})
}

// accepts reports whether Accept values admit JSON and an event stream, as the MCP
// streamable HTTP transport requires of every POST.
func accepts(values []string) (jsonOK, streamOK bool) {
	for _, v := range values {
		for _, raw := range strings.Split(v, ",") {
			base, _, _ := strings.Cut(strings.TrimSpace(raw), ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return jsonOK, streamOK
}

// ---- tasks ----

// Task is the agent's view of one asynchronous AdCP task.
type Task struct {
	// ID is the task_id.
	ID string
	// Type is the task_type (create_media_buy, update_media_buy, check_governance).
	Type string
	// Protocol is media-buy or governance.
	Protocol string
	// Status is the current task status.
	Status string
	// CreatedAt, UpdatedAt and CompletedAt are on the agent clock;
	// CompletedAt is zero until the task is terminal.
	CreatedAt, UpdatedAt, CompletedAt time.Time
	// Remaining is the scripted statuses still to come, in order.
	Remaining []string
	// Result is the completion artifact (set once terminal, or the interim
	// body for input-required).
	Result map[string]any
	// Error is the task error for failed tasks.
	Error *AdcpError
	// Message is the human-readable status message.
	Message string
	// Context is the creating request's context, echoed on polls and webhooks.
	Context json.RawMessage
	// Push is the registered push_notification_config, nil if none.
	Push *PushConfig

	owner   string
	polls   int
	history []map[string]any
	finish  func(status string) (map[string]any, *AdcpError)
	script  script
	held    []webhookEvent
	outbox  []webhookEvent
	sending bool
	seq     int
}

// PushConfig is the buyer's push_notification_config.
type PushConfig struct {
	// URL is where notifications are POSTed.
	URL string `json:"url"`
	// OperationID is echoed in every notification.
	OperationID string `json:"operation_id,omitempty"`
	// Token is echoed in every notification.
	Token string `json:"token,omitempty"`
	// Scheme is "" (RFC 9421), "HMAC-SHA256" or "Bearer".
	Scheme string `json:"-"`
	// Credentials is the legacy HMAC secret or bearer credential.
	Credentials string `json:"-"`
}

func terminal(status string) bool {
	switch status {
	case "completed", "failed", "canceled", "rejected":
		return true
	}
	return false
}

func (a *agent) newTask(c *call, typ, protocol, status string, remaining []string,
	finish func(string) (map[string]any, *AdcpError)) *Task {
	t := &Task{
		ID: a.nextID("task"), Type: typ, Protocol: protocol, Status: status,
		CreatedAt: c.now, UpdatedAt: c.now, Remaining: remaining,
		Context: c.fields["context"], owner: c.owner, finish: finish, script: c.script,
	}
	t.history = append(t.history, map[string]any{"timestamp": c.now.Format(time.RFC3339), "type": "request", "data": json.RawMessage(c.raw)})
	a.mu.Lock()
	a.tasks[t.ID] = t
	a.taskOrder = append(a.taskOrder, t.ID)
	a.mu.Unlock()
	return t
}

// Advance moves task id one scripted step forward (e.g. submitted → working
// → completed) and fires its webhook. It returns the new status.
func (a *agent) Advance(id string) (string, error) {
	a.stepMu.Lock()
	defer a.stepMu.Unlock()
	return a.advance(id)
}

func (a *agent) advance(id string) (string, error) {
	a.mu.Lock()
	t, ok := a.tasks[id]
	if !ok {
		a.mu.Unlock()
		return "", fmt.Errorf("advance %s: no such task", id)
	}
	if len(t.Remaining) == 0 {
		st := t.Status
		a.mu.Unlock()
		return st, fmt.Errorf("advance %s: task is %s with no scripted step left", id, st)
	}
	next := t.Remaining[0]
	t.Remaining = t.Remaining[1:]
	a.mu.Unlock()
	a.setStatus(t, next)
	return next, nil
}

// Finish forces task id to status (any task status), skipping the script.
func (a *agent) Finish(id, status string) error {
	a.stepMu.Lock()
	defer a.stepMu.Unlock()
	a.mu.Lock()
	t, ok := a.tasks[id]
	if ok {
		t.Remaining = nil
	}
	a.mu.Unlock()
	if !ok {
		return fmt.Errorf("finish %s: no such task", id)
	}
	a.setStatus(t, status)
	return nil
}

// AdvanceDue advances, by one step, every task whose StepInterval (agent
// clock) has elapsed since its last change. It returns how many tasks moved.
// Polls call it; a long-running process calls it on a ticker.
func (a *agent) AdvanceDue() int {
	if a.opts.StepInterval <= 0 {
		return 0
	}
	a.stepMu.Lock()
	defer a.stepMu.Unlock()
	now := a.now()
	var due []string
	a.mu.Lock()
	for _, id := range a.taskOrder {
		t := a.tasks[id]
		if len(t.Remaining) > 0 && !t.script.has("hold") && now.Sub(t.UpdatedAt) >= a.opts.StepInterval {
			due = append(due, id)
		}
	}
	a.mu.Unlock()
	n := 0
	for _, id := range due {
		if _, err := a.advance(id); err == nil {
			n++
		}
	}
	return n
}

// Task returns a snapshot of task id.
func (a *agent) Task(id string) (Task, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	t, ok := a.tasks[id]
	if !ok {
		return Task{}, false
	}
	cp := *t
	cp.Remaining = append([]string(nil), t.Remaining...)
	return cp, true
}

// Tasks returns snapshots of every task in creation order.
func (a *agent) Tasks() []Task {
	a.mu.Lock()
	ids := append([]string(nil), a.taskOrder...)
	a.mu.Unlock()
	out := make([]Task, 0, len(ids))
	for _, id := range ids {
		t, _ := a.Task(id)
		out = append(out, t)
	}
	return out
}

func (a *agent) setStatus(t *Task, status string) {
	var res map[string]any
	var e *AdcpError
	if t.finish != nil {
		res, e = t.finish(status)
	}
	now := a.now()
	a.mu.Lock()
	t.Status = status
	t.UpdatedAt = now
	switch {
	case status == "working":
		t.Message = "processing"
	case status == "completed":
		t.Message = "task completed"
	case e != nil:
		t.Message = e.Message
	case status == "canceled":
		t.Message = "task canceled"
	}
	t.polls = 0
	if res != nil {
		t.Result = res
	}
	if e != nil {
		t.Error = e
	}
	if terminal(status) {
		t.CompletedAt = now
		t.Remaining = nil
	}
	entry := map[string]any{"timestamp": now.Format(time.RFC3339), "type": "response", "data": map[string]any{"status": status}}
	t.history = append(t.history, entry)
	a.mu.Unlock()
	if a.route != nil {
		a.route(t)
	}
}

// poll is the shared body of get_task_status / tasks/get.
func (a *agent) poll(_ context.Context, c *call) reply {
	id := c.str("task_id")
	a.mu.Lock()
	t, ok := a.tasks[id]
	if ok && t.owner != c.owner {
		ok = false
	}
	advance := false
	if ok && len(t.Remaining) > 0 && a.opts.PollsPerStep > 0 && !t.script.has("hold") {
		t.polls++
		advance = t.polls >= a.opts.PollsPerStep
	}
	a.mu.Unlock()
	if !ok {
		return reply{err: &AdcpError{Code: "REFERENCE_NOT_FOUND", Message: "no task " + id + " for this principal", Field: "task_id", Recovery: "correctable"}}
	}
	if advance {
		_, _ = a.Advance(id)
	}
	a.AdvanceDue()
	inclResult, _ := c.args["include_result"].(bool)
	inclHist, _ := c.args["include_history"].(bool)
	a.mu.Lock()
	defer a.mu.Unlock()
	body := map[string]any{
		"task_id":     t.ID,
		"task_type":   t.Type,
		"protocol":    t.Protocol,
		"status":      t.Status,
		"created_at":  t.CreatedAt.Format(time.RFC3339),
		"updated_at":  t.UpdatedAt.Format(time.RFC3339),
		"has_webhook": t.Push != nil,
	}
	if t.Message != "" {
		body["message"] = t.Message
	}
	if !t.CompletedAt.IsZero() {
		body["completed_at"] = t.CompletedAt.Format(time.RFC3339)
	}
	if t.Status == "working" {
		body["progress"] = map[string]any{"percentage": 50, "current_step": "processing", "total_steps": 2, "step_number": 1}
	}
	if t.Error != nil {
		body["error"] = map[string]any{"code": t.Error.Code, "message": t.Error.Message}
	}
	if inclResult && t.Result != nil && (terminal(t.Status) || t.Status == "input-required") {
		body["result"] = t.Result
	}
	if inclHist {
		body["history"] = append([]map[string]any(nil), t.history...)
	}
	return reply{body: body}
}

// listTasks is the shared body of list_tasks / tasks/list.
func (a *agent) listTasks(_ context.Context, c *call) reply {
	a.AdvanceDue()
	filters, _ := c.args["filters"].(map[string]any)
	set := func(one string, many string) map[string]bool {
		if filters == nil {
			return nil
		}
		m := map[string]bool{}
		if s, ok := filters[one].(string); ok {
			m[s] = true
		}
		if l, ok := filters[many].([]any); ok {
			for _, v := range l {
				if s, ok := v.(string); ok {
					m[s] = true
				}
			}
		}
		if len(m) == 0 {
			return nil
		}
		return m
	}
	statuses := set("status", "statuses")
	types := set("task_type", "task_types")
	protocols := set("protocol", "protocols")
	ids := set("", "task_ids")
	var applied []string
	for _, k := range []string{"status", "statuses", "task_type", "task_types", "protocol", "protocols", "task_ids", "created_after", "created_before", "updated_after", "updated_before", "context_contains", "has_webhook"} {
		if _, ok := filters[k]; ok {
			applied = append(applied, k)
		}
	}
	timeFilter := func(k string) (time.Time, bool) {
		s, _ := filters[k].(string)
		if s == "" {
			return time.Time{}, false
		}
		t, err := time.Parse(time.RFC3339, s)
		return t, err == nil
	}
	sortField, sortDir := "created_at", "desc"
	if s, ok := c.args["sort"].(map[string]any); ok {
		if f, ok := s["field"].(string); ok {
			sortField = f
		}
		if d, ok := s["direction"].(string); ok {
			sortDir = d
		}
	}

	a.mu.Lock()
	var match []*Task
	for _, id := range a.taskOrder {
		t := a.tasks[id]
		if t.owner != c.owner {
			continue
		}
		if statuses != nil && !statuses[t.Status] || types != nil && !types[t.Type] ||
			protocols != nil && !protocols[t.Protocol] || ids != nil && !ids[t.ID] {
			continue
		}
		if v, ok := timeFilter("created_after"); ok && !t.CreatedAt.After(v) {
			continue
		}
		if v, ok := timeFilter("created_before"); ok && !t.CreatedAt.Before(v) {
			continue
		}
		if v, ok := timeFilter("updated_after"); ok && !t.UpdatedAt.After(v) {
			continue
		}
		if v, ok := timeFilter("updated_before"); ok && !t.UpdatedAt.Before(v) {
			continue
		}
		if s, ok := filters["context_contains"].(string); ok && !strings.Contains(string(t.Context), s) {
			continue
		}
		if hw, ok := filters["has_webhook"].(bool); ok && hw != (t.Push != nil) {
			continue
		}
		match = append(match, t)
	}
	key := func(t *Task) string {
		switch sortField {
		case "updated_at":
			return t.UpdatedAt.Format(time.RFC3339Nano) + t.ID
		case "status":
			return t.Status + t.ID
		case "task_type":
			return t.Type + t.ID
		case "protocol":
			return t.Protocol + t.ID
		}
		return fmt.Sprintf("%020d", t.CreatedAt.UnixNano()) + t.ID
	}
	sort.SliceStable(match, func(i, j int) bool {
		if sortDir == "asc" {
			return key(match[i]) < key(match[j])
		}
		return key(match[i]) > key(match[j])
	})
	total := len(match)
	offset, end, pg, perr := pageOf(c, total)
	if perr != nil {
		a.mu.Unlock()
		return reply{err: perr}
	}
	page := match[offset:end]
	status := map[string]int{}
	domain := map[string]int{}
	items := make([]map[string]any, 0, len(page))
	for _, t := range page {
		status[t.Status]++
		domain[t.Protocol]++
		it := map[string]any{
			"task_id": t.ID, "task_type": t.Type, "domain": t.Protocol, "status": t.Status,
			"created_at": t.CreatedAt.Format(time.RFC3339), "updated_at": t.UpdatedAt.Format(time.RFC3339),
			"has_webhook": t.Push != nil,
		}
		if !t.CompletedAt.IsZero() {
			it["completed_at"] = t.CompletedAt.Format(time.RFC3339)
		}
		items = append(items, it)
	}
	a.mu.Unlock()
	if applied == nil {
		applied = []string{}
	}
	return reply{body: map[string]any{
		"query_summary": map[string]any{
			"total_matching": total, "returned": len(items), "status_breakdown": status, "domain_breakdown": domain,
			"filters_applied": applied, "sort_applied": map[string]any{"field": sortField, "direction": sortDir},
		},
		"tasks":      items,
		"pagination": pg,
	}}
}

// sleep waits d, or less when ctx ends first (the client gave up); it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// pageOf reads a request's pagination (max_results, default 50; an opaque offset cursor) over
// total items and returns the page's bounds and the response's pagination object.
func pageOf(c *call, total int) (offset, end int, pg map[string]any, e *AdcpError) {
	limit := 50
	if p, ok := c.args["pagination"].(map[string]any); ok {
		if m, ok := p["max_results"].(float64); ok {
			limit = int(m)
		}
		if cur, ok := p["cursor"].(string); ok && cur != "" {
			n, err := strconv.Atoi(strings.TrimPrefix(cur, "off:"))
			if err != nil || !strings.HasPrefix(cur, "off:") || n < 0 {
				return 0, 0, nil, &AdcpError{Code: "INVALID_REQUEST", Message: "unknown pagination cursor", Field: "pagination.cursor", Recovery: "correctable"}
			}
			offset = n
		}
	}
	if limit < 1 {
		return 0, 0, nil, &AdcpError{Code: "INVALID_REQUEST", Message: "pagination.max_results must be at least 1", Field: "pagination.max_results", Recovery: "correctable"}
	}
	offset = min(offset, total)
	end = min(offset+limit, total)
	pg = map[string]any{"has_more": end < total, "total_count": total}
	if end < total {
		pg["cursor"] = "off:" + strconv.Itoa(end)
	}
	return offset, end, pg, nil
}

// atLeast32 reports whether an adcp_version is 3.2 or a later 3.x ("3.2", "3.3-rc.0").
func atLeast32(v string) bool {
	rest, ok := strings.CutPrefix(v, "3.")
	if !ok {
		return false
	}
	minor, _, _ := strings.Cut(rest, "-")
	n, err := strconv.Atoi(minor)
	return err == nil && n >= 2
}
