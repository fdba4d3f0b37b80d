package adcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// Error codes of OAuth failures (Agent.Auth mode oauth2_client_credentials). Like the other
// BUYFLOW_ codes they are buyflow's, not the AdCP enum's.
const (
	// CodeTokenEndpointFailed: the authorization server's token endpoint (or its metadata, or the
	// agent's protected-resource metadata) hung, could not be reached, failed (HTTP 429/5xx) or
	// answered something that is not a token. Nothing reached the agent's tool; transient, so
	// the agent's circuit breaker counts it.
	CodeTokenEndpointFailed = "BUYFLOW_TOKEN_ENDPOINT_FAILED"
	// CodeOAuthClientRefused: the token endpoint refused buyflow's client (an OAuth error such as
	// invalid_client or invalid_scope). Terminal until an operator fixes the client id, its
	// secret or the scopes.
	CodeOAuthClientRefused = "BUYFLOW_OAUTH_CLIENT_REFUSED"
	// CodeOAuthTokenRejected: the agent refused a token fresh from its token endpoint (401 or 403
	// after one refresh), or its 401 names no way to get one. Terminal until an operator fixes
	// the agent's auth settings (scopes, resource, audience, token_url) with the seller.
	CodeOAuthTokenRejected = "BUYFLOW_OAUTH_TOKEN_REJECTED"
)

// tokenEarly is how long before its stated expiry a cached token is replaced, so that a token
// does not expire between leaving here and reaching the agent.
const tokenEarly = 10 * time.Second

// oauthAgents caches, per agent and per process (a Lambda cold start), what OAuth discovery
// found and the current access token.
type oauthAgents struct {
	mu sync.Mutex
	m  map[string]*oauthAgent
}

// get returns the state of agent a, fresh when its configuration changed since it was cached
// (the registry can change while the process runs).
func (o *oauthAgents) get(a Agent) *oauthAgent {
	fp := a.MCPURL + "\x00" + a.CredentialRef + "\x00" + fmt.Sprintf("%+v", *a.Auth)
	o.mu.Lock()
	defer o.mu.Unlock()
	if s, ok := o.m[a.ID]; ok && s.fingerprint == fp {
		return s
	}
	if o.m == nil {
		o.m = map[string]*oauthAgent{}
	}
	cfg := *a.Auth
	s := &oauthAgent{fingerprint: fp, agent: a, tokenURL: cfg.TokenURL, scopes: cfg.Scopes,
		resource: cfg.Resource, style: oauth2.AuthStyleInHeader}
	o.m[a.ID] = s
	return s
}

// oauthAgent is one agent's OAuth state. mu serializes token fetches, so concurrent calls to
// one agent share one token request.
type oauthAgent struct {
	fingerprint string
	agent       Agent

	mu       sync.Mutex
	tokenURL string // configured, or discovered from the agent's 401
	scopes   []string
	resource string
	style    oauth2.AuthStyle
	token    string
	expires  time.Time // zero: no expiry stated, kept until the agent refuses it
}

// oauthSession is the go-sdk's OAuth hook (auth.OAuthHandler) for one MCP session: its
// transport asks TokenSource before every request and, when the agent answers 401 or 403,
// calls Authorize and resends the request once, the same bytes (so a tools/call keeps its
// idempotency key). ctx bounds the token requests of the session.
type oauthSession struct {
	c   *Client
	st  *oauthAgent
	ctx context.Context
	rt  *authTransport // the session's transport, which knows whether it signed the request
}

var _ auth.OAuthHandler = (*oauthSession)(nil)

// TokenSource returns the agent's token source, or nil (no Authorization header) while no
// token endpoint is known: the agent's 401 says where to get one.
func (s *oauthSession) TokenSource(context.Context) (oauth2.TokenSource, error) {
	s.st.mu.Lock()
	known := s.st.tokenURL != ""
	s.st.mu.Unlock()
	if !known {
		return nil, nil
	}
	return tokenSourceFunc(func() (*oauth2.Token, error) {
		tok, err := s.token("")
		if err != nil {
			return nil, err
		}
		return &oauth2.Token{AccessToken: tok, TokenType: "Bearer"}, nil
	}), nil
}

