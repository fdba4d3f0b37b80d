package adcptest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// SellerBehavior is a scripted create/update outcome. The per-request tokens
// are the same strings (see doc.go).
type SellerBehavior string

// Seller behaviours.
const (
	// SellerSync answers completed with the media buy inline.
	SellerSync SellerBehavior = "sync"
	// SellerAsyncComplete answers submitted; the task then goes working →
	// completed (result: the create/update success body).
	SellerAsyncComplete SellerBehavior = "async_complete"
	// SellerAsyncFail answers submitted; the task then goes working → failed.
	SellerAsyncFail SellerBehavior = "async_fail"
	// sellerInputRequired answers input-required (reason APPROVAL_REQUIRED);
	// the task then goes working → completed.
	sellerInputRequired SellerBehavior = "input_required"
	// sellerRejected answers rejected with errors[] and starts no task.
	sellerRejected SellerBehavior = "rejected"
)

var sellerBehaviors = []string{string(SellerSync), string(SellerAsyncComplete), string(SellerAsyncFail), string(sellerInputRequired), string(sellerRejected)}

// IdempotencyMode says what get_adcp_capabilities declares.
type IdempotencyMode string

// Idempotency declarations.
const (
	// IdempotencyDeclared declares {supported: true, replay_ttl_seconds} and
	// replays (the default).
	IdempotencyDeclared IdempotencyMode = ""
	// IdempotencyUnsupported declares {supported: false} and never replays.
	IdempotencyUnsupported IdempotencyMode = "unsupported"
	// IdempotencyAbsent omits adcp.idempotency (a non-compliant seller a
	// buyer must refuse to retry against) and never replays.
	IdempotencyAbsent IdempotencyMode = "absent"
)

// PollTools selects which polling tool names an agent registers; the zero value registers both
// get_task_status/list_tasks and tasks/get/tasks/list.
type PollTools string

// Polling tool sets.
const (
	// PollAliasOnly registers only get_task_status and list_tasks.
	PollAliasOnly PollTools = "alias"
	// PollLegacyOnly registers only tasks/get and tasks/list.
	PollLegacyOnly PollTools = "legacy"
)

