package adcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/buyflow/buyflow/internal/reqsign"
)

// mcpProtocolVersion is offered at initialize. It is the newest version that
// uses the initialize handshake; the go-sdk's default (2026-07-28) would first
// try server/discover, which 3.x sellers do not implement.
const mcpProtocolVersion = "2025-11-25"

// Credentials resolves a credential reference (a Secrets Manager secret name)
// to the bearer token sent to an agent. Implementations should cache; the
// value must never be logged.
type Credentials interface {
	Token(ctx context.Context, ref string) (string, error)
}

// CredentialsFunc adapts a function to Credentials.
type CredentialsFunc func(ctx context.Context, ref string) (string, error)

// Token calls f.
func (f CredentialsFunc) Token(ctx context.Context, ref string) (string, error) { return f(ctx, ref) }

// Options configures a Client.
type Options struct {
	// Agents are the only agents ever called: a fixed *Registry, or a registry that changes
	// while the process runs (internal/registry). Exactly one of Registry and Agents is set.
	Registry    *Registry
	Agents      Agents
	Credentials Credentials      // required
	Validator   RequestValidator // required: every request is validated before sending (internal/adcpvalidate)
	// HTTPClient carries the MCP traffic; its Transport is wrapped to add auth.
	// Default: a client with no timeout of its own (CallTimeout bounds calls).
	HTTPClient *http.Client
	// Now is the clock (default time.Now).
	Now func() time.Time
	// NewKey makes idempotency keys for polls and reads (default UUID v4).
	NewKey func() string
	// CallTimeout bounds one tools/call including connection setup (default 30 s).
	CallTimeout time.Duration
	// TokenTimeout bounds one OAuth token request, and OAuth discovery, for agents that
	// authenticate with OAuth (default 10 s): a hanging authorization server fails the call
	// with time left to report it.
	TokenTimeout time.Duration
	// CapabilitiesTTL bounds how long get_adcp_capabilities and tools/list
	// answers are cached per agent (default 1 h).
	CapabilitiesTTL time.Duration
	// Version is reported as the MCP client version (default "dev").
	Version string
	// Guard is asked before every exchange with an agent and told how it ended (the circuit
	// breaker per agent, internal/breaker). Nil lets every exchange through.
	Guard Guard
	// RequestSigner signs the requests an agent's request_signing capability lists (and every
	// request to an agent with SignRequests). Nil: buyflow has no request-signing key, and a
	// call an agent requires signed is refused before it is sent.
	RequestSigner *reqsign.Signer
}

// Guard decides whether an agent may be called now and learns how each call ended.
type Guard interface {
	// Admit returns an *UnavailableError when agentID must not be called now (nothing is
	// sent then). Otherwise the caller reports the exchange's outcome to done exactly once:
	// nil, or the error the exchange ended with.
	Admit(ctx context.Context, agentID string) (done func(error), err error)
}

// Client calls configured AdCP agents over MCP streamable HTTP. It is safe
// for concurrent use; create one per process.
type Client struct {
	opts Options

	mu    sync.Mutex
	caps  map[string]cached[*Capabilities]
	tools map[string]cached[map[string]bool]
	// oauth holds each OAuth agent's discovered token endpoint and current token for the
	// life of the process (one Lambda cold start).
	oauth oauthAgents
}

type cached[T any] struct {
	val T
	at  time.Time
}

