// Package campaign holds the campaign use cases: one plan bought across several sellers.
// Submitting a campaign validates every leg exactly as a single media buy is validated
// (mediabuy.ParseSubmit, the same seller lookup, the buy's one amount definition), refuses legs
// that add up to more than the campaign's total, mixed currencies and duplicate PO numbers,
// claims the Idempotency-Key as a buy does, and places every leg as a full media buy with its
// own operation, execution, ledger history and timeline (mediabuy.Service.PlaceAll).
//
// The ledger holds one campaign item (the plan, the policy, the total and which operation each
// leg is); a campaign's status and committed amounts are derived from its legs' operations on
// every read, so nothing is written twice and nothing can disagree.
//
// Invariants:
//   - A refused campaign (any *mediabuy.RequestError) leaves nothing in the ledger and starts
//     no leg; a leg whose PO number is locked by an active buy refuses the whole campaign.
//   - The campaign id and every leg's operation id derive from the tenant and the
//     Idempotency-Key, so a retry converges on the same campaign, operations and executions.
//   - Every amount is exact (internal/money) and in the campaign's one currency.
//   - Every read is scoped by the caller's tenant.
package campaign
