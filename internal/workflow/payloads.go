package workflow

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// The payloads below are the contract between the ASL file and the stage Lambdas. The state
// carries identifiers and control values only; every fact (amounts, seller task ids, the
// current task token) lives in the ledger and is read from there.

// ExecutionInput is the input of one MediaBuy execution, written by submit (or by the
// previous execution when the wait loop continues as a new one).
type ExecutionInput struct {
	OperationID string    `json:"operation_id"`
	Tenant      string    `json:"tenant"`
	Config      RunConfig `json:"config"`
	// Wait is set when this execution continues the wait loop of an earlier one.
	Wait *WaitState `json:"wait,omitempty"`
	// Seller is set with Wait: the last seller result as the state machine keeps it, with the
	// loop flags cleared (terminal, deadline_exceeded and continue_as_new false, next = Wait).
	// The continuation starts at AwaitSeller with it.
	Seller *Stage[SellerOutput] `json:"seller,omitempty"`
	// Generation counts continuations: 0 for the first execution of an operation.
	Generation int `json:"generation"`
	// StateMachineARN is the state machine this execution runs, written by submit: the wait loop
	// continues as a new execution of it. It travels in the input because a Lambda that the
	// state machine invokes must not reference the state machine back (a CloudFormation cycle)
	// and kumo has no $$.StateMachine context.
	StateMachineARN string `json:"state_machine_arn"`
}

// ChangeExecutionInput is the input of an execution that runs a change to a placed buy:
// OperationID is the change's own operation, and the present change field sends the state
// machine straight to CheckChange. A change never continues as a new execution (its deadline
// ends its wait long before the loop budget), so the continuation's input has no change.
type ChangeExecutionInput struct {
	ExecutionInput
	Change ChangeRef `json:"change"`
}

// LegExecutionInput is the input of a campaign leg's execution. The Campaign state machine has
// already run the leg's governance check and, when policy asked for a person, the campaign's one
// approval: Start says where the leg's media buy begins (StartCampaignLeg reads it), and Failure
// is what RecordFailure records for a leg that must not be bought.
type LegExecutionInput struct {
	ExecutionInput
	CampaignLeg LegStart   `json:"campaign_leg"`
	Failure     *StepError `json:"failure,omitempty"`
}

// LegStart says where a campaign leg's execution begins.
type LegStart struct {
	Start LegEntry `json:"start"`
}

// LegEntry is the first step of a campaign leg's execution.
type LegEntry string

// The entries of a campaign leg.
const (
	// LegCreate places the leg at once: governance let it through and, when the campaign
	// needed a person, the campaign's approval covers it.
	LegCreate LegEntry = "create"
	// LegRecheck checks governance again first: the campaign's approval came after the leg's
	// governance approval lapsed.
	LegRecheck LegEntry = "check"
	// LegFail records the leg's failure (its Failure) and buys nothing.
	LegFail LegEntry = "fail"
)

// ChangeRef names the buy a change execution changes and what the change does.
type ChangeRef struct {
	BuyID string `json:"buy_id"`
	Kind  string `json:"kind"`
}

// ChangeOutcome is the output of ApplyChange and RecordChangeFailure (at $.change_outcome).
type ChangeOutcome struct {
	// Outcome is applied, denied, rejected, approval_expired, expired or failed.
	Outcome string `json:"outcome"`
	Reason  string `json:"reason,omitempty"`
	// Revision and State are the buy's after the change.
	Revision int    `json:"revision,omitempty"`
	State    string `json:"state,omitempty"`
}

