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
// webhook receiver, reader and ledger. Estimates from the code's calls, not measurements.
const (
	lifeFlight          = 30 * 24 * time.Hour
	deliveryReadLatency = 500 * time.Millisecond // one get_media_buy_delivery for a seller's due buys
	// entryKB is a buy's live entry (internal/ledger: tenant, id, mark, push flag, gsi1 keys).
	entryKB = 0.3
	// listLiveRRU: ListLiveDue's first page header, every run whether or not a buy is due.
	listLiveRRU = 0.5
	// backfillRRU: the backfill's progress read (a consistent GetItem). The reader stops asking
	// once the ledger says the backfill is done, so a warm container reads it once: taken here
	// as once an hour (a cold start every 60 runs of the sweep), an assumption.
	backfillRRU = consistentRead / 60
	// A push (one report for one buy, authenticated by the reporting_webhook's Bearer
	// credential, as the create registers it): the webhook's LocateOperation and GetOperation
	// (the id index item, then the operation: pushReceiverOps calls; a warm instance that has
	// seen the buy remembers its owner and reads the operation only, which the model does not count on:
	// a buy's reports come a day apart); the reader's GetBuyState and
	// last-snapshot query (ListDeliverySnapshots, 1 item); the snapshot and event when it
	// moved. Once per buy, MarkDeliveryPushed. A report signed RFC 9421 instead would add its
	// nonce's put (one write unit).
	pushReceiverOps = 2
	pushReaderOps   = 2
	pushRRU         = 2*consistentRead + 2*consistentRead
	// pushCPU bounds the receiver's own work on a push besides its ledger calls (the handler's
	// allocation and parsing; BenchmarkPushReport in internal/webhook measures it).
	pushCPU = 5 * time.Millisecond
	// When the delivery moved, a pull or push writes PutDeliverySnapshot and AppendEvent.
	movedOps = 2
	movedWRU = 2 * smallWrite
	// reportsPerDay: the reporting_frequency a push buy asks for ("daily").
	reportsPerDay = 1
	// deliveryLive, deliverySellers: the fleet the reads share runs and calls with.
	deliveryLive, deliverySellers = 1000, 10
)

// readCosts is what the ledger spends on one buy's pulls: the model of the code as it is
// (liveEntry) and as the first round left it (opListed), for the before/after rows.
type readCosts struct {
	name string
	// pullOps is the reader's ledger calls per pull (TestDeliveryModelMatchesCountedCalls
	// counts them), pullRRU and pullWRU their units.
	pullOps          float64
	pullRRU, pullWRU float64
	// listReads is the ledger calls per pull inside ListLiveDue beyond its page (the
	// operation's read for a buy its entry lists).
	listReads float64
	// firstWRU and lastWRU replace pullWRU at the buy's first pull (which moves the listing)
	// and its last (which retires it).
	firstWRU, lastWRU float64
	// pushedPullRRU is added to a pull of a buy marked pushed; pushMarkWRU is MarkDeliveryPushed.
	pushedPullRRU, pushMarkWRU float64
	// aligned: reads after the first fall on the cadence's slot (delivery.DefaultSlot), so the
	// buys of a seller due in one slot share a call.
	aligned bool
	// marksAgain: a push marks the buy again after a watchdog pull found news (pushMarks);
	// round 1 read the flag from the operation and marked once.
	marksAgain bool
	// askedSkipsLaunch: a buy at a seller that offers push is read at launch and at the launch
	// window's close only (Cadence.NextPushAsked); round 1 pulled it every EdgeEvery.
	askedSkipsLaunch bool
	// pushWRU is what a push writes besides its snapshot and event: round 2's receipt claim
	// and completion and an RFC 9421 nonce; nothing now (the snapshot is the report's dedupe).
	pushWRU float64
	// pushLambda is a push's billed Lambda time: round 2 took the 100 ms default; now its
	// ledger calls at ledgerOpLatency plus pushCPU.
	pushLambda time.Duration
	// watchSkips: a watchdog pull that finds a push within Cadence.PushAlive calls no seller
	// and writes only the next watch; round 2 pulled at every watch.
	watchSkips bool
	// runRRU is what every delivery run reads whether or not a buy is due: round 2 read the
	// backfill's progress at every run (its charge here), now once per warm container.
	runRRU float64
}

