// Package reconcile is the reconciliation sweep behind functions/reconcile (EventBridge
// Scheduler, every minute): the way a buy learns its seller's progress when no webhook arrived,
// at a cost that grows with sellers and pending tasks, not with state transitions (the per-buy
// loop in the state machine is only a safety net of hours). It compares the ledger's pending
// operations with what each seller reports through list_tasks (or legacy tasks/list), or, for
// a seller without a listing, with each pending task's status, and repairs or reports every gap.
//
// # One sweep: a plan and its shards
//
// A planner run (Plan, or Run) finishes the backfill of the ledger's per-seller pending index
// if it can (operations stored before the index; ledger.BackfillSellerIndex), stores a plan
// (record.SweepPlan) and hands one shard per seller (Config.Sellers: the registry's sellers)
// to a Dispatcher (internal/sweepqueue: one SQS message each, whose event source mapping
// invokes the function again with Shards, a batch at a time), or, in Run, sweeps the shards
// itself, SellerConcurrency at once. Plan makes no new plan while the last one's shards have
// not all reported, until PlanTimeout after it, so shards never pile up behind a slow plan. A
// shard is one seller's pass:
//
//  1. Read the seller's pending operations from the per-seller index (ListPendingBySeller,
//     paginated) and emit PendingOperations by stage (the fleet's count is the sum over a
//     plan's shards). Group them by the media buy's account (list_tasks is account-scoped).
//     A seller with nothing pending ends there.
//  2. A seller whose retry_after reached past an earlier pass (Progress.NotBefore) is
//     "deferred" until then. Otherwise take the lease record.ReconcileLock(seller); a lease
//     held by another shard means "skipped": two shards never reconcile one seller at once.
//  3. list_tasks with the pending statuses (submitted, working, input-required), our context
//     marker ("operation_id", context_contains) and task type create_media_buy, paginated.
//  4. Compare, for the operations in Config.Statuses (default submitted, working,
//     input_required, creating):
//     - Listed with another status than the ledger's, not listed (the listing holds pending
//     tasks only: the task usually ended), or the seller offers no listing: read the task
//     directly (get_task_status / tasks/get, include_result), within the seller's budget:
//     PollConcurrency reads at once, PollRate a second, none before a retry_after it sent (a
//     short one is waited out and the read made again; one past the run stops the pass there).
//     A status the seller moved on (a terminal one above all: a lost webhook) is recorded
//     forward only and the parked AwaitSeller token is woken with sellertask.WakeOutput — the
//     webhook's path (finding lost_update). A read with the ledger's status writes nothing.
//     - The direct poll answers REFERENCE_NOT_FOUND: the operation keeps waiting for
//     the lost-task grace (RunConfig.LostTaskGrace, sellertask.LostTaskGrace by default) from
//     the first such answer (the poll stage's grace too: the
//     seller's records may lag), then moves to failed with the lost-task finding (an
//     EventLostTask transition: seller, PO number, what may exist there, what to check;
//     LostSellerTasks), its token is woken so the workflow records the failure and ends, and
//     the finding unknown_task is counted.
//     - A listed create_media_buy task older than the lost-task grace that no pending
//     operation waits on is an orphan: an "orphan" event is appended to the pseudo-operation OrphanTenant /
//     OrphanOperation (once per OrphanRenotify per task) for a person to decide. It is never
//     adopted or canceled automatically.
//     - An operation not updated for StaleAfter whose execution (followed through its
//     continue-as-new generations, described once per StaleAfter of quiet, not every run) is
//     no longer RUNNING, or whose deadline passed more than DeadlineSlack ago: marked (reason +
//     "update" event via ledger.UpdateFields, at most once per reason) and counted
//     (execution_ended, deadline_passed; the latter also Timeouts).
//     A seller that offers no listing tool (CodeToolNotOffered: some 3.0 peers, the official
//     SDK's) gets no orphan detection. A
//     DescribeExecution refused with AccessDeniedException turns the execution check off for
//     the rest of the run (one error line, not one per operation).
//  5. Progress is stored per seller in the ledger (record.SweepProgress, item pk
//     "RECONCILE#<seller>", sk "PROGRESS"), written only with the holder's lease fence (condition: no item, or
//     stored fence <= ours), so a stale holder cannot rewind a newer one.
//
// # Heartbeat
//
// Every shard that read its seller's index to the end reports to its plan
// (ledger.ReportShard); the one that completes a plan made with the index fully backfilled
// stores the sweep's heartbeat (record.SweepHeartbeat, fresh for HeartbeatFor from the plan's
// start). The heartbeat so vouches only for a sweep in which every seller's shard ran, on
// whichever worker; a shard that failed (the seller's pending operations unreadable) or never
// ran withholds it, and the stages fall back to the short safety net once it is stale. A
// shard of a replaced plan counts for nothing.
//
// # Time budget
//
// Each seller's pass is a shard, bounded by its own deadline: ShardBudget (50 s) after it
// starts, never past the run's. The run stops before Deadline(ctx) (the Lambda deadline minus
// Margin). Between list pages and between batches of PollConcurrency operations a pass checks
// its clock, and no read starts past it; it stores where it stopped (account group, list cursor or the last operation of
// the compared prefix) and returns. The next shard resumes that seller from there. A pass
// resumed in the comparison phase has not seen the earlier pages, so it polls every operation
// directly: more calls, never a wrong conclusion (the direct poll is the authority).
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