// RunConfig holds the timing knobs of one execution. They travel in the input so the tests can
// shrink them and so the ASL reads every interval from a path.
type RunConfig struct {
	// ApprovalTimeoutSeconds is the approval SLA: the RequestApproval state's timeout.
	ApprovalTimeoutSeconds int `json:"approval_timeout_seconds"`
	// PollInitialSeconds is the interval between the rounds of an async governance review.
	PollInitialSeconds int `json:"poll_initial_seconds"`
	// PollMaxSeconds is the per-buy safety net's interval: how long AwaitSeller waits for a
	// wake (a webhook, or the reconciliation sweep that reads every pending task's status each
	// minute) before PollSeller asks the seller itself. The sweep is how a buy normally learns
	// the seller's progress, so this is hours in production, the same whether or not the seller
	// sends webhooks: it only matters while the sweep is down.
	PollMaxSeconds int `json:"poll_max_seconds"`
	// SweepNetSeconds is the safety net's interval while the sweep's heartbeat is fresh
	// (record.SweepHeartbeat): a sweep that runs notices a finished task within a run or two,
	// so the net need only catch what the sweep cannot, and it waits this long, or until the
	// deadline when that comes first (the default: 24 h, the default deadline). With a stale
	// heartbeat the net is PollMaxSeconds. 0: the heartbeat is not read and the net is always
	// PollMaxSeconds.
	SweepNetSeconds int `json:"sweep_net_seconds,omitempty"`
	// DeadlineSeconds bounds the whole wait for the seller (24 h by default).
	DeadlineSeconds int `json:"deadline_seconds"`
	// LoopBudget is the number of wait-loop rounds one execution may run before it continues
	// as a new execution, keeping its history far below the 25,000-event cap.
	LoopBudget int `json:"loop_budget"`
	// DeliveryReadMinutes, when set, is the operator's override of the delivery read's cadence:
	// one read of each live buy every so many minutes for its whole flight (0: the cadence
	// follows the flight, see delivery.Cadence). The reconcile function reads it; executions
	// carry it along unused.
	DeliveryReadMinutes int `json:"delivery_read_minutes,omitempty"`
	// LostTaskGraceSeconds is how long a buy keeps waiting on a task its seller answers
	// REFERENCE_NOT_FOUND for before it fails with the lost-task finding (0: 600, ten
	// minutes; see sellertask.RecordLost). The poll stage and the reconciliation sweep read it.
	LostTaskGraceSeconds int `json:"lost_task_grace_seconds,omitempty"`
	// ExecutionCheckSeconds is how long a pending buy goes without an update before the
	// reconciliation sweep describes its execution, to find one that ended under it (0: 1800,
	// half an hour). The reconcile function reads it; executions carry it along unused.
	ExecutionCheckSeconds int `json:"execution_check_seconds,omitempty"`
}

// DefaultLostTaskGrace is the lost-task grace when the run configuration sets none: a seller
// that reloads its tasks after a restart, or whose records lag, has that long to find the task
// again.
const DefaultLostTaskGrace = 10 * time.Minute

// LostTaskGrace is the lost-task grace the configuration asks for (DefaultLostTaskGrace when
// it sets none).
func (c RunConfig) LostTaskGrace() time.Duration {
	if c.LostTaskGraceSeconds <= 0 {
		return DefaultLostTaskGrace
	}
	return time.Duration(c.LostTaskGraceSeconds) * time.Second
}

// DefaultRunConfig returns the production timings.
func DefaultRunConfig() RunConfig {
	return RunConfig{
		ApprovalTimeoutSeconds: 24 * 3600,
		PollInitialSeconds:     30,
		PollMaxSeconds:         4 * 3600,
		SweepNetSeconds:        24 * 3600,
		DeadlineSeconds:        24 * 3600,
		LoopBudget:             500,
	}
}

// Validate reports the first knob that is out of range.
func (c RunConfig) Validate() error {
	checks := []struct {
		name string
		v    int
	}{
		{"approval_timeout_seconds", c.ApprovalTimeoutSeconds},
		{"poll_initial_seconds", c.PollInitialSeconds},
		{"poll_max_seconds", c.PollMaxSeconds},
		{"deadline_seconds", c.DeadlineSeconds},
		{"loop_budget", c.LoopBudget},
	}
	for _, ck := range checks {
		if ck.v <= 0 {
			return &InvalidInputError{Field: "config." + ck.name, Reason: "must be a positive integer"}
		}
	}
	if c.SweepNetSeconds < 0 {
		return &InvalidInputError{Field: "config.sweep_net_seconds", Reason: "must not be negative (0 or absent: the net is always poll_max_seconds)"}
	}
	if c.SweepNetSeconds > 0 && c.SweepNetSeconds < c.PollMaxSeconds {
		return &InvalidInputError{Field: "config.sweep_net_seconds", Reason: "must not be below poll_max_seconds: the net while the sweep runs is the long one"}
	}
	if c.ExecutionCheckSeconds < 0 {
		return &InvalidInputError{Field: "config.execution_check_seconds", Reason: "must not be negative (0 or absent: half an hour)"}
	}
	if c.LostTaskGraceSeconds < 0 {
		return &InvalidInputError{Field: "config.lost_task_grace_seconds", Reason: "must not be negative (0 or absent: ten minutes)"}
	}
	if c.PollMaxSeconds < c.PollInitialSeconds {
		return &InvalidInputError{Field: "config.poll_max_seconds", Reason: "must not be below poll_initial_seconds"}
	}
	return nil
}

