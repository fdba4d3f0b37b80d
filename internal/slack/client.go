package slack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Client posts and updates messages. It is the seam the notify and approve
// Lambdas depend on; BotClient and WebhookClient implement it.
type Client interface {
	// Post sends m and returns where it landed. A bot posts to m.Channel
	// (a channel id or an approver's user id, for a DM); a webhook posts to
	// its own channel and returns a zero Ref.
	Post(ctx context.Context, m Message) (Ref, error)
	// Update replaces the message at ref with m. A webhook cannot edit, so
	// it posts m as a follow-up instead.
	Update(ctx context.Context, ref Ref, m Message) (Ref, error)
}

// Ref locates a posted message, for a later Update. Store it with the approval.
type Ref struct {
	Channel string `json:"channel"`
	TS      string `json:"ts"`
}

var (
	_ Client = (*BotClient)(nil)
	_ Client = (*WebhookClient)(nil)
)

// defaultBaseURL is the Slack Web API root.
const defaultBaseURL = "https://slack.com/api/"

const maxResponseBytes = 1 << 20

// APIError is a refusal from Slack: an ok:false answer with its error code,
// or an HTTP error status. It never holds the token or the webhook URL.
type APIError struct {
	// Op is the API method ("chat.postMessage", "chat.update") or "webhook".
	Op string
	// Code is Slack's error code (e.g. "channel_not_found", "invalid_auth",
	// "ratelimited", "invalid_payload"), or "http_<status>" if there is none.
	Code string
	// StatusCode is the HTTP status of the answer.
	StatusCode int
	// RetryAfter is Slack's Retry-After on a 429, else zero.
	RetryAfter time.Duration
}

// Error names the operation and Slack's code; nothing secret.
func (e *APIError) Error() string {
	if e.RetryAfter > 0 {
		return fmt.Sprintf("slack: %s: %s (retry after %s)", e.Op, e.Code, e.RetryAfter)
	}
	return fmt.Sprintf("slack: %s: %s", e.Op, e.Code)
}

// Retryable reports whether the same request may succeed later: rate
// limits and server errors.
func (e *APIError) Retryable() bool {
	return e.StatusCode == http.StatusTooManyRequests || e.StatusCode >= 500 || e.Code == "ratelimited" ||
		e.Code == "internal_error" || e.Code == "service_unavailable" || e.Code == "request_timeout" || e.Code == "fatal_error"
}

// Option configures a client.
type Option func(*options)

type options struct {
	baseURL string
	hc      *http.Client
}

// WithBaseURL points a BotClient at another Web API root (a test server or
// Sink, e.g. "http://127.0.0.1:4599/api/").
func WithBaseURL(u string) Option { return func(o *options) { o.baseURL = u } }

// WithHTTPClient sets the HTTP client (timeouts, transport). Redirects are
// never followed, whatever the client says.
func WithHTTPClient(hc *http.Client) Option { return func(o *options) { o.hc = hc } }

func buildOptions(opts []Option) options {
	o := options{baseURL: defaultBaseURL, hc: &http.Client{Timeout: 10 * time.Second}}
	for _, f := range opts {
		f(&o)
	}
	if o.hc == nil {
		o.hc = &http.Client{Timeout: 10 * time.Second}
	}
	hc := *o.hc
	// A redirect would resend the body elsewhere; Slack does not redirect.
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	o.hc = &hc
	return o
}

// BotClient talks to the Slack Web API with a bot token (xoxb-…) and the
// chat:write scope. Posting to a user id sends a direct message from the app.
type BotClient struct {
	token   string
	baseURL string
	hc      *http.Client
}

// NewBotClient returns a BotClient using token.
func NewBotClient(token string, opts ...Option) (*BotClient, error) {
	if token == "" || strings.ContainsAny(token, " \t\r\n") {
		return nil, errors.New("slack: bot token is empty or has whitespace")
	}
	o := buildOptions(opts)
	u, err := url.Parse(o.baseURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, errors.New("slack: base url must be an absolute http(s) url")
	}
	base := o.baseURL
	if !strings.HasSuffix(base, "/") {
		base += "/"
	}
	return &BotClient{token: token, baseURL: base, hc: o.hc}, nil
}

// String describes the client without its token.
func (c *BotClient) String() string { return "slack.BotClient{base: " + c.baseURL + "}" }

// GoString describes the client without its token.
func (c *BotClient) GoString() string { return c.String() }

// LogValue describes the client without its token.
func (c *BotClient) LogValue() slog.Value {
	return slog.GroupValue(slog.String("kind", "bot"), slog.String("baseUrl", c.baseURL))
}

type apiResponse struct {
	OK      bool   `json:"ok"`
	Error   string `json:"error"`
	Channel string `json:"channel"`
	TS      string `json:"ts"`
}

// Post calls chat.postMessage. m.Channel is required.
func (c *BotClient) Post(ctx context.Context, m Message) (Ref, error) {
	if m.Channel == "" {
		return Ref{}, errors.New("slack: chat.postMessage: no channel")
	}
	m.TS = ""
	return c.call(ctx, "chat.postMessage", m)
}

