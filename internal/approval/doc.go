// Package approval is what the two use cases of the human approval step share: the notify
// stage (internal/notify: Request and Expire) and the approve Lambda (internal/approve: GET
// and POST of /v1/approvals/{approval_id}, the approver routes). It holds their configuration
// and the narrow Ledger interface, the approval rounds of an operation as its timeline records
// them, what a page or a message shows of an approval and of the purchase, and the loading of
// the link keys and the Slack client from Secrets Manager. The pure pieces are leaves: signed
// links, decision rules and pages in internal/approvalcore, the approval policy (who approves,
// above what amount, for how long) in internal/approvalpolicy; internal/slack renders the
// messages.
//
// The invariants below are the step's; each use case keeps its part.
//
// Invariants:
//
//   - The task token never leaves the ledger. It is stored on the approval item; links, Slack
//     messages, pages, events, log lines and errors carry only the approval id, which is
//     "apr_" + base64url(first 128 bits of SHA-256("buyflow-approval-id/v1\x00" + token)). The
//     id derives from the token so that a retried Request converges on one approval; the token
//     cannot be recovered from it.
//   - Request is idempotent per task token: the approval is created once (attribute_not_exists),
//     the operation moves to awaiting_approval unless it is already there, Slack is posted only
//     while the approval records no message, and the approval_requested event is written once.
//   - An operation's approvals are listed by its timeline: approval_requested events carry
//     {approval_id, round, escalation}, approval_expired events {approval_id, escalated}. Expire
//     acts on the latest round; the round after an expiry that escalated goes to the escalation
//     approvers, and an escalated round that expires is never escalated again.
//   - GET changes nothing: it verifies the link, reads the ledger and renders. Views are logged,
//     not written. Only POST decides.
//   - POST writes the ledger first (conditional pending → approved | rejected, which also
//     requires the approval not to have expired) and only then calls SendTaskSuccess (output
//     workflow.ApprovalOutput) or SendTaskFailure (error "ApprovalRejectedError"). A lost race
//     shows what the ledger holds ("already approved by X at T", "expired at T"); a token that
//     is gone is reported as "recorded, but too late", never as our error. A hand-over that
//     failed for another reason (after three quick attempts) is recorded as task "failed" on the
//     decision event; the decider's next POST retries it, anyone else's only reads the truth.
//   - The requester gets no link and is refused (approvalcore.ErrSelfApproval) if they use one.
//   - Every decision attempt made by POST is an event: record.EventDecision for the one that
//     decides, approval_refused for the others, with approver, source IP, user agent, key id,
//     amount, decision and comment. Every GET of a validly signed link is an approval_viewed
//     event (approver, source IP, user agent, key id, what the page said): audit only, it never
//     changes the approval, so an unfurler's fetch is visible but decides nothing.
//   - HandleHTTP never returns an error: every answer is an HTML page served with
//     approvalcore.SecurityHeaders; a link that fails verification (tampered, unknown key, expired)
//     gets 403 and changes nothing.
//   - The approver routes (GET /v1/approver/approvals[/{approval_id}], IAM) take
//     the tenant from the caller's verified account and the approver from Policy.Identities
//     (an IAM user ARN, or a role ARN for all its sessions; never a session ARN). They show
//     only pending, unexpired approvals of that tenant that name the approver and that the
//     approver did not request; every other id is the same 404. They read and sign, never
//     decide: the review link they return leads to the same confirm page and POST.
//   - What a page or message shows as bought is the payload the governance check stored (the
//     bytes the create stage sends) and the check's verdict from the timeline; a payload that
//     cannot be read exactly is never shown in part. For a change to a placed buy (an
//     operation of kind modification) it is the record the modify stage stored when it asked
//     (record.ChangeReviewIntent: the buy, each line now and after, the verdict), and the
//     approval's amount is the buy's budget after the change.
//   - Metrics (Config.Metrics, CloudWatch EMF, flushed once per invocation by the function):
//     a decision the ledger takes records ApprovalDecided and ApprovalLatency (request stored →
//     decision) by Outcome, and ApprovalRejected for a rejection; an expiry Expire takes records
//     Timeouts{Kind=approval}. Retried hand-overs, lost races, refused clicks and retried
//     expiries record nothing.
package approval