// Action names what a stage Lambda is asked to do; one function serves several actions and
// reads this field of its input first.
type Action string

// The actions the state machine sends, by function: governance (check, report, fail), notify
// (request, expire), create (create, cancel) and poll (park, poll).
const (
	ActionCheck   Action = "check"   // governance: CheckGovernance, also each async-review round
	ActionReport  Action = "report"  // governance: ReportOutcome (completed)
	ActionFail    Action = "fail"    // governance: RecordFailure (ledger + report failed)
	ActionRequest Action = "request" // notify: RequestApproval, stores the task token
	ActionExpire  Action = "expire"  // notify: ExpireApproval, after the approval SLA passed
	ActionCreate  Action = "create"  // create: CreateMediaBuy
	ActionCancel  Action = "cancel"  // create: Compensate (update_media_buy canceled: true)
	ActionPark    Action = "park"    // poll: AwaitSeller, stores the task token
	ActionPoll    Action = "poll"    // poll: PollSeller

	// modify: a change to a placed buy.
	ActionCheckChange Action = "check_change" // CheckChange: governance, phase modification
	ActionUpdate      Action = "update"       // UpdateMediaBuy: update_media_buy, write-ahead
	ActionApply       Action = "apply"        // ApplyChange: the buy's new state, the report
	ActionFailChange  Action = "fail_change"  // RecordChangeFailure: the change ends, the buy stays
)

// Actions lists every action in the order above.
var Actions = []Action{
	ActionCheck, ActionReport, ActionFail, ActionRequest, ActionExpire,
	ActionCreate, ActionCancel, ActionPark, ActionPoll,
	ActionCheckChange, ActionUpdate, ActionApply, ActionFailChange,
}

// Stage is how the state machine keeps a stage's result in its state: a Task's ResultSelector
// {"result.$": "$.Payload"} (a callback's {"result.$": "$"}) at ResultPath $.<stage>, so the
// ASL reads e.g. $.seller.result.next.interval_seconds.
type Stage[T any] struct {
	Result T `json:"result"`
}

// StageInput is the input of a stage Lambda that needs only the operation (check, create,
// cancel, expire).
type StageInput struct {
	Action      Action `json:"action"`
	OperationID string `json:"operation_id"`
	// CampaignID, instead of OperationID, makes the campaign the subject of an approval stage
	// (notify's expire): one approval for every leg.
	CampaignID string    `json:"campaign_id,omitempty"`
	Tenant     string    `json:"tenant"`
	Config     RunConfig `json:"config"`
	// Reason says why the stage runs when one action serves several paths (expire: the
	// approval's reason).
	Reason string `json:"reason,omitempty"`
}

// PollInput is the input of PollSeller: the wait state of the round that just timed out and
// the execution's generation, from which the poll computes the continuation's name.
type PollInput struct {
	Action      Action    `json:"action"`
	OperationID string    `json:"operation_id"`
	Tenant      string    `json:"tenant"`
	Config      RunConfig `json:"config"`
	Generation  int       `json:"generation"`
	Wait        WaitState `json:"wait"`
}

