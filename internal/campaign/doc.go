// Package campaign holds the campaign use cases: one plan bought across several sellers.
//
// Submitting a campaign (Service.Submit) validates every leg exactly as a single media buy is
// validated (buy.ParseSubmit, the same seller lookup, the buy's one amount definition),
// refuses legs that add up to more than the campaign's total, mixed currencies and duplicate
// PO numbers, checks the governance plan it may carry against the sync_plans schema, claims the
// Idempotency-Key as a buy does (buy.Once), creates every leg's operation
// (buy.Placer), records the campaign with its frozen sync_plans request, and starts one
// Campaign execution (statemachine/campaign.asl.json) that runs every leg as a child execution
// of the MediaBuy state machine.
//
// The campaign function's tasks (Settler) push the plan (sync_plans) before the first check,
// close the legs that never started when that fails, and settle the partial-failure policy:
// under all_or_nothing, the completed legs to cancel when another did not complete; then the
// outcome is recorded once on the campaign. A step of the Campaign execution that fails after
// its retries is recorded too (Settler.Fail): failed, with a reason a person reads and, before
// the legs were placed, every leg named to be failed with it.
//
// The ledger holds one campaign item (the plan, the policy, the total and which operation each
// leg is, and the outcome once settled); every leg's status lives on its own operation. Until
// the outcome is recorded a campaign's status is derived from its legs on every read.
//
// Invariants:
//   - A refused campaign (any *buy.RequestError) leaves nothing in the ledger and starts
//     no leg; a leg whose PO number is locked by an active buy refuses the whole campaign.
//   - The campaign id and every leg's operation id derive from the tenant and the
//     Idempotency-Key, so a retry converges on the same campaign, operations and executions.
//   - The sync_plans request is written before it is sent, and every attempt sends those bytes,
//     claimed first on the campaign's item (record.Campaign.PlanIntentRecord): after an attempt
//     that may have sent it the push is a resend, after one that provably sent nothing a first
//     send again. A campaign stored before the claims were counted pushes a resend.
//   - Every amount is exact (internal/money) and in the campaign's one currency.
//   - Every read is scoped by the caller's tenant.
package campaign
