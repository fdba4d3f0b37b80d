package statemachine

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/benchtest"
	"github.com/buyflow/buyflow/internal/workflow"
)

// The cost half of docs/ARCHITECTURE.md "Budgets": for a buy completed by webhook after 24 h, one
// completed after 24 h with no webhooks (the sweep wakes it, or, with the sweep down, the
// per-buy safety net polls) and, for comparison, a naive fixed 60-second polling loop, the
// state transitions and the execution history events counted from the executed paths (the
// walker in transitions_test.go), and the cost per 1,000 buys at list price, the
// reconciliation sweep's share included (sweepShare). Budgets are measured, not asserted: an
// excess prints an OVER BUDGET line. The tables print through `make bench`:
//
//	go test -run '^$' -bench 'Transition|Cost|Sweep' ./statemachine/

// Call kinds the simulated stages record (sim.call) besides the workflow.Action names.
const (
	callStartExecution = "startExecution"   // ContinueAsNewExecution (states:startExecution)
	callParkDecided    = "park(decided)"    // AwaitSeller with a result that already needs a decision
	callPollCompleted  = "poll(completed)"  // PollSeller that finds the task completed
	callPollDeadline   = "poll(deadline)"   // PollSeller past the deadline
	callSubmit         = "api:submit"       // POST /media-buys (API Lambda), outside the workflow
	callChangeRequest  = "api:change"       // PATCH /media-buys/{id} or POST .../cancel, outside the workflow
	callRead           = "api:read"         // GET /media-buys/{id} (API Lambda), outside the workflow
	callWebhook        = "webhook"          // the seller's completion webhook (webhook Lambda)
	callSweepWake      = "sweep(completed)" // the sweep records a finished task and wakes the buy
	// callCreateRefused is a CreateMediaBuy the seller's open circuit breaker refused.
	callCreateRefused = "create(breaker open)"
)

// readsPerBuy is the number of status reads a buyer makes per buy (assumption: the submit
// response, then two GETs).
const readsPerBuy = 2

// Step Functions Standard history events per state entered, by state type, as the execution
// history records them (HistoryEvent.type, Step Functions API reference,
// https://docs.aws.amazon.com/step-functions/latest/apireference/API_HistoryEvent.html):
//
//	state type                              events                                                   n
//	Task lambda:invoke (request-response)   TaskStateEntered, TaskScheduled, TaskStarted,            5
//	                                        TaskSucceeded | TaskFailed | TaskTimedOut, TaskStateExited
//	Task states:startExecution              as lambda:invoke                                         5
//	Task *.waitForTaskToken (callback)      TaskStateEntered, TaskScheduled, TaskStarted,            6
//	                                        TaskSubmitted, TaskSucceeded | TaskFailed | TaskTimedOut,
//	                                        TaskStateExited
//	Choice                                  ChoiceStateEntered, ChoiceStateExited                    2
//	Pass                                    PassStateEntered, PassStateExited                        2
//	Wait                                    WaitStateEntered, WaitStateExited                        2
//	Succeed                                 SucceedStateEntered, SucceedStateExited                  2
//	Fail                                    FailStateEntered                                         1
//	per execution                           ExecutionStarted, ExecutionSucceeded | ExecutionFailed   2
//
// A Task whose error a Catch handles is counted with its TaskStateExited (an upper bound).
// Retries (a TaskFailed, TaskScheduled, TaskStarted per attempt) do not happen in the
// simulation. The hard cap is 25,000 events per execution.
func stateEvents(st state) int {
	switch st.Type {
	case "Task":
		if strings.HasSuffix(st.Resource, waitForToken) {
			return 6
		}
		return 5
	case "Fail":
		return 1
	}
	return 2 // Choice, Pass, Wait, Succeed
}

// historyEvents counts the history events of one execution that entered these states.
func historyEvents(m machine, entered []string) int {
	n := 2 // ExecutionStarted, ExecutionSucceeded/Failed
	for _, name := range entered {
		n += stateEvents(m.States[name])
	}
	return n
}

