package statemachine

import (
	"fmt"
	"math"
	"time"

	"github.com/buyflow/buyflow/internal/reconcile"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/workflow"
)

// The reconciliation sweep's share of the bill: what one day of runs every sweepCadence costs a
// fleet of pending buys spread evenly over sellers, from what internal/reconcile does in a run
// (its default budget per seller) with the latencies below. These are estimates from the
// code's calls, not measurements; the local stack's detection benchmark (e2e) measures the
// latency side.
const (
	sellerReadLatency = 300 * time.Millisecond // one get_task_status / tasks/get
	listPageLatency   = 500 * time.Millisecond // one list_tasks page of up to 100 tasks
	listPageSize      = 100
	ledgerOpLatency   = 10 * time.Millisecond // one DynamoDB call from the Lambda
	opItemKB          = 2.0                   // the operation item (see opWrite)
	sweepLambdaGB     = lambdaGB
	// perSellerLedgerOps: GetProgress (consistent read), AcquireLock, ReleaseLock, PutProgress.
	perSellerLedgerOps = 4
	// buyWait is how long each buy of the fleet stays pending (the 24-hour rows).
	buyWait = 24 * time.Hour
	// executionChecksPerDay: an operation quiet for StaleAfter has its execution described
	// once per StaleAfter (30 min) of quiet, not once per run.
	executionChecksPerDay = 48
)

// sweepFleet is a set of pending buys spread evenly over sellers.
type sweepFleet struct {
	pending, sellers int
	listing          bool // the sellers offer list_tasks / tasks/list
}

// sweepDay is what the fleet's sweep costs per day and how fresh it keeps the ledger.
type sweepDay struct {
	sellerCallsPerRun float64
	pass, run         time.Duration // one seller's pass; one run (sellers swept concurrently)
	period            time.Duration // how often each seller is swept: the cadence, or the pass when longer
	requests          float64       // Lambda invocations per day
	gbSeconds         float64
	rru, wru          float64
	describes         float64 // DescribeExecution calls (not billed)
	usd, usdPerBuyDay float64
	detectWorst       time.Duration // seller finishes → ledger terminal, at worst
}

func (f *sweepFleet) name() string {
	l := "no list_tasks"
	if f.listing {
		l = "list_tasks"
	}
	return fmt.Sprintf("%d buys / %d sellers, %s", f.pending, f.sellers, l)
}

func (f *sweepFleet) cost() sweepDay {
	var d sweepDay
	perSeller := float64(f.pending) / float64(f.sellers)
	// Each run ends about pending/buyWait×cadence waits; the sweep reads those tasks directly.
	finishedPerRun := float64(f.pending) * sweepCadence.Seconds() / buyWait.Seconds() / float64(f.sellers)
	ledgerTime := perSellerLedgerOps * ledgerOpLatency
	if f.listing {
		pages := math.Ceil(perSeller / listPageSize)
		d.sellerCallsPerRun = float64(f.sellers) * (pages + finishedPerRun)
		d.pass = time.Duration(pages)*listPageLatency + time.Duration(math.Ceil(finishedPerRun))*sellerReadLatency + ledgerTime
	} else {
		d.sellerCallsPerRun = float64(f.pending)
		byConcurrency := time.Duration(math.Ceil(perSeller/reconcile.DefaultPollConcurrency)) * sellerReadLatency
		byRate := time.Duration(perSeller / reconcile.DefaultPollRate * float64(time.Second))
		d.pass = max(byConcurrency, byRate) + ledgerTime
	}
	// The ledger read: one query per pending status, pages of MaxListLimit items, eventually
	// consistent (0.5 RRU per 4 KB).
	pendingStatuses := 0
	for _, st := range workflow.Statuses {
		if st.Pending() {
			pendingStatuses++
		}
	}
	readPages := pendingStatuses + f.pending/record.MaxListLimit
	readTime := time.Duration(readPages) * ledgerOpLatency
	waves := math.Ceil(float64(f.sellers) / reconcile.DefaultSellerConcurrency)
	d.run = readTime + time.Duration(waves)*d.pass
	d.period = max(sweepCadence, time.Duration(waves)*d.pass)

	runsPerDay := (24 * time.Hour).Seconds() / sweepCadence.Seconds()
	passesPerDay := (24 * time.Hour).Seconds() / d.period.Seconds()
	d.requests = runsPerDay
	// Runs that find every seller's lease held (a pass longer than the cadence) only read the
	// ledger; the passes themselves run back to back.
	busy := runsPerDay*readTime.Seconds() + passesPerDay*(time.Duration(waves)*d.pass).Seconds()
	d.gbSeconds = busy * sweepLambdaGB
	d.rru = runsPerDay*(float64(pendingStatuses)*0.5+math.Ceil(float64(f.pending)*opItemKB/4)*0.5) + passesPerDay*float64(f.sellers)*consistentRead
	// Per pass and seller: AcquireLock, ReleaseLock, PutProgress; per run, the heartbeat.
	d.wru = passesPerDay*float64(f.sellers)*3*smallWrite + runsPerDay*smallWrite
	d.describes = float64(f.pending) * executionChecksPerDay
	d.usd = d.requests*usdPerRequest + d.gbSeconds*usdPerGBSecond + d.rru*usdPerRRU + d.wru*usdPerWRU
	d.usdPerBuyDay = d.usd / float64(f.pending)
	// At worst the task ends just after its read: the next pass reads it one period later, and
	// within the pass it may come last.
	d.detectWorst = d.period + d.pass
	return d
}

// sweepTable prints the sweep's cost per fleet.
func sweepTable() []string {
	lines := []string{
		fmt.Sprintf("reconciliation sweep every %s, per day (list prices; seller read %s, list page %s, ledger op %s; per seller at most %d reads at once, %.0f/s; %d sellers at once)",
			sweepCadence, sellerReadLatency, listPageLatency, ledgerOpLatency, reconcile.DefaultPollConcurrency, reconcile.DefaultPollRate, reconcile.DefaultSellerConcurrency),
		fmt.Sprintf("%-40s %10s %7s %7s %7s %8s %9s %9s %8s %11s %8s %10s %11s",
			"fleet", "calls/run", "pass", "run", "period", "λ req", "GB-s", "RRU", "WRU", "Describe", "$/day", "$/1000 buys", "detect ≤"),
	}
	for _, f := range sweepFleets {
		d := f.cost()
		lines = append(lines, fmt.Sprintf("%-40s %10.0f %7s %7s %7s %8.0f %9.0f %9.0f %8.0f %11.0f %8.3f %10.3f %11s",
			f.name(), d.sellerCallsPerRun, d.pass.Round(100*time.Millisecond), d.run.Round(100*time.Millisecond), d.period.Round(time.Second),
			d.requests, d.gbSeconds, d.rru, d.wru, d.describes, d.usd, d.usdPerBuyDay*buysPerBatch, d.detectWorst.Round(time.Second)))
	}
	lines = append(lines, "$/1000 buys is the share of 1,000 buys that each wait 24 h; DescribeExecution calls are not billed (throttled at 25/s per account and region)")
	return lines
}