// SellerOptions configures a simulated seller. The zero value works: token
// DefaultSellerToken, sync behaviour, 3.1, manual task advance.
type SellerOptions struct {
	// Token is the bearer credential buyers must send.
	Token string
	// Tokens are further accepted bearer credentials, each its own
	// principal (tasks, media buys and idempotency keys are scoped per token).
	Tokens []string
	// Behavior is the default outcome of create_media_buy/update_media_buy
	// when the request carries no behaviour token.
	Behavior SellerBehavior
	// ListsNothing makes get_media_buys answer no media buys, whatever the
	// seller placed, as the @adcp/sdk broadcast example
	// (decisioning-platform-broadcast-tv.ts) does: a buyer must not need the
	// listing to change or cancel a buy.
	ListsNothing bool
	// Version is Version31 (default), Version30 or Version32.
	Version string
	// Now is the agent clock (default time.Now).
	Now func() time.Time
	// SchemaDir is an AdCP schema folder ("" = the schemas the functions use).
	SchemaDir string
	// Validator overrides SchemaDir with a ready validator.
	Validator *Validator
	// PollsPerStep advances an async task one step every N polls of it
	// (0 = only Advance/Finish/StepInterval move tasks).
	PollsPerStep int
	// StepInterval advances tasks one step once this much agent-clock time
	// has passed since their last change (checked on polls and by
	// AdvanceDue; 0 = off).
	StepInterval time.Duration
	// Idempotency selects the capabilities declaration.
	Idempotency IdempotencyMode
	// ReplayTTL is the declared and enforced replay window (default 24 h).
	ReplayTTL time.Duration
	// PollTools selects the polling tool names.
	PollTools PollTools
	// SSE answers MCP POSTs as text/event-stream (as @adcp/sdk does)
	// instead of application/json.
	SSE bool
	// RetryAfter is the retry_after (seconds) on RATE_LIMITED (default 1).
	RetryAfter int
	// SlowDelay is how long the "slow" token holds a request (default 2 s).
	SlowDelay time.Duration
	// RequireGovernanceContext makes create/update without
	// governance_context fail with PERMISSION_DENIED.
	RequireGovernanceContext bool
	// ForgetTasksOnRestart makes Restart drop every task, as the official
	// SDK's example sellers do (they keep tasks in memory): afterwards
	// get_task_status / tasks/get answer REFERENCE_NOT_FOUND for them. Media
	// buys already placed stay (the upstream order outlives the process).
	ForgetTasksOnRestart bool

	// PushReporting declares media_buy.reporting_delivery_methods ["webhook"] in the
	// capabilities and keeps the reporting_webhook a create registers, to which PushDelivery
	// posts the buy's delivery reports.
	PushReporting bool

	// HTTPClient delivers webhooks (default: a client with a 5 s timeout).
	HTTPClient *http.Client
	// WebhookSigner signs webhooks registered without authentication (the
	// RFC 9421 default mode). Nil sends them unsigned.
	WebhookSigner RequestSigner
	// JWKS is served at /.well-known/jwks.json (default {"keys":[]}).
	JWKS []byte
	// RequestSigning is declared verbatim as get_adcp_capabilities.request_signing (nil:
	// none). The seller does not verify signatures; the official SDK seller does (e2e).
	RequestSigning json.RawMessage
	// WebhookFaults apply to every task's notifications.
	WebhookFaults []WebhookFault
	// TerminalWebhooks posts as the SDK's sellers do: terminal statuses only (no working,
	// no input-required), plus one completed notification after each synchronous success
	// that carried push_notification_config.
	TerminalWebhooks bool
	// WebhookDelay is the FaultDelay wait (default 50 ms).
	WebhookDelay time.Duration
	// WebhookMaxAttempts bounds delivery attempts per notification (default 3).
	WebhookMaxAttempts int
	// WebhookBackoff is the first retry wait, doubled each retry (default 5 ms).
	WebhookBackoff time.Duration

	// Scenarios answer calls by their context.correlation_id, as the buyer storyboards'
	// fixture publisher does (scenario.go).
	Scenarios []Scenario
	// SupportedVersions, when set, replaces adcp.supported_versions in get_adcp_capabilities
	// (a storyboard's fixture declares its own list).
	SupportedVersions []string
	// LifecycleTools, when set, is declared as media_buy.lifecycle_tools: the compact
	// lifecycle tools (buy_products, accept_proposal, control_media_buy, list_products) a 3.2
	// seller may list beside the create_media_buy/update_media_buy facades, which it keeps.
	LifecycleTools []string
}

// DefaultSellerToken is the bearer the seller accepts when none is configured.
const DefaultSellerToken = "seller-test-token"

// Seller is a simulated AdCP sales agent served over MCP (streamable HTTP)
// at /mcp, with its webhook-signing JWKS at /.well-known/jwks.json.
type Seller struct {
	*agent
	opts       SellerOptions
	push       pushOptions
	closing    chan struct{}
	closeOnce  sync.Once
	wg         sync.WaitGroup
	buys       map[string]*mediaBuy
	buyOrder   []string
	deliveries []delivery
	// delivered is what get_media_buy_delivery reports per media buy (SetDelivered).
	delivered map[string]delivered

	products  []map[string]any          // get_products' catalogue
	formats   map[string]map[string]any // list_creative_formats, by format id
	accounts  []*account
	creatives map[string]*creative      // by owner|creative_id
	assigned  map[string][]string       // creative ids per package id
	forced    map[string]forcedArm      // the next create's answer, per owner
	seeded    map[string]map[string]any // comply_test_controller fixtures, by owner|scenario|id
}

