// Package record holds buyflow's nouns, free of any storage: a media buy's operation and its
// view, the audit timeline's events and their types (finance's contract), approvals, campaigns,
// write-ahead intents, idempotency claims, locks, receipts, the circuit breaker's state, a placed
// buy's state after its changes, delivery snapshots, the sweep's progress per seller, the errors
// every layer matches (ErrNotFound, ErrConflict and their typed forms), and the text helpers that
// bound what goes into an event (Clip, EventDetail).
//
// The use cases speak these nouns; package ledger maps them to DynamoDB items (the dynamodbav
// tags are its column names, and the only trace of storage here: a tag is a string, not an
// import). Outside tests, only wiring, the local stack, the test emulators and harnesses that
// build a store, and the agent registry's own store (same table) import ledger; archtest's
// TestOnlyWiringImportsTheLedger holds that list.
package record
