package statemachine

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/workflow"
)

// statusMoves is how many status changes the ledger records per call of each kind (what the
// code does: a Transition or a CreateOperation), each one status event on the bus.
var statusMoves = map[string]int{
	callSubmit:                         1, // CreateOperation: → requested
	string(workflow.ActionCheck):       2, // → checking_governance, then the decision's move
	string(workflow.ActionCreate):      2, // → creating, → submitted (or the seller's answer)
	callCreateRefused:                  1, // → creating, then the breaker refuses the call
	string(workflow.ActionPark):        0,
	callParkDecided:                    0,
	string(workflow.ActionPoll):        0,
	callPollCompleted:                  1,
	callPollDeadline:                   0,
	callWebhook:                        1, // the seller's update moves the buy
	string(workflow.ActionReport):      0,
	string(workflow.ActionFail):        1,
	string(workflow.ActionCancel):      1,
	string(workflow.ActionExpire):      0,
	string(workflow.ActionRequest):     1, // → awaiting_approval
	callChangeRequest:                  1, // the change's CreateOperation
	string(workflow.ActionCheckChange): 2,
	string(workflow.ActionUpdate):      1,
	string(workflow.ActionApply):       1,
	callStartExecution:                 0,
	callRead:                           0,
	callSweepWake:                      1,
}

// The status events' prices and the functions' assumed work.
const (
	usdPerEvent      = 1.00 / 1e6 // EventBridge PutEvents, per custom event (≤ 64 KB)
	eventLambdaGB    = 0.125      // publish and inform: 128 MB
	publishDuration  = 30 * time.Millisecond
	informDuration   = 50 * time.Millisecond  // the notifier's reads when nothing is told
	informSlack      = 300 * time.Millisecond // a message posted
	informToldPerBuy = 2                      // a buy completed without approval: placed, or failed
	informReadsRRU   = 2 * consistentRead     // GetOperation and (approval kinds) a timeline page
	informChangeRRU  = consistentRead         // a change's event also reads its buy (the PO number)
	informReceiptWRU = smallWrite
)

// statusEventCost prices the status events of one buy of measure r: the stream's reads by
// Lambda are free; publish runs once per event (a buy's events are seconds to hours apart, so
// each is its own batch at a 1 s batching window: the worst case) and puts it; with notify,
// inform runs once per event (the rule matches every event of such a buy) and posts a few.
func statusEventCost(t testing.TB, r measure) (events, publishUSD, informUSD float64) {
	t.Helper()
	request := callSubmit
	if r.change {
		request = callChangeRequest
	}
	calls := map[string]int{request: 1, callWebhook: r.webhooks, callSweepWake: r.sweepWakes}
	for k, n := range r.calls {
		calls[k] += n
	}
	for k, n := range calls {
		m, ok := statusMoves[k]
		if !ok {
			t.Fatalf("no status-move assumption for %q calls", k)
		}
		events += float64(n * m)
	}
	publishUSD = events*usdPerEvent + events*(usdPerRequest+publishDuration.Seconds()*eventLambdaGB*usdPerGBSecond)
	reads := informReadsRRU
	if r.change {
		reads += informChangeRRU
	}
	informUSD = events*(usdPerRequest+informDuration.Seconds()*eventLambdaGB*usdPerGBSecond+reads*usdPerRRU) +
		informToldPerBuy*(informSlack.Seconds()*eventLambdaGB*usdPerGBSecond+informReceiptWRU*usdPerWRU)
	return events, publishUSD, informUSD
}

// statusEventTable prints, per case, the status events of a buy and what publishing them (and
// telling a requester who asked) adds per 1,000 buys.
func statusEventTable(tb testing.TB, runs int) []string {
	asl, fixed := load(tb), loadASL(tb, fixedLoopASL)
	lines := []string{
		"status events, per 1,000 buys at list price (publish: PutEvents + one 128 MB invocation per event; inform: only buys with notify.slack)",
		fmt.Sprintf("%-34s %10s %10s %10s", "case", "events/buy", "publish $", "+inform $"),
	}
	for _, c := range costCases {
		if c.fixed {
			continue
		}
		var ev, pub, inf float64
		for seed := range uint64(runs) {
			e, p, i := statusEventCost(tb, runCase(tb, c, asl, fixed, rand.New(rand.NewPCG(seed, 42)).Float64))
			ev, pub, inf = ev+e, pub+p, inf+i
		}
		n := float64(runs)
		lines = append(lines, fmt.Sprintf("%-34s %10.1f %10.4f %10.4f", c.name, ev/n, pub/n*buysPerBatch, inf/n*buysPerBatch))
	}
	return lines
}

// Every kind of call has a status-move assumption, and a buy publishes its creation, its
// checks, its placement and its end.
func TestStatusEventCost(t *testing.T) {
	for k := range costOf {
		if _, ok := statusMoves[k]; !ok {
			t.Errorf("no status-move assumption for %q", k)
		}
	}
	asl, fixed := load(t), loadASL(t, fixedLoopASL)
	ev, pub, _ := statusEventCost(t, runCase(t, costCases[0], asl, fixed, rand.New(rand.NewPCG(1, 42)).Float64))
	if ev < 6 || pub*buysPerBatch > 0.05 {
		t.Errorf("a buy completed by webhook: %.0f status events, $%.4f per 1,000 buys to publish", ev, pub*buysPerBatch)
	}
}

func BenchmarkStatusEventCost(b *testing.B) {
	printTable(statusEventTable(b, 60))
	for b.Loop() {
		_ = statusMoves[callSubmit]
	}
}