var (
	// liveEntry: ListLiveDue reads the operation of a buy its live entry lists (a consistent
	// GetItem, ≤ 4 KB) besides the entry's share of its page; GetBuyState; ScheduleLive
	// rewrites the entry (< 1 KB) and moves it in gsi1 (delete + put). The first pull hands the
	// listing over in one transaction (twice the units: the operation's update and the
	// entry's put) plus the operation's gsi1 delete and gsi2 update; the last deletes the entry
	// (and its gsi1 copy) and its condition on the operation fails (a 2 KB write's units). A
	// pull of a pushed buy reads its newest snapshot (one item). MarkDeliveryPushed updates the
	// entry and its gsi1 copy.
	liveEntry = readCosts{name: "after", pullOps: 2, listReads: 1,
		pullRRU: consistentRead + consistentRead + entryKB/4*0.5, pullWRU: 3 * smallWrite,
		firstWRU: 2*opWrite + 2*opWrite + 2*smallWrite + smallWrite, lastWRU: 2*smallWrite + opWrite,
		pushedPullRRU: consistentRead, pushMarkWRU: 2 * smallWrite, aligned: true, marksAgain: true, askedSkipsLaunch: true,
		pushLambda: time.Duration(pushReceiverOps+pushReaderOps+movedOps)*ledgerOpLatency + pushCPU, watchSkips: true, runRRU: listLiveRRU + backfillRRU}
	// round2 is liveEntry as this round found it: every push claimed and completed a receipt
	// (and, in the model's upper bound, an RFC 9421 nonce), in the default 100 ms; every watch
	// pulled; every run read the backfill's progress.
	round2 = func() readCosts {
		c := liveEntry
		c.name, c.pushWRU, c.pushLambda, c.watchSkips, c.runRRU = "before (round 2)", 3*smallWrite, durationDefault, false, listLiveRRU+consistentRead
		return c
	}()
	// opListed (round 1): GetBuyState and ScheduleDeliveryReadMarked, which moved the ~2 KB
	// operation item in gsi1 (delete + put) and updated its gsi2 copy; the last pull's
	// RetireLive an update of the operation and gsi1 delete and gsi2 update; a push compared
	// with its last snapshot, a pull never; MarkDeliveryPushed an update of the operation and
	// its index copies.
	opListed = readCosts{name: "before (round 1)", pullOps: 2,
		pullRRU: consistentRead + opItemKB/4*0.5, pullWRU: opWrite + opMoveIndexes,
		firstWRU: opWrite + opMoveIndexes, lastWRU: opWrite + 2*opWrite,
		pushMarkWRU: opWrite + opIndexCopies, pushWRU: 3 * smallWrite, pushLambda: durationDefault, runRRU: listLiveRRU + consistentRead}
)

// flight is one buy's walk through a lifeFlight: its pulls, those of them after it was marked
// pushed, watched (those of the pushed that found a push within Cadence.PushAlive: no call),
// remarks (the called pushed pulls a later push follows: each marks the buy again when the
// pull found news), and dailyMoved, the called pulls that find news from a seller that updates
// its figures once a day (a pull a day or more after the last one that found news).
type flightWalk struct {
	pulls, pushedPulls, watched, remarks, dailyMoved int
}

// flightReads walks cadence c over one lifeFlight from its start the way the reader does (the
// first read when the buy goes live, then each next read the cadence gives, the last one
// retiring the buy): the pulls of one buy. pushedAfter > 0 is a buy at a seller that offers
// push reporting, marked pushed from then on.
func flightReads(c delivery.Cadence, pushedAfter time.Duration) flightWalk {
	return walkFlight(c, pushedAfter, liveEntry)
}