type tokenSourceFunc func() (*oauth2.Token, error)

func (f tokenSourceFunc) Token() (*oauth2.Token, error) { return f() }

// Authorize runs after the agent refused a request: it discovers the token endpoint when none
// is known and replaces the refused token. The transport then resends the request once.
func (s *oauthSession) Authorize(ctx context.Context, req *http.Request, resp *http.Response) error {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // drained so the connection can be reused
	_ = resp.Body.Close()
	challenges, _ := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate")) // a malformed challenge is treated as none
	if code := signatureChallenge(challenges); code != "" && resp.StatusCode == http.StatusUnauthorized {
		// The request's signature (or its absence) was refused, not the token: a new token
		// would get the same answer.
		return s.c.signatureError(s.st.agent.ID, "", code, resp.StatusCode, s.rt.wasSigned())
	}
	if resp.StatusCode == http.StatusForbidden {
		// A valid token without the rights the call needs: another token from the same client
		// gets the same answer.
		return s.refused(resp.StatusCode, challenges)
	}
	s.st.mu.Lock()
	known := s.st.tokenURL != ""
	s.st.mu.Unlock()
	if !known {
		if err := s.discover(ctx, challenges); err != nil {
			return err
		}
	}
	refused, _ := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
	_, err := s.token(refused)
	return err
}

// token returns a valid access token: the cached one unless it expires within tokenEarly or
// is refused (the token the agent just refused), else a new one from the token endpoint.
func (s *oauthSession) token(refused string) (string, error) {
	st := s.st
	st.mu.Lock()
	defer st.mu.Unlock()
	now := s.c.opts.Now()
	if st.token != "" && st.token != refused && (st.expires.IsZero() || now.Before(st.expires.Add(-tokenEarly))) {
		return st.token, nil
	}
	if st.token != "" && st.token == refused {
		st.token = ""
	}
	secret, err := s.c.opts.Credentials.Token(s.ctx, st.agent.CredentialRef)
	if err != nil {
		// The error text of a resolver must not contain the secret; we add only the ref.
		return "", &Error{Kind: KindLocal, Agent: st.agent.ID, Recovery: RecoveryTransient,
			Message: "resolve OAuth client secret " + st.agent.CredentialRef, Err: err}
	}
	params := url.Values{}
	if st.resource != "" {
		params.Set("resource", st.resource)
	}
	if aud := st.agent.Auth.Audience; aud != "" {
		params.Set("audience", aud)
	}
	cfg := clientcredentials.Config{ClientID: st.agent.Auth.ClientID, ClientSecret: secret, TokenURL: st.tokenURL,
		Scopes: st.scopes, EndpointParams: params, AuthStyle: st.style}
	ctx, cancel := context.WithTimeout(context.WithValue(s.ctx, oauth2.HTTPClient, s.c.opts.HTTPClient), s.c.opts.TokenTimeout)
	defer cancel()
	tok, err := cfg.Token(ctx)
	if err != nil {
		return "", s.tokenError(ctx, err, secret)
	}
	if tt := tok.Type(); !strings.EqualFold(tt, "Bearer") {
		return "", s.endpointFailed(fmt.Sprintf("answered a %q token, not a bearer token", tt), nil)
	}
	st.token, st.expires = tok.AccessToken, time.Time{}
	// The token's lifetime is counted on our clock from now: tok.Expiry is counted on the
	// wall clock (and clientcredentials drops ExpiresIn, so it is read from the answer).
	if life := expiresIn(tok); life > 0 {
		st.expires = now.Add(life)
	}
	return st.token, nil
}