// CallbackInput is the input of a waitForTaskToken stage (RequestApproval, AwaitSeller). The
// token is stored in the ledger by the Lambda and never echoed in any output.
//
// AwaitSeller (park) also receives the last seller result: when it already needs a decision
// (see [SellerOutput.NeedsDecision]) park completes its own token at once with it, so that
// the loop has a single decision point after AwaitSeller and a round costs two state
// transitions (AwaitSeller, PollSeller), not three.
type CallbackInput struct {
	Action      Action `json:"action"`
	OperationID string `json:"operation_id"`
	// CampaignID, instead of OperationID, makes the campaign the subject of RequestApproval:
	// one approval for every leg (notify's request).
	CampaignID string `json:"campaign_id,omitempty"`
	// Legs are the operations a campaign's approval covers: the legs the campaign's release
	// gate would buy, whose total it compared with the policy's threshold.
	Legs      []string      `json:"legs,omitempty"`
	Tenant    string        `json:"tenant"`
	Config    RunConfig     `json:"config"`
	TaskToken string        `json:"task_token"`
	Wait      WaitState     `json:"wait,omitzero"`
	Seller    *SellerOutput `json:"seller,omitempty"`
	Reason    string        `json:"reason,omitempty"`
}

// approvalReason says why RequestApproval runs; RouteApproval reads it afterwards.
type approvalReason string

// The approval reasons.
const (
	// ApprovalForGovernance: policy or governance conditions ask a person before any spend.
	ApprovalForGovernance approvalReason = "governance_needs_approval"
	// ApprovalForSellerInput: the seller answered input-required on a created buy.
	ApprovalForSellerInput approvalReason = "seller_input_required"
)

// ApprovalRequest is what a Pass state puts at $.approval_request before RequestApproval.
type ApprovalRequest struct {
	Reason approvalReason `json:"reason"`
}

// ApprovalOutput is the SendTaskSuccess output of RequestApproval, sent by the approve Lambda
// (a rejection is SendTaskFailure with [ApprovalRejectedError] instead).
type ApprovalOutput struct {
	Decision   string `json:"decision"` // "approved"
	ApprovalID string `json:"approval_id"`
	DecidedBy  string `json:"decided_by,omitempty"`
	// RecheckGovernance is true when the governance approval lapsed while the person decided:
	// CheckGovernance runs again before anything is spent.
	RecheckGovernance bool `json:"recheck_governance"`
}

// ApprovalExpiry is the output of ExpireApproval (notify, action expire).
type ApprovalExpiry struct {
	// Escalated is true when the approval was sent to the next approvers with a new SLA:
	// RequestApproval runs again. False means the approval expired and the buy fails.
	Escalated bool   `json:"escalated"`
	Reason    string `json:"reason,omitempty"`
}

// OutcomeOutput is the output of ReportOutcome, and the part of RecordFailure's output the
// state machine reads (both write it at $.outcome).
type OutcomeOutput struct {
	// CompensationRequired is true when the governance agent's findings require an undo:
	// Compensate cancels the buy.
	CompensationRequired bool   `json:"compensation_required"`
	Reason               string `json:"reason,omitempty"`
	// Status is set by RecordFailure: the operation's status after it. StatusCompleted means
	// the seller completed the buy although a step failed (a crash after the seller committed,
	// with the webhook or a poll recording the completion): the buy was reported completed and
	// the execution ends as completed, not failed.
	Status Status `json:"status,omitempty"`
}

// GovernanceDecision is what CheckGovernance tells the state machine to do next.
type GovernanceDecision string

// The governance decisions a Choice state reads.
const (
	GovernanceProceed       GovernanceDecision = "proceed"        // approved, no person needed
	GovernanceNeedsApproval GovernanceDecision = "needs_approval" // policy or conditions ask for a person
	GovernanceDenied        GovernanceDecision = "denied"         // stop; nothing is spent
	GovernancePending       GovernanceDecision = "pending"        // async review: wait and check again
	// GovernanceAgentUnavailable: the governance agent's circuit breaker is open; nothing was
	// asked and nothing is spent. Wait Unavailable.RetryInSeconds and check again.
	GovernanceAgentUnavailable GovernanceDecision = "agent_unavailable"
)

// AgentUnavailable is a stage's answer when it did not call an agent because the agent's
// circuit breaker is open (internal/breaker): the state machine waits RetryInSeconds and
// runs the stage again. Nothing was sent to the agent.
type AgentUnavailable struct {
	AgentID string `json:"agent_id"`
	// Role is the agent's role for this buy: seller or governance.
	Role string `json:"role"`
	// Since is when the breaker opened (RFC 3339).
	Since string `json:"since"`
	// RetryInSeconds is the wait until the breaker lets a probe through (at least 1).
	RetryInSeconds int `json:"retry_in_seconds"`
}