// walkFlight is flightReads with rc's behaviour: askedSkipsLaunch false walks a push buy's
// launch as round 1 did, watchSkips false pulls at every watch as round 2 did. Pushes come
// every day from pushedAfter through the flight's end, each moved (a snapshot written).
func walkFlight(c delivery.Cadence, pushedAfter time.Duration, rc readCosts) flightWalk {
	start := time.Date(2099, 3, 1, 0, 0, 0, 0, time.UTC)
	end := start.Add(lifeFlight)
	every := 24 * time.Hour / reportsPerDay
	alive := c.PushAlive
	if alive <= 0 {
		alive = delivery.DefaultPushAlive
	}
	var w flightWalk
	var news time.Time
	for at := start; ; {
		w.pulls++
		pushed := pushedAfter > 0 && at.Sub(start) >= pushedAfter
		lastPush := start.Add(min(lifeFlight, pushedAfter+(at.Sub(start)-pushedAfter)/every*every))
		watched := pushed && rc.watchSkips && at.Sub(lastPush) < alive
		switch {
		case watched:
			w.watched++
		case w.pulls == 1 || at.Sub(news) >= 24*time.Hour:
			w.dailyMoved++
			news = at
		}
		if pushed && !watched && at.Sub(start) < lifeFlight {
			w.remarks++
		}
		next, retire := c.Next(at, start, end)
		if pushedAfter > 0 && rc.askedSkipsLaunch {
			next, retire = c.NextPushAsked(at, start, end)
		}
		if pushed {
			w.pushedPulls++
			next, retire = c.NextPushed(at, start, end)
		}
		if retire {
			return w
		}
		at = next
	}
}

// pushMarks is how often a pushed buy's reader calls MarkDeliveryPushed: at its first push,
// and at the first push after a watchdog pull that found news (the newest snapshot is then a
// pulled one; the reader marks when the newest is not a pushed one): flightWalk.remarks. The
// pulls at the end and after it are followed by no push; a watch that found the channel alive
// wrote nothing. Round 1 marked once; so does a buy none of whose watchdog pulls finds news.
func pushMarks(w flightWalk, movedAll bool) float64 {
	if !movedAll {
		return 1
	}
	return 1 + float64(w.remarks)
}

// deliveryLife is one buy's delivery over its life.
type deliveryLife struct {
	pulls, watched, moved, pushes, calls  float64
	invocations, gbSeconds, rru, wru, api float64
	usd                                   float64
}