// expiresIn is the token's stated lifetime (expires_in), 0 when it states none.
func expiresIn(tok *oauth2.Token) time.Duration {
	switch v := tok.Extra("expires_in").(type) {
	case float64:
		return time.Duration(v * float64(time.Second))
	case string: // a form-encoded answer
		if n, err := strconv.Atoi(v); err == nil {
			return time.Duration(n) * time.Second
		}
	}
	if !tok.Expiry.IsZero() {
		return time.Until(tok.Expiry)
	}
	return 0
}

// tokenError turns a failed token request into an *Error a person can act on. The
// authorization server's answer is never quoted whole (it could echo the secret); its OAuth
// error code and description are, with the secret cut out.
func (s *oauthSession) tokenError(ctx context.Context, err error, secret string) *Error {
	var re *oauth2.RetrieveError
	switch {
	case ctx.Err() != nil && s.ctx.Err() == nil:
		return s.endpointFailed(fmt.Sprintf("did not answer within %s", s.c.opts.TokenTimeout), nil)
	case ctx.Err() != nil:
		return s.endpointFailed("was still waited on when the call's time ran out", nil)
	case errors.As(err, &re):
		status := 0
		if re.Response != nil {
			status = re.Response.StatusCode
		}
		desc := strings.ReplaceAll(re.ErrorDescription, secret, "[redacted]")
		switch {
		case status == http.StatusTooManyRequests || status >= 500:
			return s.endpointFailed(fmt.Sprintf("answered HTTP %d", status), nil)
		case re.ErrorCode != "":
			return &Error{Kind: KindTransport, Agent: s.st.agent.ID, Code: CodeOAuthClientRefused, Recovery: RecoveryTerminal,
				HTTPStatus: status, Message: clip(fmt.Sprintf("the OAuth token endpoint %s refused client %q: %s %s; check the agent's auth.client_id, the client secret in %s and the scopes with the seller",
					s.st.tokenURL, s.st.agent.Auth.ClientID, re.ErrorCode, desc, s.st.agent.CredentialRef), 500)}
		default:
			return s.endpointFailed(fmt.Sprintf("answered HTTP %d without an OAuth token or error", status), nil)
		}
	case strings.HasPrefix(err.Error(), "oauth2: cannot parse") || strings.Contains(err.Error(), "missing access_token"):
		return s.endpointFailed("answered something that is not an OAuth token response", nil)
	}
	return s.endpointFailed("could not be reached", err)
}

// endpointFailed is a transient failure of the authorization server: the breaker counts it.
func (s *oauthSession) endpointFailed(what string, cause error) *Error {
	return &Error{Kind: KindTransport, Agent: s.st.agent.ID, Code: CodeTokenEndpointFailed, Recovery: RecoveryTransient,
		Message: fmt.Sprintf("the OAuth token endpoint %s of agent %s %s; nothing was sent to the agent's tool", s.st.tokenURL, s.st.agent.ID, what),
		Err:     cause}
}

