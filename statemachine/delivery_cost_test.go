package statemachine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/delivery"
)

// The delivery's share of a buy's whole life: placement (the cost table's cases) plus a
// lifeFlight of delivery, pulled or pushed. Pulls run in the reconcile function after each
// sweep run (internal/delivery: one get_media_buy_delivery per seller and account for all its
// due buys, each buy when its flight-following cadence says); pushes arrive on the webhook
// route (internal/webhook, then delivery.Reader.Push). The per-read and per-push ledger calls
// below are what the code does; TestDeliveryModelMatchesCountedCalls counts them on the real
// reader and ledger. Estimates from the code's calls, not measurements.
const (
	lifeFlight          = 30 * 24 * time.Hour
	deliveryReadLatency = 500 * time.Millisecond // one get_media_buy_delivery for a seller's due buys
	// A pull of one buy: GetBuyState (canceled? the approved budget, the end) and
	// ScheduleDeliveryReadMarked, which moves the buy's gsi1 sort key (gsi1 delete + put, gsi2
	// update); when the delivery moved, PutDeliverySnapshot and AppendEvent too.
	pullOps      = 2
	pullRRU      = consistentRead + opItemKB/4*0.5 // the buy state, and the buy's share of ListLiveDue's page
	pullWRU      = opWrite + opMoveIndexes
	movedOps     = 2
	movedWRU     = 2 * smallWrite
	pullMovedRRU = 0.0
	// deliveryRunRRU: ListLiveDue's first page header and the backfill's progress read, every
	// run whether or not a buy is due.
	deliveryRunRRU = 0.5 + consistentRead
	// A push (one report for one buy): the webhook's FindOperation (index + op), nonce put
	// (RFC 9421 sellers; an upper bound for HMAC ones), receipt claim and completion; the
	// reader's GetBuyState and last-snapshot query (ListDeliverySnapshots, 1 item); the
	// snapshot and event when it moved. Once per buy, MarkDeliveryPushed (an update of the
	// operation and its index copies).
	pushReaderOps = 2
	pushRRU       = 2*consistentRead + 2*consistentRead
	pushWRU       = 3 * smallWrite
	pushMarkWRU   = opWrite + opIndexCopies
	pushLambda    = durationDefault
	// reportsPerDay: the reporting_frequency a push buy asks for ("daily").
	reportsPerDay = 1
	// movedShare is the share of pulls and pushes that find the delivery moved: 1, an upper
	// bound (a buy that delivers all flight long moves between any two reads a day apart; the
	// 3-hour reads at launch and near the end repeat a daily-reporting seller's numbers).
	movedShare = 1.0
	// deliveryLive, deliverySellers: the fleet the reads share runs and calls with.
	deliveryLive, deliverySellers = 1000, 10
)

// flightReads walks cadence c over one lifeFlight from its start the way the reader does (the
// first read when the buy goes live, then each next read the cadence gives, the last one
// retiring the buy): the pulls of one buy. pushedAfter > 0 marks the buy pushed from then on.
func flightReads(c delivery.Cadence, pushedAfter time.Duration) int {
	start := time.Date(2099, 3, 1, 0, 0, 0, 0, time.UTC)
	end := start.Add(lifeFlight)
	n := 0
	for at := start; ; n++ {
		next, retire := c.Next(at, start, end)
		if pushedAfter > 0 && at.Sub(start) >= pushedAfter {
			next, retire = c.NextPushed(at, start, end)
		}
		if retire {
			return n + 1
		}
		at = next
	}
}

// deliveryLife is one buy's delivery over its life.
type deliveryLife struct {
	pulls, pushes                         float64
	invocations, gbSeconds, rru, wru, api float64
	usd                                   float64
}

// lifeOf prices one buy's delivery: pulls (its cadence's) and, with push, a report a day.
func lifeOf(c delivery.Cadence, push bool) deliveryLife {
	var d deliveryLife
	days := (lifeFlight + delivery.DefaultFinalAfter).Hours() / 24
	pushedAfter := time.Duration(0)
	if push {
		// The first daily report comes a day in: until then the buy is pulled at launch.
		pushedAfter = 24 * time.Hour / reportsPerDay
		d.pushes = lifeFlight.Hours() / 24 * reportsPerDay
	}
	d.pulls = float64(flightReads(c, pushedAfter))
	// Reads spread evenly over the runs: a run finds dueRun buys due; their call is shared when
	// more than one of a seller's buys is due at once.
	runsPerDay := (24 * time.Hour).Seconds() / sweepCadence.Seconds()
	dueRun := deliveryLive * d.pulls / days / runsPerDay
	callsPerPull := math.Min(1, deliverySellers/dueRun)
	pullTime := callsPerPull*deliveryReadLatency.Seconds() + (pullOps+movedShare*movedOps)*ledgerOpLatency.Seconds()
	d.gbSeconds = d.pulls*pullTime*sweepLambdaGB + d.pushes*pushLambda.Seconds()*lambdaGB
	d.invocations = d.pushes // pulls run in the sweep's invocations
	d.api = d.pushes
	d.rru = d.pulls*(pullRRU+movedShare*pullMovedRRU) + runsPerDay*days*deliveryRunRRU/deliveryLive + d.pushes*pushRRU
	d.wru = d.pulls*(pullWRU+movedShare*movedWRU) + d.pushes*(pushWRU+movedShare*movedWRU)
	if push {
		d.wru += pushMarkWRU
	}
	d.usd = d.invocations*usdPerRequest + d.gbSeconds*usdPerGBSecond + d.rru*usdPerRRU + d.wru*usdPerWRU + d.api*usdPerAPIRequest
	return d
}

