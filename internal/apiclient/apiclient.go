// Package apiclient is a small client of buyflow's HTTP API, as a buyer (and an approver in a
// browser) uses it: submit, read, list and follow events, and decide an approval from its
// signed link. The local demo, the end-to-end suite and the buyflow CLI share it. It speaks
// HTTP only; against a deployed stack it signs requests with SigV4 (Signer), against the local
// stack it names the tenant in the dev-only header. It decodes the API's answers into the
// server's own views (internal/api).
package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/buyflow/buyflow/internal/agents"
	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/registry"
)

// Client calls one buyflow HTTP API.
type Client struct {
	// BaseURL is the API's root, e.g. http://127.0.0.1:41234 or https://abc.execute-api.…/.
	BaseURL string
	// HTTP is the client used (default: 30 s timeout).
	HTTP *http.Client
	// TenantHeader and Tenant name the caller on a local stack (dev-only header); empty for a
	// deployed stack, where the caller's IAM identity is the tenant.
	TenantHeader, Tenant string
	// Principal names the caller within the tenant on a local stack (the dev-only
	// X-Buyflow-Principal header, sent with the tenant header), e.g. an approver's identity.
	Principal string
	// Sign, when set, signs every request to BaseURL (SigV4 for IAM routes); body is the exact
	// request body.
	Sign func(r *http.Request, body []byte) error
}

// StatusError is an answer other than the one expected.
type StatusError struct {
	Status  int
	Code    string // the problem code, when the body is an api.Problem
	Message string
	Body    []byte
}

func (e *StatusError) Error() string {
	if e.Code != "" {
		return fmt.Sprintf("HTTP %d %s: %s", e.Status, e.Code, e.Message)
	}
	return fmt.Sprintf("HTTP %d: %s", e.Status, strings.TrimSpace(string(truncate(e.Body, 300))))
}

// StatusOf returns the HTTP status of a *StatusError in err's chain, or 0.
func StatusOf(err error) int {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Status
	}
	return 0
}

// Terminal reports whether an operation status is final.
func Terminal(status string) bool {
	switch status {
	case "completed", "failed", "rejected", "canceled", "expired":
		return true
	}
	return false
}

// Do sends one request to path (relative to BaseURL) and returns the status, headers and body.
func (c *Client) Do(ctx context.Context, method, path string, header http.Header, body []byte) (int, http.Header, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.BaseURL, "/")+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, fmt.Errorf("apiclient: %s %s: %w", method, path, err)
	}
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if c.TenantHeader != "" && c.Tenant != "" && req.Header.Get(c.TenantHeader) == "" {
		req.Header.Set(c.TenantHeader, c.Tenant)
		if c.Principal != "" {
			req.Header.Set("X-Buyflow-Principal", c.Principal)
		}
	}
	if c.Sign != nil {
		if err := c.Sign(req, body); err != nil {
			return 0, nil, nil, fmt.Errorf("apiclient: sign %s %s: %w", method, path, err)
		}
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("apiclient: %s %s: %w", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return 0, nil, nil, fmt.Errorf("apiclient: %s %s: read: %w", method, path, err)
	}
	return resp.StatusCode, resp.Header, b, nil
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return &http.Client{Timeout: 30 * time.Second}
}

// Submit posts a media buy with an Idempotency-Key. It returns the answer for 200/201/202 and
// a *StatusError otherwise. While the API answers 409 idempotency_key_in_use (an earlier
// delivery of the same request is still running: Go's transport itself resends a request that
// carries an Idempotency-Key when a kept-alive connection fails), it retries with the same key
// after Retry-After, as the API asks, for up to a minute.
func (c *Client) Submit(ctx context.Context, key string, body []byte) (api.Submitted, int, error) {
	var out api.Submitted
	status, err := c.post(ctx, "/v1/media-buys", key, body, &out)
	return out, status, err
}

// post submits body to path with an Idempotency-Key and decodes the answer into out (see
// Submit for the retries).
func (c *Client) post(ctx context.Context, path, key string, body []byte, out any) (int, error) {
	h := http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {key}}
	deadline := time.Now().Add(time.Minute)
	for {
		status, header, b, err := c.Do(ctx, http.MethodPost, path, h, body)
		if err != nil {
			return 0, err
		}
		err = decode(status, b, out, http.StatusOK, http.StatusCreated, http.StatusAccepted)
		var se *StatusError
		if !errors.As(err, &se) || se.Code != "idempotency_key_in_use" || time.Now().After(deadline) {
			return status, err
		}
		wait := time.Second
		if s, perr := strconv.Atoi(header.Get("Retry-After")); perr == nil && s > 0 && s <= 5 {
			wait = time.Duration(s) * time.Second
		}
		select {
		case <-ctx.Done():
			return status, err
		case <-time.After(wait):
		}
	}
}