// discover finds the token endpoint the way the MCP authorization spec asks: the challenge's
// resource_metadata (RFC 9728; else the well-known location under mcp_url), then the first
// authorization server's RFC 8414 metadata. Scopes and the RFC 8707 resource come from the
// challenge and the metadata unless configured.
func (s *oauthSession) discover(ctx context.Context, challenges []oauthex.Challenge) error {
	a := s.st.agent
	metaURL, scopes := readChallenges(challenges)
	if metaURL == "" {
		u, err := url.Parse(a.MCPURL)
		if err != nil {
			return s.rejected("its mcp_url does not parse")
		}
		u.Path = "/.well-known/oauth-protected-resource" + u.Path
		metaURL = u.String()
	}
	dctx, cancel := context.WithTimeout(ctx, s.c.opts.TokenTimeout)
	defer cancel()
	var prm resourceMetadata
	if _, err := s.getMetadata(dctx, metaURL, &prm); err != nil {
		return s.discoveryFailed(dctx, "its protected-resource metadata "+metaURL, err)
	}
	switch {
	case prm.Resource != a.MCPURL:
		// RFC 9728 §3.3: metadata for another resource is not to be used.
		return s.discoveryFailed(dctx, "its protected-resource metadata "+metaURL, fmt.Errorf("is for resource %q", prm.Resource))
	case len(prm.AuthorizationServers) == 0:
		return s.discoveryFailed(dctx, "its protected-resource metadata "+metaURL, errors.New("names no authorization server"))
	}
	asm, err := s.authServerMetadata(dctx, prm.AuthorizationServers[0])
	if err != nil {
		return s.discoveryFailed(dctx, "the metadata of its authorization server "+prm.AuthorizationServers[0], err)
	}
	if err := checkAgentURL(asm.TokenEndpoint, s.loopbackOK()); err != nil {
		return s.discoveryFailed(dctx, "the token_endpoint of "+prm.AuthorizationServers[0], err)
	}
	cfg := a.Auth
	st := s.st
	st.mu.Lock()
	defer st.mu.Unlock()
	st.tokenURL = asm.TokenEndpoint
	st.scopes = cfg.Scopes
	if len(st.scopes) == 0 {
		st.scopes = scopes
	}
	if len(st.scopes) == 0 {
		st.scopes = prm.ScopesSupported
	}
	st.resource = cfg.Resource
	if st.resource == "" {
		st.resource = prm.Resource
	}
	// RFC 8414 makes client_secret_basic the default; a server that lists only
	// client_secret_post gets the secret in the form.
	if m := asm.TokenEndpointAuthMethodsSupported; len(m) > 0 && !slices.Contains(m, "client_secret_basic") && slices.Contains(m, "client_secret_post") {
		st.style = oauth2.AuthStyleInParams
	}
	return nil
}

// readChallenges returns what an agent's Bearer challenges ask for: the URL of its
// protected-resource metadata and the scopes (RFC 6750 §3, RFC 9728 §5.1). A URL that is not
// https (or http on loopback) is ignored, as if the challenge named none.
func readChallenges(challenges []oauthex.Challenge) (metaURL string, scopes []string) {
	for _, ch := range challenges {
		if ch.Scheme != "bearer" {
			continue
		}
		if u := ch.Params["resource_metadata"]; u != "" && metaURL == "" && checkAgentURL(u, true) == nil {
			metaURL = u
		}
		if sc := strings.Fields(ch.Params["scope"]); len(sc) > 0 && scopes == nil {
			scopes = sc
		}
	}
	return metaURL, scopes
}

// resourceMetadata is what buyflow reads of RFC 9728 protected-resource metadata.
type resourceMetadata struct {
	Resource             string   `json:"resource"`
	AuthorizationServers []string `json:"authorization_servers"`
	ScopesSupported      []string `json:"scopes_supported"`
}

// serverMetadata is what buyflow reads of RFC 8414 authorization server metadata.
type serverMetadata struct {
	Issuer                            string   `json:"issuer"`
	TokenEndpoint                     string   `json:"token_endpoint"`
	TokenEndpointAuthMethodsSupported []string `json:"token_endpoint_auth_methods_supported"`
}

// authServerMetadata reads the RFC 8414 metadata of issuer, trying the locations the MCP
// authorization spec lists in its order. (The go-sdk's own reader, oauthex.GetAuthServerMeta,
// refuses servers that do not list PKCE, which the client credentials grant does not use.)
func (s *oauthSession) authServerMetadata(ctx context.Context, issuer string) (*serverMetadata, error) {
	u, err := url.Parse(issuer)
	if err != nil {
		return nil, fmt.Errorf("issuer %q is not a URL", issuer)
	}
	path := strings.TrimSuffix(u.Path, "/")
	var tries []string
	for _, wk := range []string{"/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"} {
		v := *u
		v.Path = wk + path
		tries = append(tries, v.String())
	}
	if path != "" {
		v := *u
		v.Path = path + "/.well-known/openid-configuration"
		tries = append(tries, v.String())
	}
	var last error
	for _, try := range tries {
		var m serverMetadata
		status, err := s.getMetadata(ctx, try, &m)
		switch {
		case status >= 400 && status < 500:
			last = err
			continue
		case err != nil:
			return nil, err
		case strings.TrimSuffix(m.Issuer, "/") != strings.TrimSuffix(issuer, "/"):
			// RFC 8414 §3.3: metadata for another issuer is not to be used.
			return nil, fmt.Errorf("%s names issuer %q", try, m.Issuer)
		case m.TokenEndpoint == "":
			return nil, fmt.Errorf("%s names no token_endpoint", try)
		}
		return &m, nil
	}
	return nil, last
}