// delivered is one media buy's reported delivery.
type delivered struct {
	impressions int64
	spend       string // a JSON number literal, as a seller would send it
}

type mediaBuy struct {
	owner string
	body  map[string]any // get_media_buys item
	// reporting is the reporting_webhook the create registered (PushReporting), nil if none;
	// reports counts the reports pushed to it (the sequence_number).
	reporting *PushConfig
	reports   int
}

// NewSeller returns a seller; serve it with Start or as an http.Handler.
func NewSeller(opts SellerOptions) *Seller {
	if opts.Token == "" {
		opts.Token = DefaultSellerToken
	}
	if opts.Behavior == "" {
		opts.Behavior = SellerSync
	}
	if opts.ReplayTTL == 0 {
		opts.ReplayTTL = 24 * time.Hour
	}
	s := &Seller{
		agent: newAgent(commonOptions{
			Name: "adcptest-seller", Token: opts.Token, Tokens: opts.Tokens, Version: opts.Version, Now: opts.Now,
			SchemaDir: opts.SchemaDir, Validator: opts.Validator, PollsPerStep: opts.PollsPerStep,
			StepInterval: opts.StepInterval, SlowDelay: opts.SlowDelay, RetryAfter: opts.RetryAfter,
			ReplayTTL: opts.ReplayTTL, SSE: opts.SSE, IdempotencyOK: opts.Idempotency == IdempotencyDeclared,
		}),
		opts:     opts,
		closing:  make(chan struct{}),
		buys:     map[string]*mediaBuy{},
		products: defaultCatalogue(), formats: defaultFormats(), creatives: map[string]*creative{},
		assigned: map[string][]string{}, forced: map[string]forcedArm{}, seeded: map[string]map[string]any{},
		push: pushOptions{
			client: opts.HTTPClient, signer: opts.WebhookSigner, faults: opts.WebhookFaults,
			delay: opts.WebhookDelay, maxAttempts: opts.WebhookMaxAttempts, backoff: opts.WebhookBackoff,
		},
	}
	if s.push.client == nil {
		s.push.client = &http.Client{Timeout: 5 * time.Second}
	}
	if s.push.delay == 0 {
		s.push.delay = 50 * time.Millisecond
	}
	if s.push.maxAttempts <= 0 {
		s.push.maxAttempts = 3
	}
	if s.push.backoff <= 0 {
		s.push.backoff = 5 * time.Millisecond
	}
	s.route = s.notify
	s.scenarios = opts.Scenarios
	jwks := opts.JWKS
	if jwks == nil {
		jwks = []byte(`{"keys":[]}`)
	}
	s.mux.HandleFunc("/.well-known/jwks.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(jwks)
	})

	s.addTool("get_adcp_capabilities", "AdCP capabilities of this seller.", s.capabilities)
	s.addTool("create_media_buy", "Create a media buy.", s.createMediaBuy)
	s.addTool("update_media_buy", "Update, pause or cancel a media buy.", s.updateMediaBuy)
	s.addTool("get_media_buys", "Read media buys.", s.getMediaBuys)
	s.addTool("get_media_buy_delivery", "Read what media buys delivered.", s.getMediaBuyDelivery)
	s.addTool("get_products", "Discover products.", s.getProducts)
	s.addTool("list_creative_formats", "List the creative formats products accept.", s.listCreativeFormats)
	s.addTool("sync_accounts", "Set up buyer accounts.", s.syncAccounts)
	s.addTool("list_accounts", "List buyer accounts.", s.listAccounts)
	s.addTool("sync_creatives", "Upload creatives and assign them to packages.", s.syncCreatives)
	s.addTool("list_creatives", "Read the creative library.", s.listCreatives)
	s.addTool("comply_test_controller", "Force states for compliance testing (sandbox).", s.complyTestController)
	if opts.PollTools != PollLegacyOnly {
		s.addTool("get_task_status", "Read an AdCP task.", s.poll)
		s.addTool("list_tasks", "List AdCP tasks.", s.listTasks)
	}
	if opts.PollTools != PollAliasOnly {
		s.addTool("tasks/get", "Read an AdCP task (legacy name).", s.poll)
		s.addTool("tasks/list", "List AdCP tasks (legacy name).", s.listTasks)
	}
	return s
}

