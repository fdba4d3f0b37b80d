// Package mediabuy holds buyflow's use cases: submitting a media buy (validate, claim the
// idempotency key, take the business-key lock, create the operation, start the execution) and
// the reads buyers and finance make. It declares the interfaces it needs (ledger, state
// machine, schema validation) and imports no AWS SDK, no Lambda events and no net/http.
//
// Invariants:
//   - A refused request (any *RequestError) leaves nothing in the ledger and spends nothing.
//   - The same Idempotency-Key with the same canonical body returns the same operation; with
//     another body it is refused with 422.
//   - The execution is named after the operation id, so a retry after a partial failure
//     converges on the same execution.
//   - Every read is scoped by the caller's tenant.
package mediabuy