// List prices (us-east-1, 2026), free tiers ignored.
const (
	usdPerTransition = 0.025 / 1000 // Step Functions Standard, per state transition
	usdPerRequest    = 0.20 / 1e6   // Lambda, per request
	usdPerGBSecond   = 0.0000133334 // Lambda arm64, per GB-s
	lambdaGB         = 0.25         // 256 MB every function
	usdPerWRU        = 0.625 / 1e6  // DynamoDB on-demand, per write request unit
	usdPerRRU        = 0.125 / 1e6  // DynamoDB on-demand, per read request unit
	usdPerAPIRequest = 1.00 / 1e6   // API Gateway HTTP API, per request (≤ 512 KB)
	buysPerBatch     = 1000         // the budget's unit
	budgetUSD        = 1.0          // ≤ $1 per 1,000 buys, all four services
	consistentRead   = 1.0          // RRU of a consistent GetItem of an item ≤ 4 KB
	eventualRead     = 0.5          // RRU of an eventually consistent GetItem of an item ≤ 4 KB
	// heartbeatRead is the sweep's heartbeat, read by the stages that choose the next
	// safety-net interval (stage.SweepUp).
	heartbeatRead = eventualRead
	opWrite       = 2.0 // WRU of one write of the operation item (≤ 2 KB)
	smallWrite    = 1.0 // WRU of an event, intent, receipt, nonce, claim, lock, approval (≤ 1 KB)
	intentWrite   = 2.0 // PutIntent of frozen request bytes (≤ 2 KB)
	// The operation item is in both GSIs (projection ALL; gsi1 only while pending): a write that
	// keeps the index keys also writes both index copies; a status move changes gsi1's keys
	// (delete + put there) and updates gsi2. Transactions bill 2x on the table, not on indexes.
	opIndexCopies   = 2 * opWrite                            // gsi1 + gsi2 copy updates
	opMoveIndexes   = 2*opWrite + opWrite                    // gsi1 delete + put, gsi2 update (upper bound: a terminal move only deletes from gsi1)
	transition      = 2*(opWrite+smallWrite) + opMoveIndexes // ledger Transition: TransactWriteItems[Update op, Put event]
	createOperation = 2*(opWrite+2*smallWrite) + 2*opWrite   // ledger CreateOperation: [Put op, Put event, Put index] + gsi1, gsi2 puts
	setTaskToken    = opWrite + opIndexCopies                // UpdateItem SET task_token
	clearTaskToken  = opWrite + opWrite                      // UpdateItem REMOVE task_token once terminal (gsi2 only)
	durationDefault = 100 * time.Millisecond
	// breakerRead is the circuit breaker's consistent read before each AdCP call (internal/breaker;
	// a closed breaker with no failures writes nothing).
	breakerRead = consistentRead
)

// unitCost is what one invocation of a kind costs besides its state transitions: Lambda
// duration (0: not a Lambda) and DynamoDB request units. The counts follow what the code does
// (internal/governance, internal/create, internal/poll, internal/submit, internal/webhook), with the item sizes above; they are
// estimates, not measurements.
type unitCost struct {
	lambda   time.Duration
	rru, wru float64
	what     string
}