// Start serves the seller on 127.0.0.1 on a free port and returns its MCP
// endpoint URL (…/mcp).
func (s *Seller) Start() string { return s.start(s) + "/mcp" }

// URL returns the MCP endpoint of a started seller.
func (s *Seller) URL() string { return s.ts.URL + "/mcp" }

// BaseURL returns the origin of a started seller (JWKS lives below it).
func (s *Seller) BaseURL() string { return s.ts.URL }

// Close stops webhook delivery (waiting for in-flight deliveries) and the
// server started by Start.
func (s *Seller) Close() {
	s.closeOnce.Do(func() { close(s.closing) })
	s.wg.Wait()
	s.close()
}

func supportedVersions(v string) []string {
	switch v {
	case Version30:
		return []string{"3.0"}
	case Version32:
		return []string{"3.2"}
	}
	return []string{"3.0", "3.1"}
}

func (s *Seller) capabilities(_ context.Context, c *call) reply {
	adcp := map[string]any{"major_versions": []int{3}, "supported_versions": supportedVersions(s.opts.Version)}
	if s.opts.SupportedVersions != nil {
		adcp["supported_versions"] = s.opts.SupportedVersions
	}
	switch s.opts.Idempotency {
	case IdempotencyDeclared:
		adcp["idempotency"] = map[string]any{"supported": true, "replay_ttl_seconds": int(s.opts.ReplayTTL / time.Second)}
	case IdempotencyUnsupported:
		adcp["idempotency"] = map[string]any{"supported": false}
	}
	body := map[string]any{
		"adcp":                adcp,
		"supported_protocols": []string{"media_buy"},
		"webhook_signing": map[string]any{
			"supported":            s.push.signer != nil,
			"profile":              "adcp/webhook-signing/v1",
			"algorithms":           []string{"ed25519"},
			"legacy_hmac_fallback": true,
		},
	}
	mediaBuy := map[string]any{}
	if s.opts.PushReporting {
		mediaBuy["reporting_delivery_methods"] = []string{"webhook"}
	}
	if s.opts.LifecycleTools != nil {
		mediaBuy["lifecycle_tools"] = s.opts.LifecycleTools
	}
	if len(mediaBuy) > 0 {
		body["media_buy"] = mediaBuy
	}
	if s.opts.RequestSigning != nil {
		body["request_signing"] = s.opts.RequestSigning
	}
	return reply{body: body}
}

// behavior picks the scripted outcome: request token, else the default.
func (s *Seller) behavior(c *call) SellerBehavior {
	if b := c.script.first(sellerBehaviors...); b != "" {
		return SellerBehavior(b)
	}
	if c.script.has("submitted") {
		return SellerAsyncComplete
	}
	return s.opts.Behavior
}

