package statemachine

import (
	"fmt"
	"math"
	"time"

	"github.com/buyflow/buyflow/internal/delivery"
)

// The delivery read's share of the bill: the reconcile function, after each sweep run, reads
// get_media_buy_delivery for the live buys that are due (internal/delivery, every
// delivery.DefaultEvery per buy), one call per seller and account for all of its due buys.
// Counted as the sweep's table counts: Lambda time from the calls' latencies (the reads run
// in the sweep's own invocations, one after the other, so they add no Lambda request), and
// request units from what the reader does per run and per buy read. Estimates from the code's
// calls, not measurements.
const (
	deliveryReadLatency = 500 * time.Millisecond // one get_media_buy_delivery for a seller's due buys
	// deliveryOpsPerBuy: GetBuyState (canceled?), GetBuyState (approved budget),
	// PutDeliverySnapshot, AppendEvent, ScheduleDeliveryRead.
	deliveryOpsPerBuy = 5
	// deliveryRRUPerBuy: the two consistent GetBuyState reads.
	deliveryRRUPerBuy = 2 * consistentRead
	// deliveryWRUPerBuy: the snapshot and its event (small puts), and the next read scheduled:
	// an update of the operation that moves its gsi1 sort key (gsi1 delete + put, gsi2 update).
	deliveryWRUPerBuy = 2*smallWrite + opWrite + opMoveIndexes
	// deliveryRunRRU: ListLiveDue's first page header and the backfill's progress read (once
	// the backfill is done; a warm function skips even that).
	deliveryRunRRU = 0.5 + consistentRead
)

// deliveryFleet is a set of live buys spread evenly over sellers, one account each.
type deliveryFleet struct{ live, sellers int }

// deliveryDay is what one day of delivery reads costs a fleet.
type deliveryDay struct {
	readsPerBuy, dueRun, callsRun float64
	runTime                       time.Duration
	gbSeconds, rru, wru           float64
	usd, usdPerBuyDay             float64
}

func (f deliveryFleet) cost() deliveryDay {
	var d deliveryDay
	runsPerDay := (24 * time.Hour).Seconds() / sweepCadence.Seconds()
	d.readsPerBuy = (24 * time.Hour).Seconds() / delivery.DefaultEvery.Seconds()
	// Reads spread evenly over the runs: each run finds live×cadence/every buys due, at most a batch.
	d.dueRun = math.Min(float64(f.live)*sweepCadence.Seconds()/delivery.DefaultEvery.Seconds(), delivery.DefaultBatch)
	d.callsRun = math.Min(float64(f.sellers), math.Ceil(d.dueRun))
	d.runTime = ledgerOpLatency + time.Duration(d.callsRun*float64(deliveryReadLatency)) +
		time.Duration(d.dueRun*deliveryOpsPerBuy*float64(ledgerOpLatency))
	d.gbSeconds = runsPerDay * d.runTime.Seconds() * sweepLambdaGB
	// ListLiveDue reads the due items (eventually consistent, 0.5 RRU per 4 KB).
	d.rru = runsPerDay * (deliveryRunRRU + math.Ceil(d.dueRun*opItemKB/4)*0.5 + d.dueRun*deliveryRRUPerBuy)
	d.wru = runsPerDay * d.dueRun * deliveryWRUPerBuy
	d.usd = d.gbSeconds*usdPerGBSecond + d.rru*usdPerRRU + d.wru*usdPerWRU
	d.usdPerBuyDay = d.usd / float64(f.live)
	return d
}

var deliveryFleets = []deliveryFleet{{live: 1000, sellers: 10}, {live: 10000, sellers: 10}}

// deliveryTable prints the delivery read's cost per fleet: per day, and per buy per day.
func deliveryTable() []string {
	lines := []string{
		fmt.Sprintf("delivery reads: each live buy every %s, after each sweep run (every %s), per day (list prices; get_media_buy_delivery %s, ledger op %s)",
			delivery.DefaultEvery, sweepCadence, deliveryReadLatency, ledgerOpLatency),
		fmt.Sprintf("%-32s %9s %8s %9s %7s %6s %9s %9s %9s %8s %15s", "fleet", "reads/buy", "due/run", "calls/run", "run", "λ req", "GB-s", "RRU", "WRU", "$/day", "$/1000 buys/day"),
	}
	for _, f := range deliveryFleets {
		d := f.cost()
		lines = append(lines, fmt.Sprintf("%-32s %9.0f %8.1f %9.0f %7s %6d %9.0f %9.0f %9.0f %8.3f %15.3f",
			fmt.Sprintf("%d live buys / %d sellers", f.live, f.sellers), d.readsPerBuy, d.dueRun, d.callsRun, d.runTime.Round(10*time.Millisecond),
			0, d.gbSeconds, d.rru, d.wru, d.usd, d.usdPerBuyDay*buysPerBatch))
	}
	lines = append(lines, "λ req is 0: the reads run inside the sweep's invocations (already in its table); their time is the GB-s here")
	return lines
}