var costOf = map[string]unitCost{
	callSubmit: {durationDefault, 2 * consistentRead, smallWrite + smallWrite + createOperation + smallWrite,
		"submit.Submit: the seller and governance agent read from the registry, Claim put, AcquireLock update, CreateOperation txn, CompleteClaim update"},
	string(workflow.ActionCheck): {time.Second, 2*consistentRead + breakerRead, transition + smallWrite + intentWrite + smallWrite + transition,
		"governance.Check: load, move checking (txn), breaker read, check event, check intent, push-token get+put, settle move (txn); 1 s governance call"},
	string(workflow.ActionCreate): {2 * time.Second, 4*consistentRead + 2*breakerRead + heartbeatRead, transition + smallWrite + intentWrite + transition,
		"create.CreateMediaBuy: load, move creating (txn), push-token get, intent get+put, checked-payload get, breaker reads (capabilities, create), seller_call event, record move (txn), sweep heartbeat get; 2 s seller call"},
	callCreateRefused: {durationDefault, 4*consistentRead + breakerRead, transition + 2*intentWrite + smallWrite,
		"create.CreateMediaBuy, the seller's breaker open: load, move creating (txn), push-token get, intent get+put, checked-payload get, breaker read, intent released unsent, agent_unavailable event; no seller call (the next create claims the intent: an update for the put)"},
	string(workflow.ActionPark): {durationDefault, 0, setTaskToken,
		"poll.Park: SetTaskToken update (ALL_NEW)"},
	callParkDecided: {durationDefault, 0, 0,
		"poll.Park with a decided result: SendTaskSuccess only"},
	string(workflow.ActionPoll): {300 * time.Millisecond, consistentRead + breakerRead + heartbeatRead, smallWrite,
		"poll.PollSeller, no news: load, breaker read, get_task_status (300 ms), poll event, sweep heartbeat get"},
	callPollCompleted: {300 * time.Millisecond, consistentRead + breakerRead, transition + clearTaskToken,
		"poll.PollSeller, completed: load, breaker read, get_task_status, RecordTaskStatus move (txn), ClearTaskToken"},
	callPollDeadline: {300 * time.Millisecond, consistentRead + breakerRead, smallWrite,
		"poll.PollSeller past the deadline: load, breaker read, get_task_status, poll event"},
	callWebhook: {durationDefault, consistentRead, smallWrite + smallWrite + transition + smallWrite,
		"webhook: the owner from the URL's route, op read ∥ nonce put ∥ receipt put, RecordTaskStatus move taking the token (txn), SendTaskSuccess, receipt done"},
	string(workflow.ActionReport): {500 * time.Millisecond, consistentRead + breakerRead, smallWrite,
		"governance.Report: load, breaker read, report_plan_outcome (500 ms), outcome event"},
	string(workflow.ActionFail): {500 * time.Millisecond, consistentRead + breakerRead, transition,
		"governance.Fail: load, move failed (txn), breaker read, report failed"},
	string(workflow.ActionCancel): {2 * time.Second, consistentRead + breakerRead, smallWrite + transition,
		"create.Cancel: load, breaker read, update_media_buy canceled (2 s), cancel event, move canceled (txn)"},
	string(workflow.ActionExpire): {durationDefault, consistentRead, smallWrite,
		"notify.Expire: load, approval update"},
	string(workflow.ActionRequest): {500 * time.Millisecond, consistentRead, smallWrite + setTaskToken,
		"notify.Request: load, approval put, SetTaskToken; Slack (500 ms)"},
	callChangeRequest: {durationDefault, 3 * consistentRead, 2*(smallWrite+smallWrite) + createOperation,
		"modify.Requests.Submit: change and buy GetOperation, GetBuyState, BeginChange txn (buy state, event), CreateOperation txn"},
	string(workflow.ActionCheckChange): {1300 * time.Millisecond, 4*consistentRead + 2*breakerRead, intentWrite + 2*transition + 2*smallWrite,
		"modify.Check: change + buy + buy state + plan reads, breaker reads (get_media_buys, check), get_media_buys (300 ms), plan put, move checking and creating (txns), 2 events; 1 s governance"},
	string(workflow.ActionUpdate): {2 * time.Second, 3*consistentRead + 2*breakerRead, transition + smallWrite + intentWrite + 2*smallWrite,
		"modify.Update: change + buy + plan reads, breaker reads (capabilities, update), push-token and intent puts, 2 events (change, buy), record move (txn); 2 s seller call"},
	string(workflow.ActionApply): {800 * time.Millisecond, 3*consistentRead + 2*breakerRead, 2*(smallWrite+smallWrite) + smallWrite + intentWrite + 2*smallWrite,
		"modify.Apply: change + buy + plan reads, breaker reads, get_media_buys (300 ms), ApplyChange txn (buy state, event), change event, report intent, report_plan_outcome (500 ms), 2 events"},
	callStartExecution: {0, 0, 0, "states:startExecution: no Lambda, no ledger write"},
	callRead:           {durationDefault, consistentRead, 0, "GET /media-buys/{id}: GetOperation"},
	callSweepWake: {0, 0, transition + smallWrite,
		"reconcile apply: RecordTaskStatus move taking the token (txn), SendTaskSuccess, wake event (its Lambda time is the sweep's)"},
}

// buyCost is one buy's bill, in dollars, with the counts it comes from.
type buyCost struct {
	transitions, events, invocations, gbSeconds, rru, wru, apiRequests float64
	sfn, lambda, dynamo, api, sweep                                    float64
}

func (c buyCost) total() float64 { return c.sfn + c.lambda + c.dynamo + c.api + c.sweep }

