// Package submit holds the submit function's media-buy use cases: submitting a buy (validate,
// claim the Idempotency-Key, place it with the buy kernel's Placer, start its execution) and
// the reads buyers and finance make. What a buy is (its request, amount, caller, refusals and
// views) is the buy kernel's, shared with campaigns, changes and delivery reads. It declares the
// interfaces it needs (ledger, state machine) and imports no AWS SDK, no Lambda events and no
// net/http.
//
// Invariants:
//   - A refused request (any *buy.RequestError) leaves nothing in the ledger and spends nothing.
//   - The same Idempotency-Key with the same canonical body returns the same operation; with
//     another body it is refused with 422.
//   - The execution is named after the operation id, so a retry after a partial failure
//     converges on the same execution.
//   - Every read is scoped by the caller's tenant.
package submit
