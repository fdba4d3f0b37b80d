// Package approve is the approve function's use case (Service): the confirm page (GET
// changes nothing), the decision (POST: the ledger first, then SendTaskSuccess or
// SendTaskFailure) and the approver routes under /v1/approver/approvals. What it shares with
// the notify stage, and the step's invariants, are in internal/approval.
package approve