// costOfBuy prices one simulated buy: its workflow calls plus the submit, the status reads
// and the webhooks, all through API Gateway and Lambda.
func costOfBuy(t testing.TB, r measure) buyCost {
	t.Helper()
	request := callSubmit
	if r.change {
		request = callChangeRequest
	}
	calls := map[string]int{request: 1, callRead: readsPerBuy, callWebhook: r.webhooks, callSweepWake: r.sweepWakes}
	for k, n := range r.calls {
		calls[k] += n
	}
	c := buyCost{transitions: float64(r.transitions), events: float64(r.events), apiRequests: float64(1 + readsPerBuy + r.webhooks)}
	for k, n := range calls {
		u, ok := costOf[k]
		if !ok {
			t.Fatalf("no cost assumption for %q calls", k)
		}
		if u.lambda > 0 {
			c.invocations += float64(n)
			c.gbSeconds += float64(n) * u.lambda.Seconds() * lambdaGB
		}
		c.rru += float64(n) * u.rru
		c.wru += float64(n) * u.wru
	}
	c.sfn = c.transitions * usdPerTransition
	c.lambda = c.invocations*usdPerRequest + c.gbSeconds*usdPerGBSecond
	c.dynamo = c.rru*usdPerRRU + c.wru*usdPerWRU
	c.api = c.apiRequests * usdPerAPIRequest
	return c
}

func (c buyCost) add(o buyCost) buyCost {
	return buyCost{c.transitions + o.transitions, c.events + o.events, c.invocations + o.invocations, c.gbSeconds + o.gbSeconds,
		c.rru + o.rru, c.wru + o.wru, c.apiRequests + o.apiRequests, c.sfn + o.sfn, c.lambda + o.lambda, c.dynamo + o.dynamo, c.api + o.api,
		c.sweep + o.sweep}
}

func (c buyCost) scale(f float64) buyCost {
	return buyCost{c.transitions * f, c.events * f, c.invocations * f, c.gbSeconds * f, c.rru * f, c.wru * f, c.apiRequests * f,
		c.sfn * f, c.lambda * f, c.dynamo * f, c.api * f, c.sweep * f}
}

// fixedLoopASL is the comparison: the same prelude and ending, and a fixed 60-second polling
// loop (Wait 60 s → PollSeller → Choice) instead of the webhook-or-backoff wait.
const fixedLoopASL = `{
  "StartAt": "CheckGovernance",
  "States": {
    "CheckGovernance": {"Type": "Task", "Resource": "arn:aws:states:::lambda:invoke",
      "Parameters": {"FunctionName": "gov", "Payload": {"action": "check", "operation_id.$": "$.operation_id", "tenant.$": "$.tenant", "config.$": "$.config"}},
      "ResultSelector": {"result.$": "$.Payload"}, "ResultPath": "$.governance", "Next": "GovernanceDecision"},
    "GovernanceDecision": {"Type": "Choice",
      "Choices": [{"Variable": "$.governance.result.decision", "StringEquals": "proceed", "Next": "CreateMediaBuy"}],
      "Default": "Stopped"},
    "CreateMediaBuy": {"Type": "Task", "Resource": "arn:aws:states:::lambda:invoke",
      "Parameters": {"FunctionName": "create", "Payload": {"action": "create", "operation_id.$": "$.operation_id", "tenant.$": "$.tenant", "config.$": "$.config"}},
      "ResultSelector": {"result.$": "$.Payload"}, "ResultPath": "$.seller", "Next": "WaitOneMinute"},
    "WaitOneMinute": {"Type": "Wait", "Seconds": 60, "Next": "PollSeller"},
    "PollSeller": {"Type": "Task", "Resource": "arn:aws:states:::lambda:invoke",
      "Parameters": {"FunctionName": "poll", "Payload": {"action": "poll", "operation_id.$": "$.operation_id", "tenant.$": "$.tenant", "config.$": "$.config", "generation.$": "$.generation", "wait.$": "$.seller.result.next"}},
      "ResultSelector": {"result.$": "$.Payload"}, "ResultPath": "$.seller", "Next": "SellerDone"},
    "SellerDone": {"Type": "Choice",
      "Choices": [{"Variable": "$.seller.result.terminal", "BooleanEquals": true, "Next": "ReportOutcome"}],
      "Default": "WaitOneMinute"},
    "ReportOutcome": {"Type": "Task", "Resource": "arn:aws:states:::lambda:invoke",
      "Parameters": {"FunctionName": "gov", "Payload": {"action": "report", "operation_id.$": "$.operation_id", "tenant.$": "$.tenant"}},
      "ResultSelector": {"result.$": "$.Payload"}, "ResultPath": "$.outcome", "Next": "MediaBuyCompleted"},
    "MediaBuyCompleted": {"Type": "Succeed"},
    "Stopped": {"Type": "Fail", "Error": "Stopped"}
  }
}`

