// Package poll is the poll function's use case (Service): AwaitSeller (the task token parked for
// the seller's webhook, completed at once when the ledger already holds a decision) and
// PollSeller (the seller's task read, with backoff). A seller's task update is recorded, and
// a parked wait woken, by internal/sellertask, shared with the webhook receiver and the sweep;
// the rest it shares with the other stages is in internal/stage.
package poll