// Update calls chat.update on the message at ref.
func (c *BotClient) Update(ctx context.Context, ref Ref, m Message) (Ref, error) {
	if ref.Channel == "" || ref.TS == "" {
		return Ref{}, errors.New("slack: chat.update: ref needs channel and ts")
	}
	m.Channel, m.TS = ref.Channel, ref.TS
	if m.Blocks == nil {
		// An empty list clears old blocks (the review button); nil would
		// leave them in place.
		m.Blocks = []Block{}
	}
	return c.call(ctx, "chat.update", updateBody(m))
}

// updateBody drops the fields chat.update does not take.
func updateBody(m Message) any {
	return struct {
		Channel string  `json:"channel"`
		TS      string  `json:"ts"`
		Text    string  `json:"text"`
		Blocks  []Block `json:"blocks"`
	}{m.Channel, m.TS, m.Text, m.Blocks}
}

func (c *BotClient) call(ctx context.Context, method string, body any) (Ref, error) {
	b, err := marshal(body)
	if err != nil {
		return Ref{}, fmt.Errorf("slack: %s: encode: %w", method, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.baseURL+method, bytes.NewReader(b))
	if err != nil {
		return Ref{}, fmt.Errorf("slack: %s: build request", method)
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.hc.Do(req)
	if err != nil {
		return Ref{}, transportError(method, err)
	}
	// The body is read (up to the limit) before Close; a Close error cannot
	// change what Slack answered.
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return Ref{}, transportError(method, err)
	}
	if resp.StatusCode != http.StatusOK {
		return Ref{}, httpError(method, resp, raw)
	}
	var r apiResponse
	if err := json.Unmarshal(raw, &r); err != nil {
		return Ref{}, &APIError{Op: method, Code: "invalid_response", StatusCode: resp.StatusCode}
	}
	if !r.OK {
		code := errorCode(r.Error, resp.StatusCode)
		if r.Error == "" {
			code = "unknown_error"
		}
		return Ref{}, &APIError{Op: method, Code: code, StatusCode: resp.StatusCode}
	}
	return Ref{Channel: r.Channel, TS: r.TS}, nil
}

// WebhookClient posts to a Slack incoming webhook. The URL is the secret.
type WebhookClient struct {
	url string
	hc  *http.Client
}

// NewWebhookClient returns a WebhookClient posting to webhookURL (in tests, an
// httptest server or a Sink path). WithBaseURL does not apply.
func NewWebhookClient(webhookURL string, opts ...Option) (*WebhookClient, error) {
	u, err := url.Parse(webhookURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		// Do not quote the URL: it is the secret.
		return nil, errors.New("slack: webhook url must be an absolute http(s) url")
	}
	return &WebhookClient{url: webhookURL, hc: buildOptions(opts).hc}, nil
}

// String describes the client without its URL.
func (c *WebhookClient) String() string { return "slack.WebhookClient{url: redacted}" }

// GoString describes the client without its URL.
func (c *WebhookClient) GoString() string { return c.String() }

// LogValue describes the client without its URL.
func (c *WebhookClient) LogValue() slog.Value { return slog.GroupValue(slog.String("kind", "webhook")) }

// Post sends m to the webhook's channel. Channel and TS are dropped; the
// returned Ref is zero (a webhook says nothing about where the message went).
func (c *WebhookClient) Post(ctx context.Context, m Message) (Ref, error) {
	m.Channel, m.TS = "", ""
	b, err := marshal(m)
	if err != nil {
		return Ref{}, fmt.Errorf("slack: webhook: encode: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(b))
	if err != nil {
		return Ref{}, errors.New("slack: webhook: build request")
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	resp, err := c.hc.Do(req)
	if err != nil {
		return Ref{}, transportError("webhook", err)
	}
	// The body is read (up to the limit) before Close; a Close error cannot
	// change what Slack answered.
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return Ref{}, transportError("webhook", err)
	}
	if resp.StatusCode != http.StatusOK {
		return Ref{}, httpError("webhook", resp, raw)
	}
	return Ref{}, nil
}

// Update posts m as a follow-up: incoming webhooks cannot edit a message.
func (c *WebhookClient) Update(ctx context.Context, _ Ref, m Message) (Ref, error) {
	return c.Post(ctx, m)
}

// transportError keeps the cause but drops the URL that *url.Error quotes.
func transportError(op string, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return fmt.Errorf("slack: %s: %w", op, err)
}

func httpError(op string, resp *http.Response, body []byte) error {
	e := &APIError{Op: op, StatusCode: resp.StatusCode}
	var r apiResponse
	if json.Unmarshal(body, &r) == nil && r.Error != "" {
		e.Code = errorCode(r.Error, resp.StatusCode)
	} else {
		e.Code = errorCode(strings.TrimSpace(string(body)), resp.StatusCode)
	}
	if resp.StatusCode == http.StatusTooManyRequests {
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			e.RetryAfter = time.Duration(s) * time.Second
		}
		if e.Code == "http_429" {
			e.Code = "ratelimited"
		}
	}
	return e
}

// errorCode keeps a Slack error code if it looks like one (lowercase
// letters, digits and underscores), so nothing else from a body reaches logs.
func errorCode(s string, status int) string {
	if s != "" && len(s) <= 64 && strings.Trim(s, "abcdefghijklmnopqrstuvwxyz0123456789_") == "" {
		return s
	}
	return "http_" + strconv.Itoa(status)
}