// New returns a Client.
func New(opts Options) (*Client, error) {
	var errs []error
	switch {
	case opts.Registry == nil && opts.Agents == nil:
		errs = append(errs, errors.New("registry is required"))
	case opts.Registry != nil && opts.Agents != nil:
		errs = append(errs, errors.New("set Registry or Agents, not both"))
	case opts.Registry != nil:
		opts.Agents = fixedAgents{opts.Registry}
	}
	if opts.Credentials == nil {
		errs = append(errs, errors.New("credentials are required"))
	}
	if opts.Validator == nil {
		errs = append(errs, errors.New("validator is required"))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("adcp: new client: %w", errors.Join(errs...))
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = &http.Client{}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.NewKey == nil {
		opts.NewKey = uuid.NewString
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = 30 * time.Second
	}
	if opts.TokenTimeout <= 0 {
		opts.TokenTimeout = 10 * time.Second
	}
	if opts.CapabilitiesTTL <= 0 {
		opts.CapabilitiesTTL = time.Hour
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	return &Client{opts: opts, caps: map[string]cached[*Capabilities]{}, tools: map[string]cached[map[string]bool]{}}, nil
}

// Send sends a mutating Intent to agent exactly as fixed: same key, same bytes.
// The request is schema-validated first (a *ValidationError means nothing was
// sent). The agent's capabilities are read (cached) before the call; a resend
// (in.Attempt > 0) is refused with a terminal *Error when the agent declares
// no replay window or the intent is older than it, and a transient failure of
// a first attempt at such an agent is reported as terminal, because it cannot
// be retried safely (unless NotSent says nothing left).
//
// Send returns the extracted Response even when the payload reports a failure;
// use the typed helpers (CreateMediaBuy, ...) or Response.Failure to read it.
func (c *Client) Send(ctx context.Context, agentID string, in Intent) (*Response, error) {
	agent, err := c.opts.Agents.Agent(ctx, agentID)
	if err != nil {
		return nil, err
	}
	t, ok := tools[in.Task]
	if !ok || !t.mutating {
		return nil, fmt.Errorf("adcp: send: %q is not a mutating AdCP task", in.Task)
	}
	if err := checkIntentKey(in); err != nil {
		return nil, err
	}
	// The intent was fixed in the version negotiated then; its bytes never change, so it is
	// checked in that version's schemas even if the agent has moved on since.
	version := bodyVersion(in.Body)
	if err := c.opts.Validator.ValidateRequestAt(shapesOf(version), in.Task, in.Body); err != nil {
		return nil, err
	}
	caps, err := c.Capabilities(ctx, agentID)
	if err != nil {
		return nil, beforeSend{fmt.Errorf("adcp: %s at %s: read capabilities first: %w", in.Task, agentID, err)}
	}
	window, hasWindow := caps.ReplayWindow()
	if in.Attempt > 0 {
		if !hasWindow {
			return nil, noReplayWindow(agentID, in.Task, nil)
		}
		if age := c.opts.Now().Sub(in.Created); age >= window {
			return nil, &Error{Kind: KindLocal, Agent: agentID, Tool: in.Task, Code: CodeReplayWindowPassed,
				Recovery: RecoveryTerminal,
				Message:  fmt.Sprintf("intent is %s old, past the agent's %s replay window; reconcile by reading state instead of resending", age.Round(time.Second), window)}
		}
	}
	resp, err := c.callTool(ctx, agent, in.Task, version, json.RawMessage(in.Body))
	if err != nil && !hasWindow && Decide(err) == DecisionRetry && !NotSent(err) {
		return nil, noReplayWindow(agentID, in.Task, err)
	}
	return resp, err
}

func noReplayWindow(agentID, tool string, cause error) *Error {
	msg := "agent declares no adcp.idempotency.replay_ttl_seconds, so a mutating call cannot be retried safely"
	if cause != nil {
		msg = "outcome unknown and " + msg + "; reconcile by reading state"
	}
	return &Error{Kind: KindLocal, Agent: agentID, Tool: tool, Code: CodeNoReplayWindow,
		Recovery: RecoveryTerminal, Message: msg, Err: cause}
}

// checkIntentKey makes sure the body carries the intent's key.
func checkIntentKey(in Intent) error {
	if in.Key == "" {
		return fmt.Errorf("adcp: send %s: intent has no idempotency key", in.Task)
	}
	var probe struct {
		Key string `json:"idempotency_key"`
	}
	if err := json.Unmarshal(in.Body, &probe); err != nil {
		return &ValidationError{Tool: in.Task, Reason: "body is not a JSON object: " + err.Error(),
			Issues: []Issue{{Reason: "body is not a JSON object"}}}
	}
	if probe.Key != in.Key {
		return fmt.Errorf("adcp: send %s: body idempotency_key differs from the intent key", in.Task)
	}
	return nil
}

// Call sends a non-mutating task (a read, a poll, check_governance) with a
// fresh idempotency key and adcp_version, after schema validation. req is a
// typed request or anything that marshals to a JSON object.
func (c *Client) Call(ctx context.Context, agentID, tool string, req any) (*Response, error) {
	return c.callShaped(ctx, agentID, tool, func(string) (any, error) { return req, nil })
}

// callShaped is Call with the request built by shape for the AdCP version negotiated with
// the agent.
func (c *Client) callShaped(ctx context.Context, agentID, tool string, shape func(version string) (any, error)) (*Response, error) {
	agent, err := c.opts.Agents.Agent(ctx, agentID)
	if err != nil {
		return nil, err
	}
	t, ok := tools[tool]
	if !ok {
		return nil, fmt.Errorf("adcp: call: unknown AdCP tool %q", tool)
	}
	if t.mutating {
		return nil, fmt.Errorf("adcp: call: %s is mutating; build an Intent and use Send", tool)
	}
	// get_adcp_capabilities is how the version is chosen, so it goes out in buyflow's default.
	version := WireVersion
	if tool != ToolGetAdCPCapabilities {
		if version, err = c.Speaks(ctx, agentID); err != nil {
			return nil, err
		}
	}
	req, err := shape(version)
	if err != nil {
		return nil, fmt.Errorf("adcp: call %s: %w", tool, err)
	}
	m, err := toObject(req)
	if err != nil {
		return nil, fmt.Errorf("adcp: call %s: %w", tool, err)
	}
	key := ""
	if !t.noKey {
		key = c.opts.NewKey()
	}
	body, err := finishBody(m, key, version)
	if err != nil {
		return nil, fmt.Errorf("adcp: call %s: %w", tool, err)
	}
	if err := c.opts.Validator.ValidateRequestAt(shapesOf(version), tool, body); err != nil {
		return nil, err
	}
	return c.callTool(ctx, agent, tool, version, json.RawMessage(body))
}

// Tools returns the names the agent lists in tools/list, cached per agent.
func (c *Client) Tools(ctx context.Context, agentID string) (map[string]bool, error) {
	agent, err := c.opts.Agents.Agent(ctx, agentID)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if e, ok := c.tools[agentID]; ok && c.opts.Now().Sub(e.at) < c.opts.CapabilitiesTTL {
		c.mu.Unlock()
		return e.val, nil
	}
	c.mu.Unlock()
	done, err := c.admit(ctx, agentID, "tools/list")
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	err = c.withSession(ctx, agent, "tools/list", c.signingPlan(agent, ""), func(ctx context.Context, s *mcp.ClientSession) error {
		for tool, err := range s.Tools(ctx, nil) {
			if err != nil {
				return err
			}
			names[tool.Name] = true
		}
		return nil
	})
	done(err)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.tools[agentID] = cached[map[string]bool]{val: names, at: c.opts.Now()}
	c.mu.Unlock()
	return names, nil
}

// pickTool returns the first of names the agent offers.
func (c *Client) pickTool(ctx context.Context, agentID string, names ...string) (string, error) {
	offered, err := c.Tools(ctx, agentID)
	if err != nil {
		return "", err
	}
	for _, n := range names {
		if offered[n] {
			return n, nil
		}
	}
	return "", &Error{Kind: KindLocal, Agent: agentID, Tool: names[0], Code: CodeToolNotOffered,
		Recovery: RecoveryTerminal, Message: fmt.Sprintf("agent offers none of %q", names)}
}

// PollTool returns the polling tool the agent offers: get_task_status when
// listed, else the legacy tasks/get (or tasks_get).
func (c *Client) PollTool(ctx context.Context, agentID string) (string, error) {
	return c.pickTool(ctx, agentID, ToolGetTaskStatus, ToolTasksGet, ToolTasksGetUnderscore)
}

// ListTool returns list_tasks when listed, else the legacy tasks/list.
func (c *Client) ListTool(ctx context.Context, agentID string) (string, error) {
	return c.pickTool(ctx, agentID, ToolListTasks, ToolTasksList)
}

// callTool runs one tools/call on a fresh MCP session; version is the AdCP version the
// request was sent in, which decides how its errors are read (recoveryFallback).
func (c *Client) callTool(ctx context.Context, agent Agent, tool, version string, args json.RawMessage) (resp *Response, err error) {
	done, err := c.admit(ctx, agent.ID, tool)
	if err != nil {
		return nil, err
	}
	defer func() { done(err) }()
	plan := c.signingPlan(agent, version)
	if err := plan.refuseUnsigned(agent.ID, tool); err != nil {
		return nil, err
	}
	var res *mcp.CallToolResult
	err = c.withSession(ctx, agent, tool, plan, func(ctx context.Context, s *mcp.ClientSession) error {
		var err error
		res, err = s.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		return err
	})
	if err != nil {
		return nil, err
	}
	resp, err = interpret(res)
	if err != nil {
		var ae *Error
		if errors.As(err, &ae) {
			ae.Agent, ae.Tool = agent.ID, tool
			ae.readAs(version)
		}
		return nil, err
	}
	resp.Agent, resp.Tool, resp.SentVersion = agent.ID, tool, version
	return resp, nil
}

// admit asks the Guard whether agentID may be called for tool now. A refusal is a transient
// *Error (code CodeAgentUnavailable, RetryAfter until the guard lets a call through again)
// wrapping the guard's *UnavailableError: nothing was sent, so any caller may try again later.
func (c *Client) admit(ctx context.Context, agentID, tool string) (func(error), error) {
	if c.opts.Guard == nil {
		return func(error) {}, nil
	}
	done, err := c.opts.Guard.Admit(ctx, agentID)
	if err == nil {
		return done, nil
	}
	e := &Error{Kind: KindLocal, Agent: agentID, Tool: tool, Code: CodeAgentUnavailable, Recovery: RecoveryTransient, Err: err}
	var u *UnavailableError
	if errors.As(err, &u) {
		e.Message = u.Error()
		e.RetryAfter = clampRetryAfter(u.RetryAt.Sub(c.opts.Now()).Seconds())
	}
	if e.RetryAfter == 0 {
		e.RetryAfter = time.Second
	}
	return nil, e
}

// withSession opens an MCP session to agent (initialize over streamable
// HTTP, no standalone SSE stream), runs fn, and closes it. Sessions are not
// reused: sellers may be stateless, and Lambdas are short-lived.
//
// An OAuth agent (Agent.Auth) gets its token through the go-sdk transport's OAuth hook
// (oauthSession), which also refreshes a refused token once and resends the same request.
func (c *Client) withSession(ctx context.Context, agent Agent, what string, plan signingPlan, fn func(context.Context, *mcp.ClientSession) error) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.CallTimeout)
	defer cancel()
	rt := &authTransport{base: c.opts.HTTPClient.Transport, plan: plan}
	var oauth *oauthSession
	if agent.OAuth() {
		oauth = &oauthSession{c: c, st: c.oauth.get(agent), ctx: ctx, rt: rt}
	} else {
		token, err := c.opts.Credentials.Token(ctx, agent.CredentialRef)
		if err != nil {
			// The error text of a resolver must not contain the secret; we add only the ref.
			return beforeSend{&Error{Kind: KindLocal, Agent: agent.ID, Tool: what, Recovery: RecoveryTransient,
				Message: "resolve credential " + agent.CredentialRef, Err: err}}
		}
		rt.token = token
	}
	hc := *c.opts.HTTPClient
	hc.Transport = rt
	client := mcp.NewClient(&mcp.Implementation{Name: "buyflow", Version: c.opts.Version}, nil)
	transport := &mcp.StreamableClientTransport{
		Endpoint:             agent.MCPURL,
		HTTPClient:           &hc,
		MaxRetries:           -1,
		DisableStandaloneSSE: true,
	}
	if oauth != nil {
		transport.OAuthHandler = oauth
	}
	sess, err := client.Connect(ctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: mcpProtocolVersion})
	if err != nil {
		return c.classify(ctx, err, rt, oauth, agent.ID, what)
	}
	// The call's outcome is decided by fn; a failure to end the session
	// afterwards (the DELETE may not reach the agent) changes nothing for it.
	defer func() { _ = sess.Close() }()
	if err := fn(ctx, sess); err != nil {
		return c.classify(ctx, err, rt, oauth, agent.ID, what)
	}
	return nil
}

