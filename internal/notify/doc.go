// Package notify is the notify function's use case (Service): RequestApproval (the approval
// stored with its task token, the operation moved to awaiting_approval, the Slack request
// with one signed link per approver) and ExpireApproval (the approval expired, escalated
// once when the policy says so). What it shares with the approve Lambda, and the step's
// invariants, are in internal/approval.
package notify