// printTable writes a benchmark's table to stdout: b.Log keeps only a benchmark's first ten
// lines.
func printTable(lines []string) {
	for _, line := range lines {
		fmt.Println(line)
	}
	fmt.Println()
}

func loadASL(t testing.TB, text string) machine {
	t.Helper()
	var m machine
	if err := json.Unmarshal([]byte(text), &m); err != nil {
		t.Fatalf("ASL does not parse: %v", err)
	}
	var raw struct {
		States map[string]map[string]any `json:"States"`
	}
	if err := json.Unmarshal([]byte(text), &raw); err != nil {
		t.Fatalf("ASL does not parse: %v", err)
	}
	m.raw = raw.States
	return m
}

// costCase is one row of the table.
type costCase struct {
	name  string
	fixed bool // the fixed 60-second loop (deterministic: one run)
	wake  waker
	after time.Duration
	// sweep is the fleet whose sweep the buy shares (nil: the sweep is down or not counted).
	sweep  *sweepFleet
	budget int // transition budget, 0 for none
	// change prices one change to a placed buy (PATCH, its own execution) instead of a buy.
	change bool
	// sellerDown is how long the seller's circuit breaker refuses the buy's create (0: never).
	sellerDown time.Duration
}

// The fleets of the sweep table: 1,000 and 10,000 pending buys over 10 sellers, with and
// without list_tasks.
var (
	fleet1kListed   = &sweepFleet{pending: 1000, sellers: 10, listing: true}
	fleet1kUnlisted = &sweepFleet{pending: 1000, sellers: 10, listing: false}
	sweepFleets     = []*sweepFleet{fleet1kListed, fleet1kUnlisted,
		{pending: 10000, sellers: 10, listing: true}, {pending: 10000, sellers: 10, listing: false},
		{pending: 100000, sellers: 500, listing: true}, {pending: 100000, sellers: 500, listing: false},
		{pending: 100000, sellers: 500, listing: true, fanOut: true}, {pending: 100000, sellers: 500, listing: false, fanOut: true}}
)

var costCases = []costCase{
	{"webhook after 24 h", false, wakeWebhook, simulatedDay, fleet1kUnlisted, budgetWebhook, false, 0},
	{"no webhooks, 24 h, list_tasks", false, wakeSweep, simulatedDay, fleet1kListed, budgetNoWebhook, false, 0},
	{"no webhooks, 24 h, no list_tasks", false, wakeSweep, simulatedDay, fleet1kUnlisted, budgetNoWebhook, false, 0},
	{"no webhooks, 24 h, sweep down", false, wakeNone, simulatedDay, nil, budgetSweepDown, false, 0},
	{"fixed 60 s polling loop, 24 h", true, wakeNone, simulatedDay, nil, 0, false, 0},
	{"(info) webhook after 10 min", false, wakeWebhook, 10 * time.Minute, fleet1kUnlisted, 0, false, 0},
	{"change, webhook after 1 h", false, wakeWebhook, time.Hour, fleet1kUnlisted, budgetWebhook, true, 0},
	{"change, no webhooks, sweep 1 h", false, wakeSweep, time.Hour, fleet1kUnlisted, budgetNoWebhook, true, 0},
	// The cool-down adds its own three states (WaitForSeller, CreateMediaBuy, SellerAvailable).
	{"webhook 24 h, 1 breaker cool-down", false, wakeWebhook, simulatedDay, fleet1kUnlisted, budgetWebhook + 3, false, breakerCooldown},
}

// breakerCooldown is the default cool-down of an agent's circuit breaker (internal/breaker):
// the row with the seller's breaker open waits one before its create goes through.
const breakerCooldown = time.Minute