// Change sends a change to a placed buy: PATCH /v1/media-buys/{id} with body, or, when cancel
// is true, POST /v1/media-buys/{id}/cancel. A refusal is a *StatusError (409 for a buy that
// cannot take the change now).
func (c *Client) Change(ctx context.Context, buyID, key string, body []byte, cancel bool) (api.ChangeAccepted, error) {
	method, path := http.MethodPatch, "/v1/media-buys/"+url.PathEscape(buyID)
	if cancel {
		method, path = http.MethodPost, path+"/cancel"
	}
	status, _, b, err := c.Do(ctx, method, path, http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {key}}, body)
	if err != nil {
		return api.ChangeAccepted{}, err
	}
	var out api.ChangeAccepted
	return out, decode(status, b, &out, http.StatusAccepted)
}

// Delivery reads what a buy delivered.
func (c *Client) Delivery(ctx context.Context, buyID string) (api.Delivery, error) {
	return get[api.Delivery](ctx, c, "/v1/media-buys/"+url.PathEscape(buyID)+"/delivery")
}

// get reads path and decodes its answer, which must be 200 OK, into a T.
func get[T any](ctx context.Context, c *Client, path string) (T, error) {
	var out T
	status, _, b, err := c.Do(ctx, http.MethodGet, path, nil, nil)
	if err != nil {
		return out, err
	}
	return out, decode(status, b, &out, http.StatusOK)
}

// Get reads one operation.
func (c *Client) Get(ctx context.Context, id string) (api.MediaBuy, error) {
	return get[api.MediaBuy](ctx, c, "/v1/media-buys/"+url.PathEscape(id))
}

// List reads one page of the caller's operations (limit 0: the API's default).
func (c *Client) List(ctx context.Context, limit int, cursor string) (api.Page[api.MediaBuy], error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	path := "/v1/media-buys"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return get[api.Page[api.MediaBuy]](ctx, c, path)
}

// Events reads the whole timeline of an operation, following cursors.
func (c *Client) Events(ctx context.Context, id string) ([]api.Event, error) {
	var all []api.Event
	cursor := ""
	for range 100 {
		path := "/v1/media-buys/" + url.PathEscape(id) + "/events"
		if cursor != "" {
			path += "?cursor=" + url.QueryEscape(cursor)
		}
		page, err := get[api.Page[api.Event]](ctx, c, path)
		if err != nil {
			return nil, err
		}
		all = append(all, page.Items...)
		if page.NextCursor == "" {
			return all, nil
		}
		cursor = page.NextCursor
	}
	return all, errors.New("apiclient: events: more than 100 pages")
}

// Approvals lists the approvals waiting for the caller.
func (c *Client) Approvals(ctx context.Context) (api.Inbox, error) {
	return get[api.Inbox](ctx, c, "/v1/approver/approvals")
}

// OpenApproval reads one approval waiting for the caller.
func (c *Client) OpenApproval(ctx context.Context, id string) (api.InboxApproval, error) {
	return get[api.InboxApproval](ctx, c, "/v1/approver/approvals/"+url.PathEscape(id))
}

// Wait polls an operation every interval until until(op) is true (nil: a terminal status),
// calling seen for every status change; it returns the last operation read.
func (c *Client) Wait(ctx context.Context, id string, interval time.Duration, until func(api.MediaBuy) bool, seen func(api.MediaBuy)) (api.MediaBuy, error) {
	if until == nil {
		until = func(op api.MediaBuy) bool { return Terminal(op.Status) }
	}
	last := ""
	for {
		op, err := c.Get(ctx, id)
		if err != nil {
			return op, err
		}
		if op.Status != last && seen != nil {
			seen(op)
		}
		last = op.Status
		if until(op) {
			return op, nil
		}
		select {
		case <-ctx.Done():
			return op, fmt.Errorf("apiclient: wait for %s (last status %s): %w", id, op.Status, ctx.Err())
		case <-time.After(interval):
		}
	}
}