// lifeOf prices one buy's delivery with costs rc: pulls (its cadence's) and, with push, a
// report a day. movedAll takes every pull to find the delivery moved (an upper bound);
// otherwise only flightWalk.dailyMoved do.
func lifeOf(c delivery.Cadence, rc readCosts, push, movedAll bool) deliveryLife {
	var d deliveryLife
	days := (lifeFlight + delivery.DefaultFinalAfter).Hours() / 24
	pushedAfter := time.Duration(0)
	if push {
		// The first daily report comes a day in: until then the buy is pulled at launch.
		pushedAfter = 24 * time.Hour / reportsPerDay
		d.pushes = lifeFlight.Hours() / 24 * reportsPerDay
	}
	w := walkFlight(c, pushedAfter, rc)
	d.pulls, d.watched, d.moved = float64(w.pulls), float64(w.watched), float64(w.dailyMoved)
	called := d.pulls - d.watched // the pulls that ask the seller
	if movedAll {
		d.moved = called
	}
	// Reads spread evenly over the runs (aligned: over the slots), each run finding dueRun buys
	// due; their call is shared when more than one of a seller's buys is due at once. The
	// first read, when the buy completes, is never aligned. A watch that found the channel
	// alive calls nothing.
	runsPerDay := (24 * time.Hour).Seconds() / sweepCadence.Seconds()
	calls := called * math.Min(1, deliverySellers/(deliveryLive*called/days/runsPerDay))
	if rc.aligned {
		slotsPerDay := (24 * time.Hour).Seconds() / delivery.DefaultSlot.Seconds()
		calls = 1 + (called-1)*math.Min(1, deliverySellers/(deliveryLive*(called-1)/days/slotsPerDay))
	}
	d.calls = calls
	pullTime := calls*deliveryReadLatency.Seconds() + d.pulls*(rc.pullOps+rc.listReads)*ledgerOpLatency.Seconds() + d.moved*movedOps*ledgerOpLatency.Seconds()
	d.gbSeconds = pullTime*sweepLambdaGB + d.pushes*rc.pushLambda.Seconds()*lambdaGB
	d.invocations = d.pushes // pulls run in the sweep's invocations
	d.api = d.pushes
	d.rru = d.pulls*rc.pullRRU + float64(w.pushedPulls)*rc.pushedPullRRU + runsPerDay*days*rc.runRRU/deliveryLive + d.pushes*pushRRU
	d.wru = (d.pulls-2)*rc.pullWRU + rc.firstWRU + rc.lastWRU + d.moved*movedWRU + d.pushes*(rc.pushWRU+movedWRU)
	if push {
		d.wru += pushMarks(w, movedAll && rc.marksAgain) * rc.pushMarkWRU
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
// not, pulled or pushed reports: every pull taken to find the delivery moved (an upper bound),
// then the same with a seller that updates its figures daily, and before/after rows of the
// delivery share alone (round 1's operation-listed reads, and the hourly pull that wrote a
// snapshot per read). It returns the OVER BUDGET lines.
func wholeLifeTable(tb testing.TB, runs int) (lines, over []string) {
	lines = append(lines,
		fmt.Sprintf("whole life per 1,000 buys: placement (the cost table's case, mean of %d runs) + %s of delivery and its final read (list prices; %d live buys over %d sellers; get_media_buy_delivery %s; pushes daily, each moved)",
			runs, lifeFlight, deliveryLive, deliverySellers, deliveryReadLatency),
		fmt.Sprintf("%-34s %-7s %-8s %6s %6s %6s %8s %8s %9s %11s %8s %7s", "placement case", "reports", "moved", "pulls", "moved", "pushes", "RRU", "WRU", "place $", "delivery $", "total $", "budget"))
	for _, name := range []string{"webhook after 24 h", "no webhooks, 24 h, list_tasks"} {
		place := placementPer1000(tb, name, runs)
		for _, movedAll := range []bool{true, false} {
			for _, push := range []bool{false, true} {
				d := lifeOf(delivery.Cadence{}, liveEntry, push, movedAll)
				reports, budget, moved := "pull", budgetLifePull, "all"
				if push {
					reports, budget = "push", budgetLifePush
				}
				if !movedAll {
					moved = "daily"
				}
				total := place + d.usd*buysPerBatch
				lines = append(lines, fmt.Sprintf("%-34s %-7s %-8s %6.0f %6.0f %6.0f %8.0f %8.0f %9.3f %11.3f %8.3f %7s",
					name, reports, moved, d.pulls, d.moved, d.pushes, d.rru, d.wru, place, d.usd*buysPerBatch, total, fmt.Sprintf("≤ %.2f", budget)))
				if total > budget && movedAll {
					over = append(over, fmt.Sprintf("OVER BUDGET: whole life, %s, %s reports: $%.3f per 1,000 buys > $%.2f (delivery $%.3f)", name, reports, total, budget, d.usd*buysPerBatch))
				}
			}
		}
	}
	lines = append(lines, "delivery share alone, before and after (every read moved):")
	for _, push := range []bool{false, true} {
		reports := map[bool]string{false: "pull", true: "push"}[push]
		for _, d := range []struct {
			name string
			d    deliveryLife
		}{{"(" + opListed.name + ")", lifeOf(delivery.Cadence{}, opListed, push, true)},
			{"(" + round2.name + ")", lifeOf(delivery.Cadence{}, round2, push, true)},
			{"(" + liveEntry.name + ")", lifeOf(delivery.Cadence{}, liveEntry, push, true)}} {
			lines = append(lines, fmt.Sprintf("%-34s %-7s %-8s %6.0f %6.0f %6.0f %8.0f %8.0f %9s %11.3f %8s %7s",
				d.name, reports, "all", d.d.pulls, d.d.moved, d.d.pushes, d.d.rru, d.d.wru, "", d.d.usd*buysPerBatch, "", ""))
		}
	}
	// The hourly pull that wrote a snapshot and an event every read, and read the buy state
	// twice (a fifth ledger call).
	hourly := lifeOf(delivery.Cadence{Every: time.Hour}, opListed, false, true)
	hourly.rru += hourly.pulls * consistentRead
	hourly.gbSeconds += hourly.pulls * ledgerOpLatency.Seconds() * sweepLambdaGB
	hourly.usd += hourly.pulls * (consistentRead*usdPerRRU + ledgerOpLatency.Seconds()*sweepLambdaGB*usdPerGBSecond)
	lines = append(lines, fmt.Sprintf("%-34s %-7s %-8s %6.0f %6.0f %6s %8.0f %8.0f %9s %11.3f %8s %7s",
		"(before: hourly pull, every read)", "pull", "all", hourly.pulls, hourly.moved, "-", hourly.rru, hourly.wru, "", hourly.usd*buysPerBatch, "", ""),
		"delivery $ is Lambda time (pulls inside the sweep's invocations; a push its own), DynamoDB and, for pushes, API Gateway;",
		"  moved all: every pull finds the delivery moved (an upper bound); daily: an assumption, not a measurement: the seller updates",
		"  its figures once a day, so only a pull a day or more after the last that found news writes a snapshot and an event;",
		fmt.Sprintf("  cadence: every %s in the first %s and the last %s, every %s between, at the end, %s after it (then retired); a pushed buy every %s,",
			delivery.DefaultEdgeEvery, delivery.DefaultLaunchWindow, delivery.DefaultEndWindow, delivery.DefaultQuietEvery, delivery.DefaultFinalAfter, delivery.DefaultPushWatch),
		fmt.Sprintf("  asking the seller only when no push came in the last %s; a push: API Gateway, one invocation of %s, %.0f RRU, %.0f WRU when it moved (no receipt: its snapshot is its dedupe)",
			delivery.DefaultPushAlive, liveEntry.pushLambda, float64(pushRRU), liveEntry.pushWRU+movedWRU))
	return lines, over
}

// BenchmarkWholeLifeTable prints the whole-life table (`make bench`).
func BenchmarkWholeLifeTable(b *testing.B) {
	lines, over := wholeLifeTable(b, 60)
	printTable(append(lines, over...))
	for b.Loop() {
		_ = lifeOf(delivery.Cadence{}, liveEntry, true, true)
	}
}

// TestWholeLifeTable: every row prices, pushes cost less than pulls, the live entry less than
// the operation-listed reads it replaced, and all far less than the hourly pull.
func TestWholeLifeTable(t *testing.T) {
	lines, over := wholeLifeTable(t, 3)
	if len(lines) != 2+8+1+6+6 {
		t.Errorf("the whole-life table has %d lines", len(lines))
	}
	pull, push := lifeOf(delivery.Cadence{}, liveEntry, false, true), lifeOf(delivery.Cadence{}, liveEntry, true, true)
	pullBefore, pushBefore := lifeOf(delivery.Cadence{}, opListed, false, true), lifeOf(delivery.Cadence{}, opListed, true, true)
	hourly := lifeOf(delivery.Cadence{Every: time.Hour}, opListed, false, true)
	// A push writes its snapshot and event and nothing else, and its buy's watches ask the
	// seller nothing while it pushes: push reporting costs less than pulling the same buy
	// (round 2's receipts and watchdog calls made it cost more).
	if !(pull.usd < pullBefore.usd/1.8 && push.usd < pushBefore.usd/2 && pull.usd*20 < hourly.usd) || push.pushes != 30 || push.pulls >= pushBefore.pulls {
		t.Errorf("pull %+v (before %+v), push %+v (before %+v), hourly %+v", pull, pullBefore, push, pushBefore, hourly)
	}
	if r2 := lifeOf(delivery.Cadence{}, round2, true, true); !(push.usd < pull.usd && r2.usd > pull.usd && push.watched == push.pulls-1) {
		t.Errorf("push %+v, round 2's push %+v, pull %+v", push, r2, pull)
	}
	if daily := lifeOf(delivery.Cadence{}, liveEntry, false, false); !(daily.moved < daily.pulls && daily.usd < pull.usd) {
		t.Errorf("a daily-updating seller: %+v", daily)
	}
	for _, line := range over {
		t.Log(line)
	}
}
