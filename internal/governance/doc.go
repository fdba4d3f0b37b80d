// Package governance is the governance function's use case (Service): CheckGovernance
// (check_governance with the exact create_media_buy arguments, machine-actionable conditions
// applied, the async review loop), ReportOutcome (report_plan_outcome) and RecordFailure (the
// failure recorded and reported). What it shares with the create and poll stages, and the
// invariants all three keep, are in internal/stage.
package governance
