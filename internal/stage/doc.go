// Package stage is what the use cases behind the MediaBuy state machine's Lambda tasks share:
// the governance stage (internal/governance: check, report, fail), the create stage
// (internal/create: create, cancel) and the poll stage (internal/poll: park, poll), one package
// per Lambda, each built with exactly what its Lambda gives it. Stage holds the ledger, the
// AdCP client, the clock and the outputs; it reads an operation's stored request, moves it
// forward only, fixes write-ahead intents, keeps the webhook token, records a governance
// check, and maps AdCP failures to the workflow errors the ASL matches. The functions under
// functions/ only wire a use case and hand it the raw task payload; each Handle is a
// dispatch.Table from "action" to the use case's method, which returns errors through
// workflow.TaskError, so each errorType is a name the ASL matches.
//
// # Invariants
//
//   - The ledger holds the facts, forward only: every status change is a ledger.Transition
//     (conditional, with its audit event). A refused transition (the operation already moved
//     on, e.g. a late "working" after "completed") is "no change", never an error, and the
//     output reports the ledger's status, not the stale one.
//   - The gate is closed: nothing reaches a seller without an approved governance check whose
//     exact payload is the one sent. The approved payload (after machine-actionable conditions)
//     is stored write-ahead under intent "check_governance#<check_id>", and create builds the
//     seller call from it. An unreachable governance agent is a TransientError (the ASL retries,
//     then fails): never a "proceed".
//   - Every mutating call (create_media_buy, update_media_buy cancel, report_plan_outcome) is an
//     adcp.Intent fixed once and stored with ledger.PutIntent before its first send; every retry
//     sends the stored key and bytes. Intent task names: "create_media_buy",
//     "update_media_buy#cancel", "report_plan_outcome#completed", "report_plan_outcome#failed".
//   - Each attempt claims the intent before its send (FixIntent). A first send that provably
//     left nothing (adcp.NotSent: the agent's circuit breaker refused it, the client failed
//     before connecting) releases its claim (ReleaseUnsent), so the next attempt sends it as a
//     first send again: an agent without a replay window refuses every resend. Any other
//     outcome, a killed process included, leaves the intent maybe sent: a resend (Attempt 1).
//   - A create whose intent may have been sent while the operation is still "creating" is a
//     lapsed claim: the seller may have executed it. It is reconciled with get_media_buys (our
//     echoed context.operation_id) before the stored intent is resent.
//   - The webhook token is random per operation, created once (intent "push_token") and stored
//     on the operation only as record.HashToken; the token itself lives only in the frozen
//     create_media_buy bytes and that intent, never in logs, events or state output.
//   - An async governance review is remembered under intent "check_governance#review#v<version>"
//     (the operation's version does not move while the review is pending), and polled with
//     get_task_status on the governance agent on every later "check".
//   - A "check" while the operation awaits approval is the state machine's re-check after that
//     approval (RouteApproval) only when the notify stage asked a person after the operation's
//     last move into awaiting_approval (an "approval_requested" event); otherwise it is a retry
//     of this stage's own needs_approval and answers it again without asking the agent. The
//     re-check after an approval does not ask for another one.
//   - Create never spends on a lapsed approval: when GovernanceExpiresAt has passed it re-checks
//     the stored payload first (operation still awaiting_approval) or stops (TerminalError).
//   - Park completes its own token when the last seller result already needs a decision, or when
//     the ledger holds a newer status that does (the lost-wakeup race); sellertask.WakeOutput is the
//     one function that turns the ledger into that output, shared with the webhook.
//   - A seller's task update is recorded, and a parked wait woken, by internal/sellertask,
//     which the poll stage shares with the webhook receiver and the reconciliation sweep.
//   - Task tokens, credentials, webhook tokens and governance_context never appear in a log
//     line, an audit event or a task output.
package stage