// runScripted answers a create/update according to the behaviour: done
// builds the success body (it runs at completion time for async tasks).
func (s *Seller) runScripted(c *call, taskType string, done func() (map[string]any, *AdcpError)) reply {
	if s.opts.RequireGovernanceContext && c.str("governance_context") == "" {
		return reply{err: &AdcpError{Code: "PERMISSION_DENIED", Message: "this account is governed: a valid governance_context is required", Field: "governance_context", Recovery: "correctable"}}
	}
	pc, perr := parsePush(c.args)
	if perr != nil {
		return reply{err: perr}
	}
	if c.script.has("governance_denied") {
		return reply{err: &AdcpError{Code: "GOVERNANCE_DENIED", Message: "the account's governance agent denied this purchase at execution", Recovery: "correctable"}}
	}
	b := s.behavior(c)
	var force *forcedArm
	if taskType == "create_media_buy" {
		s.mu.Lock()
		if f, ok := s.forced[c.owner]; ok {
			force = &f
			delete(s.forced, c.owner)
		}
		s.mu.Unlock()
	}
	if force != nil {
		b = SellerAsyncComplete
		if force.arm == "input-required" {
			b = sellerInputRequired
		}
	}
	switch b {
	case sellerRejected:
		e := map[string]any{"code": "POLICY_VIOLATION", "message": "the publisher declined this buy", "recovery": "terminal"}
		return reply{body: map[string]any{"status": "rejected", "message": "the publisher declined this buy", "errors": []any{e}}}
	case SellerSync:
		body, err := done()
		if err != nil {
			return reply{err: err}
		}
		if pc != nil && s.opts.TerminalWebhooks {
			s.notifySync(c, taskType, pc, body)
		}
		return reply{body: body}
	}

	finish := func(status string) (map[string]any, *AdcpError) {
		switch status {
		case "completed":
			body, err := done()
			if err != nil {
				return map[string]any{"errors": []any{err}}, err
			}
			return body, nil
		case "failed":
			e := &AdcpError{Code: "PRODUCT_UNAVAILABLE", Message: "the inventory sold out during publisher review", Recovery: "correctable"}
			return map[string]any{"errors": []any{e}}, e
		case "input-required":
			return map[string]any{"reason": "APPROVAL_REQUIRED"}, nil
		}
		return nil, nil
	}
	status, remaining, msg := "submitted", []string{"working", "completed"}, "queued for publisher review"
	switch b {
	case SellerAsyncFail:
		remaining = []string{"working", "failed"}
	case sellerInputRequired:
		status, msg = "input-required", "buyer approval required: confirm the budget"
	}
	t := s.newTask(c, taskType, "media-buy", status, remaining, finish)
	s.mu.Lock()
	if force != nil {
		// The controller named the task id the storyboard will look for.
		for i, id := range s.taskOrder {
			if id == t.ID {
				s.taskOrder[i] = force.taskID
			}
		}
		delete(s.tasks, t.ID)
		t.ID = force.taskID
		s.tasks[t.ID] = t
		if force.message != "" {
			msg = force.message
		}
	}
	t.Push = pc
	t.Message = msg
	s.mu.Unlock()
	body := map[string]any{"status": status, "task_id": t.ID, "message": msg}
	if status == "input-required" {
		res, _ := finish(status)
		s.mu.Lock()
		t.Result = res
		s.mu.Unlock()
		body["reason"] = "APPROVAL_REQUIRED"
	}
	return reply{body: body}
}

func (s *Seller) createMediaBuy(_ context.Context, c *call) reply {
	if e := s.refuseCreate(c); e != nil {
		return reply{err: e}
	}
	return s.runScripted(c, "create_media_buy", func() (map[string]any, *AdcpError) {
		return s.materialise(c), nil
	})
}