// runCase simulates one buy of c with the seeded random source r.
func runCase(t testing.TB, c costCase, asl, fixed machine, r func() float64) measure {
	t.Helper()
	if c.change {
		return simulateChange(t, asl, c.wake, c.after, r)
	}
	if c.fixed {
		cfg := workflow.DefaultRunConfig()
		cfg.LoopBudget = 1 << 30 // the naive loop never continues as new (1,440 rounds ≈ 13,000 events)
		return simulateWith(t, fixed, cfg, wakeNone, c.after, r)
	}
	if c.sellerDown > 0 {
		return simulateRun(t, asl, workflow.DefaultRunConfig(), false, c.wake, c.after, r, func(s *sim) { s.sellerDownUntil = s.now.Add(c.sellerDown) })
	}
	return simulate(t, asl, c.wake, c.after, r)
}

// costTable prices runs seeded buys of every case; it returns the printed table and the OVER
// BUDGET lines.
func costTable(tb testing.TB, runs int) (lines, over []string) {
	asl, fixed := load(tb), loadASL(tb, fixedLoopASL)
	lines = append(lines, fmt.Sprintf("per 1,000 buys at list price, mean of %d seeded runs (fixed loop: 1 run, deterministic); transitions p50/mean per buy; sweep: the buy's share of a fleet of 1,000 pending buys over 10 sellers", runs),
		fmt.Sprintf("%-34s %11s %6s %7s %8s %5s %6s %6s %6s %8s %8s %8s %8s %8s %8s",
			"case", "transitions", "budget", "events", "max/exec", "execs", "λ inv", "RRU", "WRU", "SFN $", "Lambda $", "Dynamo $", "APIGW $", "sweep $", "total $"))
	for _, c := range costCases {
		n := runs
		if c.fixed {
			n = 1
		}
		var sum buyCost
		var counts []int
		execs, maxEvents := 0, 0
		for seed := range uint64(n) {
			res := runCase(tb, c, asl, fixed, rand.New(rand.NewPCG(seed, 42)).Float64)
			if want := map[bool]string{false: "MediaBuyCompleted", true: "ChangeApplied"}[c.change]; res.end != want {
				tb.Fatalf("%s: ended in %s, want %s", c.name, res.end, want)
			}
			counts = append(counts, res.transitions)
			execs += res.executions
			maxEvents = max(maxEvents, res.maxEvents)
			bc := costOfBuy(tb, res)
			if c.sweep != nil {
				bc.sweep = c.sweep.cost().usdPerBuyDay * c.after.Hours() / 24
			}
			sum = sum.add(bc)
		}
		slices.Sort(counts)
		mean := sum.scale(1 / float64(n))
		per := mean.scale(buysPerBatch)
		budget := "-"
		if c.budget > 0 {
			budget = fmt.Sprintf("≤ %d", c.budget)
		}
		lines = append(lines, fmt.Sprintf("%-34s %5d/%5.0f %6s %7.0f %8d %5.2f %6.0f %6.0f %6.0f %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f",
			c.name, benchtest.Percentile(counts, 50), mean.transitions, budget, mean.events, maxEvents, float64(execs)/float64(n),
			mean.invocations, mean.rru, mean.wru, per.sfn, per.lambda, per.dynamo, per.api, per.sweep, per.total()))
		if p50 := benchtest.Percentile(counts, 50); c.budget > 0 && p50 > c.budget {
			over = append(over, fmt.Sprintf("OVER BUDGET: %s: median %d transitions > %d", c.name, p50, c.budget))
		}
		if per.total() > budgetUSD {
			over = append(over, fmt.Sprintf("OVER BUDGET: %s: $%.3f per 1,000 buys > $%.2f (Step Functions alone $%.3f)", c.name, per.total(), budgetUSD, per.sfn))
		}
		if maxEvents > 25_000 {
			tb.Errorf("%s: %d history events in one execution, over the 25,000 cap", c.name, maxEvents)
		}
	}
	lines = append(lines, campaignRow(tb, max(runs/campaignLegs, 1), false), campaignRow(tb, max(runs/campaignLegs, 1), true),
		fmt.Sprintf("  (the campaign rows are per 1,000 campaigns of %d legs: each leg a buy completed by webhook after 24 h, plus the Campaign execution's own states (every leg's check, the release, the one approval in the second row), its sync_plans and settle, and the campaign's submit and %d reads; events: the legs' executions only)", campaignLegs, readsPerBuy))
	lines = append(lines, "change rows: per 1,000 changes to placed buys (PATCH, its own execution, update_media_buy answered async)",
		fmt.Sprintf("assumptions: 256 MB arm64 Lambdas, %d status reads per buy, no retries, free tiers ignored; per invocation:", readsPerBuy))
	kinds := make([]string, 0, len(costOf)+len(campaignCostOf))
	for k := range costOf {
		kinds = append(kinds, k)
	}
	for k := range campaignCostOf {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		u, ok := costOf[k]
		if !ok {
			u = campaignCostOf[k]
		}
		lines = append(lines, fmt.Sprintf("  %-16s λ %5s  RRU %3.0f  WRU %3.0f  %s", k, u.lambda, u.rru, u.wru, u.what))
	}
	return lines, over
}