func decode(status int, b []byte, out any, ok ...int) error {
	for _, s := range ok {
		if status == s {
			if err := json.Unmarshal(b, out); err != nil {
				return fmt.Errorf("apiclient: decode answer: %w: %s", err, truncate(b, 200))
			}
			return nil
		}
	}
	se := &StatusError{Status: status, Body: b}
	var p api.Problem
	if json.Unmarshal(b, &p) == nil && p.Error.Code != "" {
		se.Code, se.Message = p.Error.Code, p.Error.Message
	}
	return se
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

var (
	hiddenRE = regexp.MustCompile(`<input type="hidden" name="([^"]*)" value="([^"]*)">`)
	actionRE = regexp.MustCompile(`<form method="post"(?: action="([^"]*)")?>`)
	titleRE  = regexp.MustCompile(`(?s)<h1[^>]*>(.*?)</h1>`)
)

// Decide opens an approval link as a browser would (GET the confirm page) and submits its form
// with decision ("approve" or "reject") and comment. It returns the result page's status and
// heading. The link is absolute; it need not be under BaseURL (no tenant header, no signing:
// approval links authenticate by their signature).
func Decide(ctx context.Context, hc *http.Client, link, decision, comment string) (int, string, error) {
	form, code, head, err := OpenApproval(ctx, hc, link)
	if err != nil {
		return code, head, err
	}
	return form.Submit(ctx, hc, decision, comment)
}

// ApprovalForm is the decision form of an approval's confirm page, as a browser holds it: it
// can be submitted again (the browser's resubmit) without opening the page again.
type ApprovalForm struct {
	target string
	fields url.Values
}

// OpenApproval GETs the confirm page of an approval link and returns its decision form, or the
// page's status and heading when it has none (already decided, expired, …).
func OpenApproval(ctx context.Context, hc *http.Client, link string) (*ApprovalForm, int, string, error) {
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	get, err := http.NewRequestWithContext(ctx, http.MethodGet, link, nil)
	if err != nil {
		return nil, 0, "", fmt.Errorf("apiclient: approval link: %w", err)
	}
	resp, err := hc.Do(get)
	if err != nil {
		return nil, 0, "", fmt.Errorf("apiclient: open approval link: %w", err)
	}
	page, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
	if err != nil {
		return nil, 0, "", fmt.Errorf("apiclient: read approval page: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, resp.StatusCode, heading(page), fmt.Errorf("apiclient: approval page: HTTP %d: %s", resp.StatusCode, heading(page))
	}
	m := actionRE.FindSubmatch(page)
	if m == nil {
		return nil, resp.StatusCode, heading(page), fmt.Errorf("apiclient: approval page has no decision form: %s", heading(page))
	}
	target := link
	if len(m[1]) > 0 {
		base, _ := url.Parse(link) // parsed by NewRequest above
		ref, err := url.Parse(html.UnescapeString(string(m[1])))
		if err != nil {
			return nil, 0, "", fmt.Errorf("apiclient: approval form action: %w", err)
		}
		target = base.ResolveReference(ref).String()
	}
	form := url.Values{}
	for _, h := range hiddenRE.FindAllSubmatch(page, -1) {
		form.Add(html.UnescapeString(string(h[1])), html.UnescapeString(string(h[2])))
	}
	return &ApprovalForm{target: target, fields: form}, resp.StatusCode, heading(page), nil
}

// Submit posts the form with decision and comment and returns the result page's status and
// heading.
func (f *ApprovalForm) Submit(ctx context.Context, hc *http.Client, decision, comment string) (int, string, error) {
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	form := url.Values{}
	for k, v := range f.fields {
		form[k] = append([]string(nil), v...)
	}
	form.Set("decision", decision)
	if comment != "" {
		form.Set("comment", comment)
	}
	post, err := http.NewRequestWithContext(ctx, http.MethodPost, f.target, strings.NewReader(form.Encode()))
	if err != nil {
		return 0, "", fmt.Errorf("apiclient: approval form: %w", err)
	}
	post.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := hc.Do(post)
	if err != nil {
		return 0, "", fmt.Errorf("apiclient: post decision: %w", err)
	}
	result, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
	if err != nil {
		return resp.StatusCode, "", fmt.Errorf("apiclient: read decision result: %w", err)
	}
	return resp.StatusCode, heading(result), nil
}

func heading(page []byte) string {
	if m := titleRE.FindSubmatch(page); m != nil {
		return strings.TrimSpace(html.UnescapeString(regexp.MustCompile(`<[^>]+>`).ReplaceAllString(string(m[1]), "")))
	}
	return strings.TrimSpace(string(truncate(page, 120)))
}

// SlackMessage is one message the local stack's fake Slack recorded.
type SlackMessage struct {
	Seq     int             `json:"seq"`
	Kind    string          `json:"kind"`
	Channel string          `json:"channel"`
	Text    string          `json:"text"`
	Body    json.RawMessage `json:"body"`
}

// SlackMessages lists what the fake Slack at slackURL recorded.
func SlackMessages(ctx context.Context, hc *http.Client, slackURL string) ([]SlackMessage, error) {
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(slackURL, "/")+"/messages", nil)
	if err != nil {
		return nil, fmt.Errorf("apiclient: slack messages: %w", err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("apiclient: slack messages: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	var out []SlackMessage
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("apiclient: slack messages: %w", err)
	}
	return out, nil
}

// ApprovalLinks returns every approval link (<apiURL>/v1/approvals/…) in the messages, oldest
// first, without duplicates (a message updated after a decision repeats its link).
func ApprovalLinks(msgs []SlackMessage, apiURL string) []string {
	re := regexp.MustCompile(regexp.QuoteMeta(strings.TrimRight(apiURL, "/")) + `/v1/approvals/[^\s"<>|\\]+`)
	var out []string
	seen := map[string]bool{}
	for _, m := range msgs {
		// The body is JSON: links inside it have & escaped as \u0026.
		text := strings.ReplaceAll(string(m.Body)+" "+m.Text, `\u0026`, "&")
		for _, l := range re.FindAllString(text, -1) {
			l = html.UnescapeString(l)
			if !seen[l] {
				seen[l] = true
				out = append(out, l)
			}
		}
	}
	return out
}

// Buy describes a submit request built from examples/media-buy.json, as the test suites
// submit them.
type Buy struct {
	// PO is the purchase order number (unique per test: an active PO locks its seller).
	PO string
	// Budgets are the package budgets (default 3000 and 2000: under the approval threshold).
	Budgets []float64
	// Sim is the simulated agents' script (context.sim), e.g. "async_complete,wh_drop_all".
	Sim string
	// RequireApproval asks for a person whatever the budget.
	RequireApproval bool
	// Seller, when set, replaces the example's seller_id.
	Seller string
	// NotifySlack, when set, asks for the requester's notifications in this Slack user or
	// channel id.
	NotifySlack string
}

// Body renders b from <repoRoot>/examples/media-buy.json.
func (b Buy) Body(repoRoot string) ([]byte, error) {
	raw, err := os.ReadFile(filepath.Join(repoRoot, "examples", "media-buy.json"))
	if err != nil {
		return nil, fmt.Errorf("apiclient: example buy: %w", err)
	}
	var req map[string]any
	if err := json.Unmarshal(raw, &req); err != nil {
		return nil, fmt.Errorf("apiclient: example buy: %w", err)
	}
	mb, ok := req["media_buy"].(map[string]any)
	if !ok {
		return nil, errors.New("apiclient: example buy: no media_buy object")
	}
	mb["po_number"] = b.PO
	budgets := b.Budgets
	if budgets == nil {
		budgets = []float64{3000, 2000}
	}
	pkgs, _ := mb["packages"].([]any)
	for i := range pkgs {
		if p, ok := pkgs[i].(map[string]any); ok && i < len(budgets) {
			p["budget"] = budgets[i]
		}
	}
	mb["packages"] = pkgs[:min(len(pkgs), len(budgets))]
	ctx, _ := mb["context"].(map[string]any)
	if ctx == nil {
		ctx = map[string]any{}
	}
	if b.Sim != "" {
		ctx["sim"] = b.Sim
	}
	mb["context"] = ctx
	if b.RequireApproval {
		req["require_approval"] = true
	}
	if b.Seller != "" {
		req["seller_id"] = b.Seller
	}
	if b.NotifySlack != "" {
		req["notify"] = map[string]any{"slack": b.NotifySlack}
	}
	return json.Marshal(req)
}

// Agents lists the agent registry (operators only).
func (c *Client) Agents(ctx context.Context) ([]registry.Record, error) {
	out, err := get[agents.List](ctx, c, agents.Prefix)
	return out.Agents, err
}

// Agent reads one agent with its audit trail.
func (c *Client) Agent(ctx context.Context, id string) (agents.Shown, error) {
	return get[agents.Shown](ctx, c, agents.Prefix+"/"+url.PathEscape(id))
}

// ChangeAgent sends one change of the registry: POST the body of an add to agents.Prefix,
// PATCH an update to Prefix/{id}, POST Prefix/{id}/disable|enable|capabilities. It returns
// the agent as stored after the change.
func (c *Client) ChangeAgent(ctx context.Context, method, path string, body []byte) (registry.Record, error) {
	h := http.Header{}
	if body != nil {
		h.Set("Content-Type", "application/json")
	}
	status, _, b, err := c.Do(ctx, method, path, h, body)
	if err != nil {
		return registry.Record{}, err
	}
	var out registry.Record
	return out, decode(status, b, &out, http.StatusOK, http.StatusCreated)
}