// materialise registers the media buy a create describes and returns the
// create success body.
func (s *Seller) materialise(c *call) map[string]any {
	id := s.nextID("mb")
	now := s.now().Format(time.RFC3339)
	currency := "USD"
	total := 0.0
	if tb, ok := c.args["total_budget"].(map[string]any); ok {
		total, _ = tb["amount"].(float64)
		if cur, ok := tb["currency"].(string); ok {
			currency = cur
		}
	}
	var pkgs []any
	pkgsIn, _ := c.args["packages"].([]any)
	sum := 0.0
	for i, p := range pkgsIn {
		pm, _ := p.(map[string]any)
		out := map[string]any{"package_id": fmt.Sprintf("pkg_%s_%d", strings.TrimPrefix(id, "mb_"), i+1)}
		for _, k := range []string{"product_id", "pricing_option_id", "budget", "pacing", "bid_price", "impressions", "context", "paused", "targeting_overlay"} {
			if v, ok := pm[k]; ok {
				out[k] = v
			}
		}
		if b, ok := pm["budget"].(float64); ok {
			sum += b
		}
		pkgs = append(pkgs, out)
	}
	if total == 0 {
		total = sum
	}
	if pkgs == nil {
		pkgs = []any{map[string]any{"package_id": "pkg_" + strings.TrimPrefix(id, "mb_") + "_1"}}
	}
	if c.script.has("no_packages") {
		pkgs = []any{} // the broadcast example's answer: a buy, but no package to name
	}
	mbStatus := "pending_creatives"
	body := map[string]any{
		"media_buy_id":     id,
		"confirmed_at":     now,
		"revision":         1,
		"media_buy_status": mbStatus,
		"currency":         currency,
		"total_budget":     total,
		"packages":         pkgs,
	}
	if c.version == Version30 {
		delete(body, "media_buy_status")
		body["status"] = mbStatus
	}
	item := map[string]any{
		"media_buy_id": id, "status": mbStatus, "currency": currency, "total_budget": total,
		"confirmed_at": now, "revision": 1, "packages": pkgs, "created_at": now, "updated_at": now,
	}
	for _, k := range []string{"start_time", "end_time"} {
		if v, ok := c.args[k].(string); ok && v != "asap" {
			item[k] = v
		}
	}
	if ctx, ok := c.fields["context"]; ok {
		item["context"] = ctx
	}
	mb := &mediaBuy{owner: c.owner, body: item}
	if rw, ok := c.args["reporting_webhook"].(map[string]any); ok && s.opts.PushReporting {
		mb.reporting, _ = parsePush(map[string]any{"push_notification_config": rw})
	}
	s.mu.Lock()
	s.buys[id] = mb
	s.buyOrder = append(s.buyOrder, id)
	s.mu.Unlock()
	return body
}