// classify maps a session or call failure to *Error. oauth is the session's OAuth hook (nil
// for a static bearer agent).
func (c *Client) classify(ctx context.Context, err error, rt *authTransport, oauth *oauthSession, agentID, tool string) error {
	e := &Error{Agent: agentID, Tool: tool, Err: err}
	werr := wireError(err)
	status, retryAfter := rt.last()
	var own *Error
	challenges, _ := oauthex.ParseWWWAuthenticate(rt.challenges()) // a malformed challenge is treated as none
	switch {
	case status == http.StatusUnauthorized && signatureChallenge(challenges) != "":
		// The agent refused the request's signature, or its absence: not the credential.
		e := c.signatureError(agentID, tool, signatureChallenge(challenges), status, rt.wasSigned())
		e.Err = err
		return e
	case oauth != nil && errors.As(err, &own):
		// The OAuth hook's own failure (token endpoint, discovery, a refused token), which the
		// transport wrapped.
		own.Tool = tool
		return own
	case oauth != nil && werr == nil && (status == http.StatusUnauthorized || status == http.StatusForbidden):
		// The agent refused the token it got after one refresh.
		e := oauth.refused(status, challenges)
		e.Tool, e.Err = tool, err
		return e
	}
	switch {
	case werr != nil:
		e.JSONRPCCode = werr.Code
		var data struct {
			AdCPError json.RawMessage `json:"adcp_error"`
		}
		if len(werr.Data) > 0 && json.Unmarshal(werr.Data, &data) == nil {
			if d, ok := parseAdCPError(data.AdCPError); ok {
				ae := errorFromDetail(d)
				ae.Agent, ae.Tool, ae.JSONRPCCode, ae.HTTPStatus, ae.Err = agentID, tool, werr.Code, status, err
				if ae.RetryAfter == 0 && ae.Recovery == RecoveryTransient {
					ae.RetryAfter = retryAfter
				}
				return ae
			}
		}
		e.Kind, e.Message, e.HTTPStatus = KindJSONRPC, werr.Message, status
		switch werr.Code {
		case -32029, -32027: // AdCP rate limited / service unavailable
			e.Recovery, e.RetryAfter = RecoveryTransient, retryAfter
		case -32028: // AdCP auth missing
			e.Recovery = RecoveryCorrectable
		default:
			e.Recovery = RecoveryTerminal
		}
		if status == http.StatusTooManyRequests || status >= 500 {
			e.Recovery, e.RetryAfter = RecoveryTransient, retryAfter
		}
	case status == http.StatusTooManyRequests || status == http.StatusRequestTimeout || status >= 500:
		e.Kind, e.HTTPStatus, e.Recovery, e.RetryAfter = KindTransport, status, RecoveryTransient, retryAfter
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		e.Kind, e.HTTPStatus, e.Recovery = KindTransport, status, RecoveryTerminal
		e.Message = "credential rejected"
	case status >= 400:
		e.Kind, e.HTTPStatus, e.Recovery = KindTransport, status, RecoveryTerminal
	default:
		// Connection failures, timeouts, broken streams: the request may or may
		// not have reached the agent, which is what same-key retries are for.
		e.Kind, e.Recovery = KindTransport, RecoveryTransient
		if ctx.Err() != nil {
			e.Message = "timed out or canceled"
		}
	}
	return e
}