// placementPer1000 is the cost table's case name per 1,000 buys: the mean of runs seeded buys,
// the sweep's share included, as costTable prices it.
func placementPer1000(tb testing.TB, name string, runs int) float64 {
	asl, fixed := load(tb), loadASL(tb, fixedLoopASL)
	for _, c := range costCases {
		if c.name != name {
			continue
		}
		var sum buyCost
		for seed := range uint64(runs) {
			bc := costOfBuy(tb, runCase(tb, c, asl, fixed, rand.New(rand.NewPCG(seed, 42)).Float64))
			if c.sweep != nil {
				bc.sweep = c.sweep.cost().usdPerBuyDay * c.after.Hours() / 24
			}
			sum = sum.add(bc)
		}
		return sum.total() / float64(runs) * buysPerBatch
	}
	tb.Fatalf("no cost case %q", name)
	return 0
}

// The whole-life budgets, per 1,000 buys (issue 35).
const (
	budgetLifePull = 1.00
	budgetLifePush = 0.60
)

// wholeLifeTable prints placement + lifeFlight of delivery per 1,000 buys, task webhooks or
// not, pulled or pushed reports; and, for comparison, the hourly pull that wrote a snapshot per
// read (before the cadence followed the flight). It returns the OVER BUDGET lines.
func wholeLifeTable(tb testing.TB, runs int) (lines, over []string) {
	lines = append(lines,
		fmt.Sprintf("whole life per 1,000 buys: placement (the cost table's case, mean of %d runs) + %s of delivery and its final read (list prices; %d live buys over %d sellers; get_media_buy_delivery %s; pushes daily; every read and push taken to have moved)",
			runs, lifeFlight, deliveryLive, deliverySellers, deliveryReadLatency),
		fmt.Sprintf("%-34s %-7s %6s %6s %8s %8s %9s %11s %8s %7s", "placement case", "reports", "pulls", "pushes", "RRU", "WRU", "place $", "delivery $", "total $", "budget"))
	for _, name := range []string{"webhook after 24 h", "no webhooks, 24 h, list_tasks"} {
		place := placementPer1000(tb, name, runs)
		for _, push := range []bool{false, true} {
			d := lifeOf(delivery.Cadence{}, push)
			reports, budget := "pull", budgetLifePull
			if push {
				reports, budget = "push", budgetLifePush
			}
			total := place + d.usd*buysPerBatch
			lines = append(lines, fmt.Sprintf("%-34s %-7s %6.0f %6.0f %8.0f %8.0f %9.3f %11.3f %8.3f %7s",
				name, reports, d.pulls, d.pushes, d.rru, d.wru, place, d.usd*buysPerBatch, total, fmt.Sprintf("≤ %.2f", budget)))
			if total > budget {
				over = append(over, fmt.Sprintf("OVER BUDGET: whole life, %s, %s reports: $%.3f per 1,000 buys > $%.2f (delivery $%.3f)", name, reports, total, budget, d.usd*buysPerBatch))
			}
		}
	}
	// Before: an hourly pull that wrote a snapshot and an event every read, and read the buy
	// state twice (a fifth ledger call).
	before := lifeOf(delivery.Cadence{Every: time.Hour}, false)
	before.rru += before.pulls * consistentRead
	before.gbSeconds += before.pulls * ledgerOpLatency.Seconds() * sweepLambdaGB
	before.usd += before.pulls * (consistentRead*usdPerRRU + ledgerOpLatency.Seconds()*sweepLambdaGB*usdPerGBSecond)
	lines = append(lines, fmt.Sprintf("%-34s %-7s %6.0f %6s %8.0f %8.0f %9s %11.3f %8s %7s",
		"(before: hourly pull, every read)", "pull", before.pulls, "-", before.rru, before.wru, "", before.usd*buysPerBatch, "", ""),
		"delivery $ is Lambda time (pulls inside the sweep's invocations; a push its own), DynamoDB and, for pushes, API Gateway;",
		fmt.Sprintf("  cadence: every %s in the first %s and the last %s, every %s between, at the end, %s after it (then retired); a pushed buy every %s",
			delivery.DefaultEdgeEvery, delivery.DefaultLaunchWindow, delivery.DefaultEndWindow, delivery.DefaultQuietEvery, delivery.DefaultFinalAfter, delivery.DefaultPushWatch))
	return lines, over
}

// BenchmarkWholeLifeTable prints the whole-life table (`make bench`).
func BenchmarkWholeLifeTable(b *testing.B) {
	lines, over := wholeLifeTable(b, 60)
	printTable(append(lines, over...))
	for b.Loop() {
		_ = lifeOf(delivery.Cadence{}, true)
	}
}

// TestWholeLifeTable: every row prices, pushes cost less than pulls, and both far less than
// the hourly pull they replace.
func TestWholeLifeTable(t *testing.T) {
	lines, over := wholeLifeTable(t, 3)
	if len(lines) != 2+4+3 {
		t.Errorf("the whole-life table has %d lines", len(lines))
	}
	pull, push, before := lifeOf(delivery.Cadence{}, false), lifeOf(delivery.Cadence{}, true), lifeOf(delivery.Cadence{Every: time.Hour}, false)
	if !(push.usd < pull.usd && pull.usd*5 < before.usd) || push.pushes != 30 {
		t.Errorf("push %+v, pull %+v, hourly %+v", push, pull, before)
	}
	for _, line := range over {
		t.Log(line)
	}
}