func TestCostPer1000Buys(t *testing.T) {
	// The fixed loop spends 3 states and 9 events per minute (Wait 2, PollSeller 5, Choice 2)
	// after a prelude and ending of 5 states and 21 events (the execution's 2, CheckGovernance,
	// CreateMediaBuy and ReportOutcome 5 each, GovernanceDecision and MediaBuyCompleted 2 each).
	fixed := loadASL(t, fixedLoopASL)
	cfg := workflow.DefaultRunConfig()
	cfg.LoopBudget = 1 << 30
	res := simulateWith(t, fixed, cfg, wakeNone, time.Hour, rand.New(rand.NewPCG(3, 3)).Float64)
	if res.polls != 60 || res.transitions != 5+3*res.polls || res.events != 21+9*res.polls {
		t.Errorf("fixed loop, 1 h: %d polls, %d transitions, %d events; want 60, %d, %d", res.polls, res.transitions, res.events, 5+3*60, 21+9*60)
	}
	// Every case prices and ends (the table itself prints through make bench).
	_, over := costTable(t, 5)
	for _, line := range over {
		t.Log(line)
	}
}

// BenchmarkCostTable prints the cost table of docs/ARCHITECTURE.md's budgets and the sweep's table (`make
// bench`).
func BenchmarkCostTable(b *testing.B) {
	lines, over := costTable(b, 60)
	lines = append(lines, "")
	lines = append(lines, sweepTable()...)
	printTable(append(lines, over...))
	for b.Loop() {
		_ = fleet1kUnlisted.cost()
	}
}

// BenchmarkCost reports each case's mean as metrics.
func BenchmarkCost(b *testing.B) {
	asl, fixed := load(b), loadASL(b, fixedLoopASL)
	for _, c := range costCases {
		b.Run(strings.NewReplacer(" ", "_", ",", "", "(", "", ")", "").Replace(c.name), func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			var sum buyCost
			for b.Loop() {
				bc := costOfBuy(b, runCase(b, c, asl, fixed, r.Float64))
				if c.sweep != nil {
					bc.sweep = c.sweep.cost().usdPerBuyDay * c.after.Hours() / 24
				}
				sum = sum.add(bc)
			}
			mean := sum.scale(1 / float64(b.N))
			b.ReportMetric(mean.transitions, "transitions/op")
			b.ReportMetric(mean.events, "events/op")
			b.ReportMetric(mean.total()*buysPerBatch, "usd_per_1000/op")
		})
	}
}

// A buy whose seller's breaker is open when it is placed waits one cool-down (Wait, no Lambda)
// and creates again: three more states than the same buy at a closed breaker, one refused
// create, no error and no retry.
func TestSellerBreakerOpenCostsOneWaitLoop(t *testing.T) {
	m := load(t)
	closed := simulate(t, m, wakeWebhook, simulatedDay, rand.New(rand.NewPCG(9, 9)).Float64)
	open := simulateRun(t, m, workflow.DefaultRunConfig(), false, wakeWebhook, simulatedDay, rand.New(rand.NewPCG(9, 9)).Float64,
		func(s *sim) { s.sellerDownUntil = s.now.Add(breakerCooldown) })
	if open.end != "MediaBuyCompleted" || open.calls[callCreateRefused] != 1 || open.calls[string(workflow.ActionCreate)] != 1 {
		t.Fatalf("breaker open: ended %s, calls %v", open.end, open.calls)
	}
	if open.transitions != closed.transitions+3 {
		t.Fatalf("breaker open: %d transitions, want %d + 3 (CreateMediaBuy, SellerAvailable, WaitForSeller)", open.transitions, closed.transitions)
	}
}