func (s *Seller) updateMediaBuy(_ context.Context, c *call) reply {
	id := c.str("media_buy_id")
	s.mu.Lock()
	mb, ok := s.buys[id]
	if ok && mb.owner != c.owner {
		ok = false
	}
	var cur map[string]any
	if ok {
		cur = mb.body
	}
	s.mu.Unlock()
	if !ok {
		return reply{err: &AdcpError{Code: "MEDIA_BUY_NOT_FOUND", Message: "no media buy " + id, Field: "media_buy_id", Recovery: "correctable"}}
	}
	s.mu.Lock()
	rev, _ := cur["revision"].(int)
	st, _ := cur["status"].(string)
	s.mu.Unlock()
	if r, ok := c.args["revision"].(float64); ok && int(r) != rev {
		return reply{err: &AdcpError{Code: "CONFLICT", Message: fmt.Sprintf("revision %d is stale; current revision is %d", int(r), rev), Field: "revision", Recovery: "transient", Details: map[string]any{"current_revision": rev}}}
	}
	if ups, ok := c.args["packages"].([]any); ok {
		s.mu.Lock()
		known := map[any]bool{}
		pkgs, _ := cur["packages"].([]any)
		for _, p := range pkgs {
			if pm, _ := p.(map[string]any); pm != nil {
				known[pm["package_id"]] = true
			}
		}
		s.mu.Unlock()
		for _, u := range ups {
			if um, _ := u.(map[string]any); um == nil || !known[um["package_id"]] {
				return reply{err: &AdcpError{Code: "PACKAGE_NOT_FOUND", Message: fmt.Sprintf("media buy %s has no package %v", id, um["package_id"]), Field: "packages", Recovery: "correctable"}}
			}
		}
	}
	assigns, aerr := s.creativeAssignments(c)
	if aerr != nil {
		return reply{err: aerr}
	}
	cancel, _ := c.args["canceled"].(bool)
	if cancel && (st == "canceled" || st == "completed") {
		return reply{err: &AdcpError{Code: "NOT_CANCELLABLE", Message: "media buy is already " + st, Field: "canceled", Recovery: "correctable"}}
	}
	if !cancel && (st == "canceled" || st == "completed") {
		// The media-buy lifecycle ends there: a real seller refuses to pause, resume or
		// change it rather than reviving it.
		return reply{err: &AdcpError{Code: "INVALID_STATE", Message: "media buy " + id + " is " + st + " and cannot be changed", Field: "media_buy_id", Recovery: "correctable"}}
	}
	return s.runScripted(c, "update_media_buy", func() (map[string]any, *AdcpError) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if c.script.has("unchanged") {
			return unchangedAnswer(mb.body, id, c.version), nil // success, and nothing applied
		}
		for _, id := range assigns.order {
			s.assigned[id] = appendNew(s.assigned[id], assigns.creatives[id]...)
		}
		if !cancel {
			s.advanceOnCreatives(mb)
		}
		newStatus, _ := mb.body["status"].(string)
		if cancel {
			newStatus = "canceled"
			mb.body["cancellation"] = map[string]any{"canceled_at": s.now().Format(time.RFC3339), "canceled_by": "buyer"}
			if r := c.str("cancellation_reason"); r != "" {
				mb.body["cancellation"].(map[string]any)["reason"] = r
			}
		} else if p, ok := c.args["paused"].(bool); ok {
			if p {
				newStatus = "paused"
			} else {
				newStatus = "active"
			}
		}
		for _, k := range []string{"start_time", "end_time"} {
			if v, ok := c.args[k].(string); ok {
				mb.body[k] = v
			}
		}
		// Package budgets (PATCH semantics: the packages named change, the others keep theirs).
		ups, _ := c.args["packages"].([]any)
		pkgs, _ := mb.body["packages"].([]any)
		for _, u := range ups {
			um, _ := u.(map[string]any)
			for _, p := range pkgs {
				if pm, _ := p.(map[string]any); pm != nil && pm["package_id"] == um["package_id"] {
					if b, ok := um["budget"]; ok {
						pm["budget"] = b
					}
					// A new overlay replaces the old one whole, lists included.
					if o, ok := um["targeting_overlay"]; ok {
						pm["targeting_overlay"] = o
					}
				}
			}
		}
		if len(ups) > 0 {
			total := 0.0
			for _, p := range pkgs {
				pm, _ := p.(map[string]any)
				b, _ := pm["budget"].(float64)
				total += b
			}
			mb.body["total_budget"] = total
		}
		r := mb.body["revision"].(int) + 1
		mb.body["revision"] = r
		mb.body["status"] = newStatus
		mb.body["updated_at"] = s.now().Format(time.RFC3339)
		body := map[string]any{
			"media_buy_id":        id,
			"revision":            r,
			"media_buy_status":    newStatus,
			"implementation_date": s.now().Format(time.RFC3339),
		}
		if c.version == Version30 {
			delete(body, "media_buy_status")
			body["status"] = newStatus
		}
		return body, nil
	})
}

// unchangedAnswer is a success answer to update_media_buy that applied nothing: the buy as it
// is (status, revision, packages), as the @adcp/sdk broadcast example answers a cancel with the
// buy still active. The caller holds s.mu.
func unchangedAnswer(buy map[string]any, id, version string) map[string]any {
	st, _ := buy["status"].(string)
	body := map[string]any{"media_buy_id": id, "revision": buy["revision"], "media_buy_status": st}
	if pkgs, ok := buy["packages"].([]any); ok {
		out := make([]any, 0, len(pkgs))
		for _, p := range pkgs {
			if pm, _ := p.(map[string]any); pm != nil {
				out = append(out, map[string]any{"package_id": pm["package_id"], "budget": pm["budget"]})
			}
		}
		body["packages"] = out
	}
	if version == Version30 {
		delete(body, "media_buy_status")
		body["status"] = st
	}
	return body
}

// mediaBuyIDs is the set of media_buy_ids a read names (empty: all).
func mediaBuyIDs(c *call) map[string]bool {
	want := map[string]bool{}
	if l, ok := c.args["media_buy_ids"].([]any); ok {
		for _, v := range l {
			if id, ok := v.(string); ok {
				want[id] = true
			}
		}
	}
	return want
}

