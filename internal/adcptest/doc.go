// Package adcptest provides simulated AdCP 3.1 agents — a seller (sales
// agent) and a campaign-governance agent — as real MCP servers over
// streamable HTTP (github.com/modelcontextprotocol/go-sdk), for Go tests
// (Start binds 127.0.0.1 on a free port) and for the local stack (Serve).
//
// # Surface
//
// Seller tools: get_adcp_capabilities, get_products (a two-product
// catalogue: the official media_buy_seller storyboard's fixtures),
// list_creative_formats, sync_accounts and list_accounts (instant approval),
// sync_creatives (synchronous review; assignments, here or in
// update_media_buy's packages[].creative_assignments, move a pending_creatives
// buy to pending_start, or active once its flight began), list_creatives
// (the library; creatives outlive the buys they served), create_media_buy,
// update_media_buy (including canceled: true; a package's targeting_overlay,
// given on create, is replaced whole by an update's), get_media_buys,
// get_media_buy_delivery (and, with PushReporting, delivery reports pushed to
// a buy's reporting_webhook by PushDelivery), comply_test_controller (list_scenarios,
// force_media_buy_status along the media-buy state machine,
// force_create_media_buy_arm, force_task_completion, force_creative_status,
// force_account_status, simulate_delivery (cumulative), seed_product,
// seed_pricing_option, seed_creative, seed_creative_format, seed_media_buy;
// others answer UNKNOWN_SCENARIO), get_task_status and list_tasks (3.1 aliases) and
// tasks/get and tasks/list (legacy names; PollTools picks one set or both).
// The official storyboards' grades against these doubles, and why each step
// that does not pass fails or skips, are in testdata/storyboards.json and
// testdata/storyboard_reasons.json.
//
// Governance tools: get_adcp_capabilities, sync_plans, check_governance,
// report_plan_outcome, get_plan_audit_logs (per synced plan: budget
// authorised, committed and remaining, check and outcome counts, entries on
// request, governed actions by governance context), get_task_status and
// tasks/get.
// tools/list publishes every input schema as {"type":"object"}, as AdCP
// agents do; shapes come from the AdCP JSON Schemas.
//
// # Invariants
//
//   - Auth: every MCP POST (the handshake included) must carry
//     Authorization: Bearer <token> (the legacy x-adcp-auth header is accepted
//     too). Without it, or with a wrong one, the agent answers as the SDK's
//     sellers do: HTTP 401, WWW-Authenticate: Bearer and a JSON-RPC error
//     -32028 whose data.adcp_error names AUTH_MISSING or AUTH_INVALID; MCP never
//     sees the request.
//   - Accept: a POST whose Accept admits not both application/json and
//     text/event-stream gets HTTP 406 with a JSON-RPC error as
//     application/json (the MCP TypeScript SDK's answer).
//   - Validation: every call's arguments are validated against the tool's
//     request schema (format assertion on; the schemas embedded by
//     internal/adcpschemas, or the folder $BUYFLOW_ADCP_SCHEMAS names). A
//     violation answers INVALID_REQUEST (recovery correctable) with field in
//     JSONPath-lite form ("packages[0].budget") and issues[] as RFC 6901
//     pointers, and is recorded in Call.ValidationError. Envelope fields
//     (idempotency_key, context, governance_context, push_notification_config,
//     adcp_version) are tolerated flat in the arguments on every tool.
//   - Responses are flat 3.1: structuredContent holds the task body with
//     status, adcp_version "3.1", timestamp and the request's context (echoed
//     verbatim) at the root; content[0] is the same JSON as text. Errors set
//     isError and carry adcp_error (core/error.json: code, message, recovery,
//     field, retry_after, issues, details), the same error in errors[] (the
//     two-layer model) and status "failed".
//   - Version: Version30 (or a request pinning adcp_version "3.0", or one
//     carrying adcp_major_version without adcp_version, as 3.0 clients do) switches
//     to the 3.0 names: check_governance status (not verdict),
//     report_plan_outcome status (not outcome_state), the media-buy status in
//     the root status of a create/update success, no adcp_version. Another
//     major answers VERSION_UNSUPPORTED. Version32 makes a 3.2-only agent: it
//     lists ["3.2"], validates requests against the 3.2.3 schemas (NewValidator32),
//     answers a task not pinned to 3.2 or later with VERSION_UNSUPPORTED, and gives
//     verdicts 3.2's shape (check_type; governance_context and expires_at on an
//     approval only; consultation_context on conditions).
//   - Idempotency (seller, unless IdempotencyUnsupported/Absent; governance
//     always): a call with idempotency_key is cached per (bearer, key) when it
//     succeeds. The same key with the same canonical body (sorted-key JSON of
//     the arguments minus idempotency_key, context, governance_context and
//     push_notification_config.authentication.credentials) replays the cached
//     response with replayed: true (same task_id, nothing re-executed); a
//     different body answers IDEMPOTENCY_CONFLICT; a key older than the replay
//     TTL answers IDEMPOTENCY_EXPIRED; a key whose first call is still
//     running answers IDEMPOTENCY_IN_FLIGHT. Errors are never cached. Reads are
//     cached too, so a poll that reuses a key gets a stale snapshot — buyers
//     must use fresh keys per poll. get_adcp_capabilities is exempt.
//   - Business rules (create_media_buy): a package naming a catalogue product
//     must use one of its pricing options; end_time must follow start_time;
//     measurement_terms asking billing variance under 5 % answer
//     TERMS_REJECTED. Product ids outside the catalogue are still accepted
//     (the workflow tests name their own).
//   - Principals: Token plus Tokens; each bearer is its own principal.
//     Tasks are owned by the bearer that created them: polling another
//     principal's task answers REFERENCE_NOT_FOUND. Statuses move only along
//     the script (Advance) or as forced (Finish); terminal tasks never move.
//     Inline (synchronous) results never produce a task or a webhook.
//   - Plans (governance): a plan pushed with sync_plans binds every later
//     check_governance of a create_media_buy under its plan_id, before any
//     scripted outcome. The proposed amount (total_budget, budget.total or the
//     sum of package budgets) over budget.reallocation_threshold (the
//     per-transaction limit, as the official storyboards read it; 0 and
//     reallocation_unlimited mean none), or over budget.total less what
//     report_plan_outcome reported committed since the sync, is denied with one
//     critical finding per limit naming the amounts.
//   - Known spec gap, kept faithfully: an async check_governance task reports
//     task_type "check_governance", which the 3.1.19 task-type enum lacks, so
//     its get_task_status response does not validate against the schema.
//     Likewise an input-required create response matches none of the three
//     create-media-buy-response shapes; buyers read status, message, reason.
//
// # Scripted behaviour
//
// Each agent has a default behaviour (SellerOptions.Behavior,
// GovernanceOptions.Behavior). A request overrides it with simulation
// tokens, read from
//
//   - context.sim, a string: {"context": {"sim": "async_complete,wh_duplicate"}}
//   - po_number starting with "sim:": "po_number": "sim:async_fail"
//   - a script registered for a real po_number: seller.Script("PO-1001",
//     "async_complete,wh_drop")
//   - for check_governance, also the same places inside payload (the
//     proposed create_media_buy arguments), so one buyer-side field drives
//     both agents end to end.
//
// Tokens are separated by ',', ' ', '+' or ';'; "tok*N" repeats a transient
// fault N times. Each agent ignores tokens it does not know.
//
// Seller outcome tokens (create_media_buy, update_media_buy):
//
//	sync             completed inline (media_buy_id, confirmed_at, revision, packages)
//	async_complete   submitted + task_id; steps: working → completed (result = success body)
//	submitted        same as async_complete
//	async_fail       submitted; steps: working → failed (error PRODUCT_UNAVAILABLE)
//	input_required   input-required (reason APPROVAL_REQUIRED) + task_id; steps: working → completed
//	rejected         rejected with errors[] (POLICY_VIOLATION), no task
//	governance_denied  isError GOVERNANCE_DENIED (the seller's own execution check failed)
//	no_packages      (create_media_buy) placed with packages: [], as the @adcp/sdk broadcast example answers
//	unchanged        (update_media_buy) success that applies nothing: the buy as it is (status, revision,
//	                 packages), as the @adcp/sdk broadcast example answers a cancel
//
// Governance outcome tokens (check_governance):
//
//	approved             verdict approved, check_id, governance_context (compact-JWS shaped, unsigned), expires_at
//	denied               verdict denied with a critical finding
//	conditions           verdict conditions, field packages[0].budget, required_value 80 % of it; a re-check
//	                     whose payload has that value is approved
//	conditions_advisory  verdict conditions without required_value; the 4th round for a plan/tool is denied
//	async_review         submitted + task_id; one step later completed with result = approved verdict
//	async_review_denied  as async_review, resolving denied
//	outcome_findings     (report_plan_outcome) outcome_state findings with a critical finding
//	short_ttl            the verdict's expires_at (and token exp) is 1 s away instead of TokenTTL
//	plan_refused         (sync_plans) isError POLICY_VIOLATION, recovery correctable: no plan is registered
//
// Transient faults (any tool but get_adcp_capabilities; once per
// idempotency_key unless "*N", every call when the request has no key):
//
//	rate_limited  isError RATE_LIMITED, recovery transient, retry_after (RetryAfter), details
//	http_500      HTTP 500 before MCP sees the request
//	http_503      HTTP 503 likewise
//	slow          hold the request SlowDelay before it runs (client timeouts; nothing happens)
//	slow_commit   run the call, then hold the response SlowDelay (a lost response: the
//	              retry with the same key gets the replay)
//	in_flight     isError IDEMPOTENCY_IN_FLIGHT, recovery transient, retry_after (needs a key)
//
// Agent-wide equivalents: RateLimitNext(n), FailNextHTTP(n, status),
// DelayNext(n, d).
//
// Either agent: hold keeps the tasks a request starts where they are: neither StepInterval
// nor PollsPerStep advances them; only Advance and Finish do (a test decides when the seller
// is done).
//
// Webhook fault tokens (or SellerOptions.WebhookFaults): wh_drop (terminal
// notification dropped), wh_drop_all, wh_duplicate (every notification twice,
// same idempotency_key), wh_out_of_order (intermediate notifications held
// until after the terminal one), wh_delay (WebhookDelay before each), and
// wh_bad_signature (signature or bearer corrupted after signing).
//
// # Storyboard scenarios (seller)
//
// SellerOptions.Scenarios serve the AdCP buyer storyboards' fixture publisher
// (internal/buyerstoryboards): a call whose context.correlation_id contains a
// scenario's Match gets its tokens, or its AdCP error (a tool result) or HTTP
// status (401 with a WWW-Authenticate challenge, 5xx) once per idempotency
// key, as errors are never cached. SupportedVersions and LifecycleTools
// replace what get_adcp_capabilities declares.
//
// # Advancing tasks
//
// Async tasks move one scripted step per Advance(taskID); Finish(taskID,
// status) forces any status. PollsPerStep advances a task after every N polls
// of it (the Nth poll already sees the new status; governance defaults to 1,
// the seller to manual). StepInterval advances tasks whose last change is
// that old on the agent clock (Now), checked on every poll and list and by
// AdvanceDue, which Serve runs on a ticker.
//
// # Push notifications
//
// When create_media_buy or update_media_buy goes async and carries
// push_notification_config (url, operation_id — optional, as the SDK's sellers
// accept a config without it; the notifications then carry none — token,
// authentication), the seller POSTs a core/mcp-webhook-payload.json body on
// every later status change (working, input-required, completed, failed,
// canceled; never for submitted or inline results). With
// SellerOptions.TerminalWebhooks it posts as the SDK's sellers do: only
// terminal statuses, plus one completed notification after each synchronous
// success (task_id "sync-<uuid>", a task no poll knows, result the success
// body). Each carries idempotency_key (new per
// event, stable across retries), notification_id, operation_id, task_id,
// task_type, protocol, status, timestamp, message, token echo, result and
// the create request's context. Signing follows the registration: with
// authentication.schemes ["HMAC-SHA256"] the legacy X-ADCP-Signature /
// X-ADCP-Timestamp over "<ts>.<raw body>"; with ["Bearer"] an Authorization
// header; without authentication the RFC 9421 profile through
// SellerOptions.WebhookSigner (NewWebhookKey makes one plus its JWKS, served
// at /.well-known/jwks.json) — or unsigned if none is configured. Delivery
// goes through SellerOptions.HTTPClient, in order per task, retrying non-2xx
// (other than 4xx except 408/429) up to WebhookMaxAttempts with doubling
// WebhookBackoff. Every attempt, and every dropped notification, is
// recorded (Deliveries, WaitDeliveries).
//
// # Recording
//
// Transport: stateless streamable HTTP (no Mcp-Session-Id; GET answers
// 405), answering application/json by default or text/event-stream with SSE.
//
// Calls and CallsTo return every tool call (tool, raw arguments, agent time,
// auth result, validation error, injected fault, returned structuredContent,
// error code, replayed).
package adcptest
