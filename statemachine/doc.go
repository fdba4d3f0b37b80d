// Package statemachine holds the MediaBuy workflow: the Amazon States Language file
// mediabuy.asl.json, the single source of truth that CDK deploys, the local stack deploys and
// the workflow tests execute. This package imports the standard library only: the Lambdas and
// the infra both import it.
//
// The file uses JSONPath only, no intrinsic functions, no context field but $$.Task.Token, no
// Pass state with Parameters, and discards the startExecution output, so that the offline
// interpreters run it as AWS does (aws-local-stepfunctions, which the local stack and the
// workflow tests run, and kumo's engine). It names its Lambda functions through ${Placeholder} definition
// substitutions; [Placeholders] lists them and [Render] fills them in.
//
// # States
//
// A new buy: IsContinuation → CheckGovernance → GovernanceDecision → (proceed) CreateMediaBuy →
// AwaitSeller ⇄ PollSeller → SellerTaskStatus → ReportOutcome → UndoRequired → MediaBuyCompleted.
//
//   - GovernanceDecision: pending → WaitForGovernanceReview (Wait, SecondsPath
//     $.governance.result.wait.interval_seconds) → CheckGovernance; needs_approval →
//     ApprovalForGovernance → RequestApproval; denied → GovernanceDenied; any other value →
//     UnexpectedGovernanceDecision (fail closed).
//   - RequestApproval (waitForTaskToken, TimeoutSecondsPath $.config.approval_timeout_seconds)
//     → RouteApproval: seller input → PollSeller; recheck_governance → CheckGovernance; else
//     CreateMediaBuy. ApprovalRejectedError → CancelIfPlaced; States.Timeout → ExpireApproval →
//     EscalateOrGiveUp (escalated → RequestApproval, else CancelIfPlaced). CancelIfPlaced
//     cancels (Compensate) only when a buy exists ($.seller present).
//   - AwaitSeller (waitForTaskToken, TimeoutSecondsPath $.seller.result.next.interval_seconds):
//     States.Timeout → PollSeller → AwaitSeller. A round costs two state transitions: the only
//     decision point is SellerTaskStatus after AwaitSeller succeeds, which happens when a webhook
//     (or reconcile) sends the task success, or at once when park sees that the seller result
//     it was given already needs a decision ([workflow.SellerOutput.NeedsDecision]).
//   - SellerTaskStatus: completed → ReportOutcome; other terminal → SellerDidNotComplete;
//     deadline_exceeded → SellerDeadlineExceeded → CancelAfterDeadline; input_required →
//     ApprovalForSellerInput; continue_as_new → ContinueAsNewExecution (states:startExecution,
//     Name $.seller.result.next_execution_name) → HandedOverToNextExecution; else PollSeller.
//   - CancelAfterDeadline cancels the buy at the seller (create function, action cancel, the
//     deadline as its reason; a cancel event in the timeline), then RecordFailure records
//     DeadlineExceededError, ends the operation expired and reports failed to governance. A
//     failed cancel (Catch
//     States.ALL at $.cancel_error) goes through DeadlineCancelFailed, which rewrites the cause
//     to say the buy may still be live at the seller, to RecordFailure (the operation ends expired).
//   - A continuation (its input has seller) goes from IsContinuation straight to AwaitSeller.
//   - ReportOutcome → UndoRequired: compensation_required → Compensate (the completed
//     operation moves to canceled) → AfterCompensation → CanceledAfterGovernanceFindings.
//     Compensate on the way to RecordFailure (CancelIfPlaced) leaves the status to it.
//   - Every failure (each Task's Catch States.ALL, and the Pass states that decide to stop)
//     puts {Error, Cause} at $.failure → RecordFailure → FailureKind → one Fail state a person
//     can read: DeniedByGovernance, RejectedByApprover, ApprovalExpired, DeadlinePassed,
//     SellerTaskFailed, MediaBuyFailed; FailureNotRecorded when recording fails too.
//   - Unless the ledger records the buy completed (the seller completed it and a webhook, a
//     poll or the sweep recorded it while a step failed): RecordFailure then reports it
//     completed and answers status completed, and FailureKind goes to UndoRequired, so the
//     execution ends as the ledger says (MediaBuyCompleted, or Compensate →
//     AfterCompensation → CanceledAfterGovernanceFindings).
//
// # Payload contract (Payload → output; outputs land at $.<stage>.result, see [workflow.Stage])
//
//	GovernanceFunctionArn check   StageInput                  → GovernanceOutput          $.governance
//	                      report  OutcomeInput                → OutcomeOutput             $.outcome
//	                      fail    OutcomeInput{failure}       → OutcomeOutput{status}     $.outcome
//	NotifyFunctionArn     request CallbackInput{task_token, reason} → ApprovalOutput by SendTaskSuccess, or
//	                              SendTaskFailure ApprovalRejectedError               $.approval
//	                      expire  StageInput{reason}          → ApprovalExpiry            $.expiry
//	CreateFunctionArn     create  StageInput                  → SellerOutput              $.seller
//	                      cancel  StageInput{reason}          → SellerOutput              $.compensation
//	PollFunctionArn       park    CallbackInput{task_token, wait, seller} → SellerOutput by SendTaskSuccess
//	                              (webhook, reconcile, or park itself)                 $.seller
//	                      poll    PollInput{generation, wait} → SellerOutput              $.seller
//
// Every Lambda task retries the four Lambda service errors, Runtime.ExitError (a sandbox that
// died mid-invocation: every stage is safe to run again) and TransientError with backoff,
// MaxDelaySeconds and full jitter; other errors are caught and recorded. Callback tasks are
// re-invoked on retry with a new token: request and park must overwrite the stored token.
package statemachine
