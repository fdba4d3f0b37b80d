// Package sellertask is the one place a seller's task update becomes a ledger fact and a
// parked wait is woken: the poll stage, the webhook receiver and the reconciliation sweep all
// call it, so that a poll answer, a webhook delivery and a sweep's list_tasks row are recorded
// by the same rules.
//
//   - RecordStatus maps the AdCP task status (workflow.FromTaskStatus), reads a completion's
//     result (adcp.DecodeMediaBuy), records the seller task id, takes the legal step through
//     working when the transition table needs it, answers a stale status as "no change" and
//     emits SellerTaskDuration when the task ends.
//   - Move is the forward-only transition: a refused move is "no change", never an error.
//   - RecordLost handles a task the seller answers REFERENCE_NOT_FOUND for: the operation
//     keeps waiting for LostTaskGrace from the first such answer, then fails with a finding
//     (EventLostTask, LostSellerTasks) that tells a person an order may exist at the seller.
//   - Wake clears the parked AwaitSeller token first (conditional, so one waker wins) and then
//     completes it with WakeOutput, the state machine's view of what the ledger holds.
//
// What differs per caller (event type and actor, retries of a lost race, how a stale or
// repeated status is recorded) is a field of Update or Deps, or stays in the caller.
package sellertask