func (s *Seller) getMediaBuys(_ context.Context, c *call) reply {
	want := mediaBuyIDs(c)
	statuses := map[string]bool{}
	switch v := c.args["status_filter"].(type) {
	case string:
		statuses[v] = true
	case []any:
		for _, x := range v {
			if s, ok := x.(string); ok {
				statuses[s] = true
			}
		}
	}
	s.mu.Lock()
	out := []any{}
	for _, id := range s.buyOrder {
		mb := s.buys[id]
		if s.opts.ListsNothing || mb.owner != c.owner || len(want) > 0 && !want[id] {
			continue
		}
		if st, _ := mb.body["status"].(string); len(statuses) > 0 && !statuses[st] {
			continue
		}
		out = append(out, cloneJSON(mb.body))
	}
	s.mu.Unlock()
	return reply{body: map[string]any{"media_buys": out, "pagination": map[string]any{"has_more": false, "total_count": len(out)}}}
}

// SetDelivered makes get_media_buy_delivery report impressions and spend (a JSON number
// literal such as "3150.25") for the media buy id; a buy never set reports nothing delivered.
func (s *Seller) SetDelivered(mediaBuyID string, impressions int64, spend string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.delivered == nil {
		s.delivered = map[string]delivered{}
	}
	s.delivered[mediaBuyID] = delivered{impressions: impressions, spend: spend}
}

// getMediaBuyDelivery reports, for the caller's media buys (those named, or all), what
// SetDelivered set: totals and one row per package (the whole spend on the first), in the
// shape of media-buy-delivery-webhook-result.json's media_buy_deliveries.
func (s *Seller) getMediaBuyDelivery(_ context.Context, c *call) reply {
	want := mediaBuyIDs(c)
	s.mu.Lock()
	defer s.mu.Unlock()
	rows, currency := s.deliveryRows(c.owner, want)
	now := s.now().UTC()
	return reply{body: map[string]any{"currency": currency,
		"reporting_period":     map[string]any{"start": now.Add(-24 * time.Hour).Format(time.RFC3339), "end": now.Format(time.RFC3339)},
		"media_buy_deliveries": rows}}
}

// deliveryRows are the delivery rows of owner's media buys (those in want, or all) and their
// currency; the caller holds s.mu.
func (s *Seller) deliveryRows(owner string, want map[string]bool) ([]any, string) {
	rows := []any{}
	currency := "USD"
	for _, id := range s.buyOrder {
		mb := s.buys[id]
		if mb.owner != owner || len(want) > 0 && !want[id] {
			continue
		}
		if cur, ok := mb.body["currency"].(string); ok {
			currency = cur
		}
		d := s.delivered[id]
		spend := json.Number(d.spend)
		if spend == "" {
			spend = "0"
		}
		var byPkg []any
		pkgs, _ := mb.body["packages"].([]any)
		for i, p := range pkgs {
			pm, _ := p.(map[string]any)
			ps := json.Number("0")
			if i == 0 {
				ps = spend
			}
			byPkg = append(byPkg, map[string]any{"package_id": pm["package_id"], "spend": ps, "pacing_index": 1})
		}
		if byPkg == nil {
			byPkg = []any{} // required by the report's schema, even for a buy without packages
		}
		st, _ := mb.body["status"].(string)
		rows = append(rows, map[string]any{"media_buy_id": id, "status": st,
			"totals": map[string]any{"impressions": d.impressions, "spend": spend}, "by_package": byPkg})
	}
	return rows, currency
}

// MediaBuys returns snapshots (get_media_buys items) of every media buy.
func (s *Seller) MediaBuys() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]map[string]any, 0, len(s.buyOrder))
	for _, id := range s.buyOrder {
		out = append(out, cloneMap(s.buys[id].body))
	}
	return out
}
