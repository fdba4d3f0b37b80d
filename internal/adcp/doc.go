// Package adcp is buyflow's AdCP 3.1 client: it calls configured seller and
// governance agents over MCP streamable HTTP (github.com/modelcontextprotocol/go-sdk),
// validates every request against the AdCP 3.1.19 JSON Schemas before it
// leaves, extracts results and errors the way the spec prescribes, and turns
// every failure into one error type and one retry decision. It imports no AWS
// SDK; credentials arrive through the Credentials interface.
//
// # Invariants
//
//   - Only agents in the Registry are ever called; an unknown agent id is an
//     error wrapping ErrUnknownAgent and nothing is sent.
//   - Every request is a tools/call whose arguments are the task fields with the
//     envelope fields flat beside them, always including adcp_version "3.1" (and
//     the deprecated adcp_major_version 3). HTTP requests carry
//     "Authorization: Bearer <credential>" and "Accept: application/json,
//     text/event-stream". Credentials are never logged or put in errors.
//   - Every request is validated against its 3.1.19 request schema with format
//     assertion on before any network I/O; a violation is a *ValidationError
//     naming the offending field by JSON pointer.
//   - A mutating call (create_media_buy, update_media_buy, sync_plans,
//     report_plan_outcome, sync_governance) is an Intent: its idempotency_key
//     and exact argument bytes are fixed once by NewIntent and sent unchanged on
//     every attempt. Reads and polls (get_task_status / tasks/get, list_tasks,
//     get_media_buys, check_governance) get a fresh UUID v4 key per call;
//     get_adcp_capabilities is exempt and gets none.
//   - Before a mutating call the agent's capabilities are read (cached). A
//     resend is refused with a terminal *Error (CodeNoReplayWindow) when the
//     agent declares no adcp.idempotency.replay_ttl_seconds, and with
//     CodeReplayWindowPassed when the intent is older than the window. A first
//     attempt that fails transiently at such an agent is reported as terminal.
//   - Results are extracted per the MCP extraction rules: isError → error path
//     (structuredContent.adcp_error, else adcp_error in JSON text, else a generic
//     KindTool error); otherwise structuredContent when it is an object that is
//     not only adcp_error, else the first content[].text (≤ 1 MB) that parses as
//     such an object. A missing status means completed.
//   - Every failure is an *Error (errors.As) or a *ValidationError; Decide(err)
//     is the single place that says retry with the same key, fix and resend, or
//     stop. Missing recovery values default from enums/error-code.json
//     (enumMetadata); codes outside the enum are terminal. Transport failures,
//     timeouts and HTTP 429/5xx are transient; retry_after / Retry-After are
//     clamped to [1 s, 1 h].
//   - Capabilities and tools/list answers are cached per agent for
//     Options.CapabilitiesTTL against the injected clock. The polling tool is
//     get_task_status when listed, else tasks/get (else tasks_get); listing is
//     list_tasks, else tasks/list.
//   - Schemas load from an fs.FS (NewValidator), so a Lambda can embed a vendored
//     copy; LoadValidator(SchemaDir()) shares compiled schemas per process.
//   - MCP sessions are opened per call (initialize, call, close) with no
//     standalone SSE stream, so stateless sellers that answer every POST as SSE
//     and issue no Mcp-Session-Id work.
//
// # Tolerated 3.0 behaviour (observed with @adcp/sdk 6.11.0, AdCP 3.0.6)
//
// The interop test (interop_test.go, BUYFLOW_NODE_TESTS=1) runs this client
// against a seller built on @adcp/sdk's own server framework. Deviations from
// 3.1 the client tolerates:
//
//  1. A synchronous create_media_buy answers with the media-buy status in the
//     top-level "status" ("pending_creatives", "active") and no envelope status;
//     Response.LegacyStatus keeps it and DecodeMediaBuy maps it to
//     MediaBuyStatus, the envelope status defaulting to completed.
//  2. Responses carry no adcp_version echo (Response.AdCPVersion is empty).
//  3. No get_task_status / list_tasks tools; polling uses the legacy tool
//     "tasks/get" (also registered as "tasks_get"), discovered via tools/list.
//  4. tasks/get ignores include_result for the shape of progress, never returns
//     progress and does not echo context; the completion artifact is in result.
//  5. Errors arrive only as adcp_error on isError results (no payload errors[]).
//  6. The success content[0].text is a human summary, not JSON; only
//     structuredContent carries the payload.
//  7. Every POST is answered as SSE, statelessly (no Mcp-Session-Id).
//  8. Governance 3.0 peers answer check_governance with root "status" instead of
//     "verdict" and report_plan_outcome with "status" instead of
//     "outcome_state" (handled by DecodeGovernance / DecodeOutcome; not
//     exercised by the interop seller).
//
// The spec vectors disagree with the buyer brief on one point: the brief says
// unknown error codes default to transient, the transport-error-mapping
// vectors say an unknown code without recovery escalates (terminal). This
// package follows the vectors.
package adcp
