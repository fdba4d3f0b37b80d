package record

import "time"

// Campaign is the ledger's record of one campaign: one plan bought across several sellers. It
// holds what the buyer asked for and which operation each leg is; every leg's status lives on its
// own operation (the facts are written once), and a campaign's status is derived from them.
type Campaign struct {
	ID                string `dynamodbav:"id"`
	Tenant            string `dynamodbav:"tenant"`
	Name              string `dynamodbav:"name,omitempty"`
	GovernanceAgentID string `dynamodbav:"governance_agent_id"`
	PlanID            string `dynamodbav:"plan_id"`
	// Policy is the partial-failure policy (best_effort or all_or_nothing).
	Policy string `dynamodbav:"policy"`
	// BudgetTotal is the campaign's total budget as a decimal string; never a float.
	BudgetTotal string `dynamodbav:"budget_total"`
	Currency    string `dynamodbav:"currency"`
	Requester   string `dynamodbav:"requester,omitempty"`
	// NotifySlack is the Slack user or channel id the requester asked to hear about the
	// campaign in (its status events carry it).
	NotifySlack string        `dynamodbav:"notify_slack,omitempty"`
	Legs        []CampaignLeg `dynamodbav:"legs"`
	// PlanIntent is the frozen sync_plans request (an adcp.Intent as JSON: task, idempotency key,
	// exact bytes) when the campaign pushes its plan: written with the campaign, before the
	// call, and sent as is by every attempt.
	PlanIntent []byte `dynamodbav:"plan_intent,omitempty"`
	// PlanClaims, PlanUnsent, PlanClaimedBy and PlanSentAt count the attempts that set out to
	// send PlanIntent, as an intent item's Claims, Unsent, ClaimedBy and CreatedAt do (Intent;
	// PlanIntentRecord reads them as one). CreateCampaign stores a plan unsent.
	PlanClaims    int64     `dynamodbav:"plan_claims,omitempty"`
	PlanUnsent    bool      `dynamodbav:"plan_unsent,omitempty"`
	PlanClaimedBy string    `dynamodbav:"plan_claimed_by,omitempty"`
	PlanSentAt    time.Time `dynamodbav:"plan_created_at,omitempty"`
	CreatedAt     time.Time `dynamodbav:"created_at"`
	// Outcome is the final status the Campaign execution recorded once nothing was left to do
	// (no cancel pending); empty while it runs.
	Outcome   string    `dynamodbav:"outcome,omitempty"`
	SettledAt time.Time `dynamodbav:"settled_at,omitempty"`
	// Committed is what the legs committed in total (a decimal string), written with Outcome:
	// the campaign list shows it without reading any leg.
	Committed string `dynamodbav:"committed,omitempty"`
	// Reason is why the campaign failed when a step of the Campaign execution itself failed
	// after its retries (written with Outcome failed): a sentence for a person, since no leg's
	// status explains it.
	Reason string `dynamodbav:"reason,omitempty"`
	// ApprovalID is the campaign's latest approval (one decision for every leg), when policy
	// asked for one; the approval item holds its decision.
	ApprovalID string `dynamodbav:"approval_id,omitempty"`
	// Version counts the campaign item's writes from 1 (its creation); naming its approval and
	// recording its outcome each add one. Its status events' sequence is the version after the
	// write (a campaign stored before it counted reads as version 1).
	Version int64 `dynamodbav:"version,omitempty"`
}

// SyncPlansIntent is the ledger task name of a campaign's plan intent (PlanIntentRecord).
const SyncPlansIntent = "sync_plans"

// PlanIntentRecord returns the campaign's plan intent as an intent record, for ClaimIntent
// and ReleaseIntent (they write its claims on the campaign's item), or ErrNotFound when the
// campaign pushes no plan. Request is PlanIntent as stored; CreatedAt is zero until a claim
// sets out to send it after every earlier claim was released. A campaign stored before its
// plan's claims were counted reads with no claims and not unsent: maybe sent, so its next
// push is a resend.
func (c *Campaign) PlanIntentRecord() (*Intent, error) {
	if len(c.PlanIntent) == 0 {
		return nil, ErrNotFound
	}
	return &Intent{Tenant: c.Tenant, OperationID: c.ID, Task: SyncPlansIntent, Request: c.PlanIntent, CreatedAt: c.PlanSentAt,
		Claims: c.PlanClaims, Unsent: c.PlanUnsent, ClaimedBy: c.PlanClaimedBy}, nil
}

// CampaignLeg is one media buy of a campaign.
type CampaignLeg struct {
	OperationID string `dynamodbav:"operation_id"`
	SellerID    string `dynamodbav:"seller_id"`
	PONumber    string `dynamodbav:"po_number"`
	// Amount is the leg's amount (the buy's one amount) as a decimal string.
	Amount string `dynamodbav:"amount"`
}