// codeRejected is the go-sdk's internal "rejected by transport" marker
// (jsonrpc2.ErrRejected); it wraps transport failures and is not a peer's
// JSON-RPC error.
const codeRejected = -32005

// wireError finds the peer's JSON-RPC error in err's tree, skipping the
// go-sdk's transport-rejection marker.
func wireError(err error) *jsonrpc.Error {
	var found *jsonrpc.Error
	var walk func(error)
	walk = func(e error) {
		if e == nil || found != nil {
			return
		}
		// This walk is the unwrapping: errors.As would stop at the first
		// *jsonrpc.Error, which is often the rejection marker the SDK wraps
		// ahead of the peer's error ("%w: %w", ErrRejected, err).
		switch u := e.(type) { //nolint:errorlint // manual tree walk; each node is inspected on purpose
		case *jsonrpc.Error: // has no Unwrap
			if u.Code != codeRejected {
				found = u
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, x := range u.Unwrap() {
				walk(x)
			}
		}
	}
	walk(err)
	return found
}

// authTransport adds the bearer credential to every request and remembers the
// last HTTP status (and Retry-After) it saw, so failures can be classified.
type authTransport struct {
	base  http.RoundTripper
	token string
	plan  signingPlan

	signed bool // the last request went out signed

	mu         sync.Mutex
	status     int
	retryAfter time.Duration
	challenge  []string // WWW-Authenticate of the last answer
}

func (t *authTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	if t.token != "" {
		// A static bearer agent; an OAuth agent's header is set by the go-sdk's OAuth hook.
		r.Header.Set("Authorization", "Bearer "+t.token)
	}
	r.Header.Set("Accept", "application/json, text/event-stream")
	signed, err := t.plan.sign(r)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	t.signed = signed
	t.mu.Unlock()
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	t.status = resp.StatusCode
	t.challenge = resp.Header.Values("WWW-Authenticate")
	t.retryAfter = 0
	if v := resp.Header.Get("Retry-After"); v != "" {
		if n, err := strconv.Atoi(v); err == nil {
			t.retryAfter = clampRetryAfter(float64(n))
		}
	}
	t.mu.Unlock()
	return resp, nil
}

func (t *authTransport) wasSigned() bool {
	if t == nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.signed
}

func (t *authTransport) challenges() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.challenge
}

func (t *authTransport) last() (int, time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.status >= 200 && t.status < 300 {
		return 0, 0
	}
	return t.status, t.retryAfter
}
