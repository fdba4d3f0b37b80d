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
//     envelope fields flat beside them, always including the adcp_version negotiated
//     with the agent (Negotiate: "3.1" or "3.2", a pinned release candidate; see
//     Speaks) and the deprecated adcp_major_version 3. The request is validated in that
//     version's schemas and shaped for it in one place per task (CheckGovernanceRequest's
//     atVersion); an intent keeps the version it was fixed in; answers are read in the
//     version they echo, else the one sent (DecodeMediaBuy, recoveryFallback). HTTP requests carry
//     "Authorization: Bearer <credential>" and "Accept: application/json,
//     text/event-stream". Credentials are never logged or put in errors.
//   - The credential is the static token the agent's credential_ref names, or
//     with Agent.Auth an OAuth 2.0 client credentials token (oauth.go): the
//     token endpoint configured or discovered from the agent's 401 (RFC 9728,
//     RFC 8414), tokens kept per process until 10 s before they expire, and a
//     refused request resent once, byte for byte, with a fresh token. The
//     client secret only ever goes to the token endpoint.
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
//     (structuredContent.adcp_error, else its first fatal errors[] entry, the
//     spec's Error arm; the same in JSON text; else a generic KindTool error); otherwise structuredContent when it is an object that is
//     not only adcp_error, else the first content[].text (≤ 1 MB) that parses as
//     such an object. A missing status means completed.
//   - Every failure is an *Error (errors.As) or a *ValidationError; Decide(err)
//     is the single place that says retry with the same key, fix and resend, or
//     stop. Missing recovery values default from enums/error-code.json
//     (enumMetadata); codes outside the enum are terminal. Transport failures,
//     timeouts and HTTP 429/5xx are transient; retry_after / Retry-After are
//     clamped to [1 s, 1 h] and kept only on transient errors (a wait before a
//     retry means nothing for a call that is not retried).
//   - Capabilities and tools/list answers are cached per agent for
//     Options.CapabilitiesTTL against the injected clock. The polling tool is
//     get_task_status when listed, else tasks/get (else tasks_get); listing is
//     list_tasks, else tasks/list.
//   - The validator is Options.Validator, a RequestValidator: internal/adcpvalidate
//     over the schemas embedded by internal/adcpschemas, or a folder it is pointed
//     at. It is apart so that a binary calling no agent does not link the schema
//     library; the tool → request schema table stays here (RequestSchema).
//   - MCP sessions are opened per call (initialize, call, close) with no
//     standalone SSE stream, so stateless sellers that answer every POST as SSE
//     and issue no Mcp-Session-Id work.
//
// # Tolerated 3.0 behaviour (observed with @adcp/sdk 6.11.0, AdCP 3.0.6)
//
// The interop test (interop_test.go, BUYFLOW_NODE_TESTS=1) runs this client
// against interop/seller.mjs, a seller on @adcp/sdk's own server framework
// with its strict request validation on. Deviations from 3.1 the client
// tolerates (all observed on the wire unless marked):
//
//  1. A synchronous create_media_buy answers with the media-buy status in the
//     top-level "status" ("pending_creatives") and no envelope status and no
//     media_buy_status; Response.LegacyStatus keeps it, the envelope status
//     defaults to completed and DecodeMediaBuy maps it to MediaBuyStatus. The
//     completion artifact in a tasks/get result does the same ("active").
//  2. Responses carry no adcp_version echo (Response.AdCPVersion is empty).
//  3. get_adcp_capabilities has adcp.major_versions but no
//     adcp.supported_versions (and an extra library_version); it does declare
//     adcp.idempotency.replay_ttl_seconds.
//  4. No get_task_status / list_tasks tools ("tasks/get" and "tasks_get"
//     only): polling uses tasks/get, found through tools/list; ListTasks
//     returns a terminal CodeToolNotOffered error at such an agent.
//  5. tasks/get puts the completion artifact in result whether or not
//     include_result is sent, never returns progress, and does not echo
//     context.
//  6. A thrown error arrives as adcp_error on an isError result
//     (structuredContent plus a JSON copy in content[0].text); issues[] use
//     "schemaId" instead of "schema_id" (kept raw in Details). A platform that
//     returns the Error arm (errors[]) also answers isError, with errors[] in
//     structuredContent and no adcp_error: its code and recovery are kept.
//  7. A successful content[0].text is a human summary, not JSON; only
//     structuredContent carries the payload.
//  8. Every POST is answered as SSE, statelessly (no Mcp-Session-Id); the
//     first create_media_buy after start takes seconds (lazy schema compile in
//     the SDK), so the interop test uses a 45 s call timeout.
//  9. The success body still carries the deprecated valid_actions[].
//  10. The tool name "tasks/get" breaks the MCP tool-name rules (the SDK
//     warns); the go-sdk client calls it fine.
//  11. update_media_buy answers the media-buy status at the root
//     ("canceled" after canceled: true). Three media-buy statuses (completed,
//     rejected, canceled) are task statuses too; DecodeMediaBuy reads a root
//     status as the buy's whenever the answer has a media buy, no error and no
//     media_buy_status, so a cancel that worked is never a canceled task.
//  12. (Not exercised by the interop seller.) Governance 3.0 peers answer
//     check_governance with root "status" instead of "verdict" and
//     report_plan_outcome with "status" instead of "outcome_state";
//     DecodeGovernance / DecodeOutcome accept both.
//
// Our 3.1 requests (adcp_version "3.1", adcp_major_version 3, keys on polls)
// pass the SDK's strict 3.0.6 request validation.
//
// # Sellers that declare AdCP 3.2
//
// buyflow speaks 3.2 with an agent whose supported_versions lists "3.2" (Negotiate). An
// answer that does not say it is 3.2 is read with 3.1's tolerance: the deprecated root media-buy status of
// create/update successes is removed, so media_buy_status is read when the
// root status is absent (the envelope then defaults to completed); retry_after
// may come as an integer (it is read as a number either way) and is applied
// only to transient errors; major_versions may be absent.
//
// The spec vectors disagree with a common reading of the error model on one
// point: that reading says unknown error codes default to transient, the transport-error-mapping
// vectors say an unknown code without recovery escalates (terminal). This
// package follows the vectors.
package adcp
