// Package reconcile is the reconciliation sweep behind functions/reconcile (EventBridge
// Scheduler, every few minutes): the second polling layer of the seller wait (docs/ARCHITECTURE.md, workflow step 5), whose cost grows
// with sellers, not with open buys. It compares the ledger's pending operations with what each
// seller reports through list_tasks (or legacy tasks/list) and repairs or reports every gap.
//
// # One sweep
//
//  1. Read every pending operation from the ledger's sparse pending index (ListPending, every
//     pending status, paginated) and emit PendingOperations by stage. Group them by seller, and
//     within a seller by the media buy's account (list_tasks is account-scoped).
//  2. Sellers are visited least recently completed first (their progress item says when). For
//     each, take the lease ledger.ReconcileLock(seller); a lease held by another run means
//     "skipped": two runs never reconcile one seller at once.
//  3. list_tasks with the pending statuses (submitted, working, input-required), our context
//     marker ("operation_id", context_contains) and task type create_media_buy, paginated.
//  4. Compare, for the operations in Config.Statuses (default submitted, working,
//     input_required, creating):
//     - Listed with another status than the ledger's, or not listed at all and last updated
//     more than Grace ago: poll the task directly (get_task_status / tasks/get, include_result).
//     A status the seller moved on (a terminal one above all: a lost webhook) is recorded
//     forward only and the parked AwaitSeller token is woken with stages.WakeOutput — the
//     webhook's path (finding lost_update).
//     - The direct poll answers REFERENCE_NOT_FOUND and the operation waited longer than
//     Grace: the operation moves to failed with a readable reason, its token is woken so the
//     workflow records the failure and ends, and the finding unknown_task is counted (alarm).
//     - A listed create_media_buy task older than Grace that no pending operation waits on is
//     an orphan: an "orphan" event is appended to the pseudo-operation OrphanTenant /
//     OrphanOperation (once per OrphanRenotify per task) for a person to decide. It is never
//     adopted or canceled automatically.
//     - An operation not updated for StaleAfter whose execution (followed through its
//     continue-as-new generations) is no longer RUNNING, or whose deadline passed more than
//     DeadlineSlack ago: marked (reason + "update" event via ledger.UpdateFields, at most once
//     per reason) and counted (execution_ended, deadline_passed; the latter also Timeouts).
//     A seller that offers no listing tool (CodeToolNotOffered: some 3.0 peers) gets no orphan
//     detection, and only its operations quiet for StaleAfter are polled directly. A
//     DescribeExecution refused with AccessDeniedException turns the execution check off for
//     the rest of the run (one error line, not one per operation).
//  5. Progress is stored per seller in the ledger table (item pk "RECONCILE#<seller>",
//     sk "PROGRESS"), written only with the holder's lease fence (condition: no item, or
//     stored fence <= ours), so a stale holder cannot rewind a newer one.
//
// # Time budget
//
// The sweep stops before Deadline(ctx) (the Lambda deadline minus Margin): between list pages
// and between operations it checks the clock, stores where it stopped (account group, list
// cursor or last operation) and returns. The next run resumes that seller from there. A run
// resumed in the comparison phase has not seen the earlier pages, so it polls every operation
// past Grace directly: more calls, never a wrong conclusion (the direct poll is the authority).
//
// # Invariants
//
//   - Forward only: every status change is a ledger.Transition; a refused one is "no change".
//   - Nothing is adopted or canceled at a seller; the sweep never sends a mutating AdCP call.
//   - Task tokens are only read from the ledger and handed to Step Functions; they never
//     appear in a log line, an event, a metric or the summary.
//   - Metric dimensions are bounded (stage, kind, code); ids go to logs and events only.
//
// What operators do with the findings is in RUNBOOK.md.
package reconcile
