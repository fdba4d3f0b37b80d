// Package workflow is the model shared by the state machine (statemachine/*.asl.json) and the
// Lambdas: the operation statuses and their legal transitions, the payloads each Task state
// sends and receives, and the error types whose Go type names are the ASL ErrorEquals names.
//
// Invariants:
//   - A terminal status (completed, failed, rejected, canceled, expired) never changes again,
//     with one exception: completed → canceled, when buyflow cancels at the seller a buy the
//     seller had completed (compensation).
//   - Transitions only move along [Transitions]; the ledger enforces this with a condition on the
//     current status (one of the legal predecessors) and on the version.
//   - Payloads carry identifiers and control values only: never a task token in an output, never
//     a credential or a signature (execution history is readable by finance).
//   - An error that Step Functions must match is returned to the Lambda runtime as a bare value of
//     one of the types below (see [TaskError]); aws-lambda-go reports the Go type name as
//     errorType, so a wrapped error would silently stop Retry and Catch from matching.
//
// This package imports the standard library only.
package workflow