// GovernanceOutput is the output of the CheckGovernance stage.
type GovernanceOutput struct {
	Decision GovernanceDecision `json:"decision"`
	CheckID  string             `json:"check_id,omitempty"`
	// ExpiresAt is when the governance approval lapses (RFC 3339); a later stage re-checks
	// before spending if it has passed.
	ExpiresAt string    `json:"expires_at,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	Wait      WaitState `json:"wait,omitzero"`
	// Unavailable is set with GovernanceAgentUnavailable.
	Unavailable *AgentUnavailable `json:"unavailable,omitempty"`
}

// SellerOutput is the output of CreateMediaBuy, PollSeller and Compensate, and the
// SendTaskSuccess output that completes AwaitSeller (sent by webhook, reconcile or park
// itself): where the seller task stands. Whoever completes AwaitSeller sends Next as the wait
// state park stored with the token, so the loop can go on from it.
type SellerOutput struct {
	Status Status `json:"status"`
	// Terminal mirrors Status.Terminal() so a Choice can read it.
	Terminal bool `json:"terminal"`
	// Next is the state of the wait loop; Next.IntervalSeconds feeds TimeoutSecondsPath.
	Next WaitState `json:"next"`
	// ContinueAsNew is true when this execution spent its loop budget: the state machine starts
	// NextExecutionName with the same operation and ends.
	ContinueAsNew     bool   `json:"continue_as_new"`
	NextExecutionName string `json:"next_execution_name,omitempty"`
	// NextGeneration is the continuation's generation (this one's plus one), set with
	// ContinueAsNew; the state machine has no arithmetic without intrinsic functions.
	NextGeneration int `json:"next_generation,omitempty"`
	// DeadlineExceeded is true when the overall deadline passed before the seller finished.
	DeadlineExceeded bool   `json:"deadline_exceeded"`
	Reason           string `json:"reason,omitempty"`
	// Unavailable is set when CreateMediaBuy did not reach the seller because its circuit
	// breaker is open, or the seller answered a transient error with retry_after: the state
	// machine waits RetryInSeconds and runs CreateMediaBuy again.
	Unavailable *AgentUnavailable `json:"unavailable,omitempty"`
}

// NeedsDecision reports whether the state machine must act on s rather than wait again: the
// task ended, the seller needs input, the deadline passed or the loop budget is spent.
func (s SellerOutput) NeedsDecision() bool {
	return s.Terminal || s.Status == StatusInputRequired || s.DeadlineExceeded || s.ContinueAsNew
}

// WaitState is the bookkeeping of the webhook-or-poll loop.
type WaitState struct {
	// IntervalSeconds is the next wait before polling (the AwaitSeller timeout).
	IntervalSeconds int `json:"interval_seconds"`
	// Round counts wait-loop rounds in this execution.
	Round int `json:"round"`
	// DeadlineUnix is the overall deadline of the wait, in Unix seconds.
	DeadlineUnix int64 `json:"deadline_unix"`
}

// StartWait returns the first wait state of a seller task started at now: the first safety-net
// round is already a full one (see [RunConfig.PollMaxSeconds] and [RunConfig.SweepNetSeconds];
// sweepUp says whether the sweep's heartbeat is fresh).
func StartWait(cfg RunConfig, now time.Time, sweepUp bool, rnd func() float64) WaitState {
	w := WaitState{DeadlineUnix: now.Add(time.Duration(cfg.DeadlineSeconds) * time.Second).Unix()}
	w.IntervalSeconds = w.interval(cfg, now, sweepUp, rnd)
	return w
}

// Advance returns the wait state after one more unfinished round. The interval is the safety
// net's (NetSeconds), with jitter on its last quarter (0.75x to 1x) so that the buys of one
// seller placed together do not poll it in lockstep, and never past the deadline: a net that
// reaches the deadline waits exactly until it, one round for the whole wait. rnd returns a
// float in [0,1); nil means math/rand/v2.
//
// There is no backoff from a short first interval: the sweep notices a seller's progress
// within a minute, and every safety-net round costs the buy two state transitions (AwaitSeller,
// PollSeller): with the sweep up a 24-hour wait is one round, with it down four to five.
func (w WaitState) Advance(cfg RunConfig, now time.Time, sweepUp bool, rnd func() float64) WaitState {
	out := w
	out.IntervalSeconds = w.interval(cfg, now, sweepUp, rnd)
	out.Round++
	return out
}

// NetSeconds is the safety net's full interval: SweepNetSeconds while the sweep is up (when
// set), else PollMaxSeconds.
func (c RunConfig) NetSeconds(sweepUp bool) int {
	if sweepUp && c.SweepNetSeconds > 0 {
		return c.SweepNetSeconds
	}
	return c.PollMaxSeconds
}

func (w WaitState) interval(cfg RunConfig, now time.Time, sweepUp bool, rnd func() float64) int {
	if rnd == nil {
		rnd = rand.Float64
	}
	full := cfg.NetSeconds(sweepUp)
	left := w.DeadlineUnix - now.Unix()
	if left > 0 && int64(full) >= left {
		// The deadlines of buys placed together already spread their polls as much as
		// their placements do; jitter here would only add a round.
		return int(left)
	}
	next := full - int(rnd()*float64(full/4+1))
	return max(next, 1)
}

// Expired reports whether the overall deadline has passed at now.
func (w WaitState) Expired(now time.Time) bool {
	return w.DeadlineUnix > 0 && now.Unix() >= w.DeadlineUnix
}

// ExecutionName returns the deterministic execution name for an operation's generation: the
// operation id for the first execution, the id with a "-g<N>" suffix for each continuation.
// Step Functions names are at most 80 characters; operation ids are far shorter.
func ExecutionName(operationID string, generation int) string {
	if generation == 0 {
		return operationID
	}
	return fmt.Sprintf("%s-g%d", operationID, generation)
}

// OutcomeInput is the input of ReportOutcome and of the failure recorder: the operation and,
// on a failure path, the Step Functions error that ended it (Error/Cause as a Catch writes them,
// or one of the Failure* names below when a state decided to stop).
type OutcomeInput struct {
	Action      Action     `json:"action"`
	OperationID string     `json:"operation_id"`
	Tenant      string     `json:"tenant"`
	Failure     *StepError `json:"failure,omitempty"`
}

// StepError is the {Error, Cause} object a Catch puts at its ResultPath.
type StepError struct {
	Error string `json:"Error"`
	Cause string `json:"Cause"`
}

// The Error names of failures that the state machine itself decides (a Pass state writes them
// at $.failure); failures raised by a Lambda carry one of [ErrorNames] or a States.* name.
const (
	FailureGovernanceDenied     = "GovernanceDenied"
	FailureSellerDidNotComplete = "SellerDidNotComplete"
	failureUnexpectedDecision   = "UnexpectedGovernanceDecision"

	// A change to a placed buy ends on these without touching the buy.
	FailureChangeDenied          = "ChangeDeniedByGovernance"
	FailureChangeApprovalExpired = "ChangeApprovalExpired"
	FailureChangeDeadline        = "ChangeDeadlinePassed"
	failureChangeInputRequired   = "ChangeInputRequired"
	failureChangeWaitTooLong     = "ChangeWaitTooLong"

	// FailureCampaignCalledOff ends an all_or_nothing campaign's leg before it is bought,
	// because another leg was denied or could not be checked.
	FailureCampaignCalledOff = "CampaignCalledOff"
	// FailureCampaignFailed ends a campaign's leg before it is bought, because a step of the
	// Campaign execution itself failed after its retries.
	FailureCampaignFailed = "CampaignFailed"
)

// FailureNames lists the names above.
var FailureNames = []string{FailureGovernanceDenied, FailureSellerDidNotComplete, failureUnexpectedDecision,
	FailureChangeDenied, FailureChangeApprovalExpired, FailureChangeDeadline, failureChangeInputRequired, failureChangeWaitTooLong,
	FailureCampaignCalledOff, FailureCampaignFailed}