// loopbackOK says whether URLs the agent hands out (metadata, token endpoint) may be http on
// loopback: only for an agent that is itself on loopback (tests, the local stack). Any other
// agent could otherwise point buyflow at services on its own host, such as the Lambda runtime
// API on 127.0.0.1.
func (s *oauthSession) loopbackOK() bool {
	u, err := url.Parse(s.st.agent.MCPURL)
	return err == nil && u.Scheme == "http" && isLoopback(u.Hostname())
}

// getMetadata reads the JSON metadata document at u (https, or http on loopback; at most
// 1 MB) into v and returns the answer's HTTP status.
func (s *oauthSession) getMetadata(ctx context.Context, u string, v any) (int, error) {
	if err := checkAgentURL(u, s.loopbackOK()); err != nil {
		return 0, fmt.Errorf("%s: %w", u, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.c.opts.HTTPClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }() // read below; nothing to report on close
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, fmt.Errorf("%s answered HTTP %d", u, resp.StatusCode)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(v); err != nil {
		return resp.StatusCode, fmt.Errorf("%s is not JSON metadata", u)
	}
	return resp.StatusCode, nil
}

func (s *oauthSession) discoveryFailed(ctx context.Context, what string, err error) *Error {
	msg := fmt.Sprintf("OAuth discovery for agent %s failed: %s", s.st.agent.ID, what)
	if ctx.Err() != nil {
		msg += fmt.Sprintf(" did not answer within %s", s.c.opts.TokenTimeout)
		err = nil
	} else {
		msg += " could not be used"
	}
	return &Error{Kind: KindTransport, Agent: s.st.agent.ID, Code: CodeTokenEndpointFailed, Recovery: RecoveryTransient,
		Message: msg + "; set auth.token_url to skip discovery", Err: err}
}

// refused reports an agent that answered 403 to a token, or 401 to a fresh one.
func (s *oauthSession) refused(status int, challenges []oauthex.Challenge) *Error {
	detail := ""
	for _, ch := range challenges {
		if ch.Scheme == "bearer" && ch.Params["error"] != "" {
			// Quoted before clipping: quoting can grow a hostile value fourfold, and the
			// refusal must stay short and on one line whatever the agent sent.
			detail = fmt.Sprintf(" (%s: %s)", clip(strconv.Quote(ch.Params["error"]), 100), clip(strconv.Quote(ch.Params["error_description"]), 200))
			if sc := ch.Params["scope"]; sc != "" {
				detail += ", it asks for scope " + clip(strconv.Quote(sc), 200)
			}
			break
		}
	}
	s.st.mu.Lock()
	tokenURL := s.st.tokenURL
	s.st.mu.Unlock()
	return &Error{Kind: KindTransport, Agent: s.st.agent.ID, Code: CodeOAuthTokenRejected, Recovery: RecoveryTerminal, HTTPStatus: status,
		Message: fmt.Sprintf("agent %s refused a token from %s with HTTP %d%s; check the agent's auth scopes, resource and audience with the seller",
			s.st.agent.ID, tokenURL, status, detail)}
}

// rejected reports an agent whose 401 gives no way to get a token.
func (s *oauthSession) rejected(why string) *Error {
	return &Error{Kind: KindTransport, Agent: s.st.agent.ID, Code: CodeOAuthTokenRejected, Recovery: RecoveryTerminal,
		HTTPStatus: http.StatusUnauthorized,
		Message:    fmt.Sprintf("agent %s asks for OAuth but %s; set auth.token_url", s.st.agent.ID, why)}
}

// clip keeps at most n bytes of s, cut on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
