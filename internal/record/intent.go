package record

import "time"

// Intent is the write-ahead record of one mutating seller call: the frozen request bytes and the
// seller idempotency_key, stored before the first attempt and reused by every retry.
//
// An intent that is sent also counts the attempts that set out to send it (Claims): each claim
// is written before its send, the put being the first. An intent is "maybe sent" unless Unsent
// says otherwise: a claim whose attempt provably sent nothing (the agent's circuit breaker
// refused it) is released with ReleaseIntent, and the next attempt's ClaimIntent sends it as a
// first send again. A process killed between a claim and its answer leaves the claim standing,
// so that intent is resent as a resend.
type Intent struct {
	Tenant      string `dynamodbav:"tenant"`
	OperationID string `dynamodbav:"operation_id"`
	// Task is the AdCP task name ("create_media_buy", "update_media_buy#cancel", ...).
	Task           string `dynamodbav:"task"`
	IdempotencyKey string `dynamodbav:"idempotency_key"`
	Request        []byte `dynamodbav:"request"`
	// CreatedAt is when the intent was fixed, or when its first send set out after every earlier
	// claim was released: a seller's replay window runs from the first request it received.
	CreatedAt time.Time `dynamodbav:"created_at"`
	// Claims counts the attempts that set out to send the intent. Zero on what is never sent (a
	// webhook token, a checked payload) and on intents stored before claims were counted (those
	// are maybe sent).
	Claims int64 `dynamodbav:"claims,omitempty"`
	// Unsent is true when every claim so far was released: nothing of the intent left buyflow.
	Unsent bool `dynamodbav:"unsent,omitempty"`
	// ClaimedBy is the random id of the last claim's write (a retry of that write recognises it).
	ClaimedBy string `dynamodbav:"claimed_by,omitempty"`
}

// CheckedIntentPrefix, followed by a governance check id, names the intent that holds the
// create_media_buy payload that check approved (conditions applied): what the create stage
// sends, and so what an approver is shown.
const CheckedIntentPrefix = "check_governance#"

// ChangeReviewIntent names the intent, on a change's operation, that holds what an approver
// of the change is shown (an approvalcore.ChangeRecord: the buy, each line before and after,
// governance's verdict), written once by the stage that asks for the approval.
const ChangeReviewIntent = "approval_subject#change"
