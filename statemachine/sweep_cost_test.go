package statemachine

import (
	"fmt"
	"math"
	"time"

	"github.com/buyflow/buyflow/internal/reconcile"
	"github.com/buyflow/buyflow/internal/record"
)

// The reconciliation sweep's share of the bill: what one day of runs every sweepCadence costs a
// fleet of pending buys spread evenly over sellers, from what internal/reconcile does in a run
// (its default budget per seller) with the latencies below. These are estimates from the
// code's calls, not measurements; the local stack's detection benchmark (e2e) measures the
// latency side. The calls a run makes (list pages, direct reads, ledger calls per seller and
// per run, the per-seller index's pages, the plan and the shards' reports) are counted against
// these assumptions in internal/reconcile (TestCallsPerRunMatchTheCostModel); the fan-out
// rows' sends (one SendMessageBatch per sqsBatch sellers a plan) in internal/sweepqueue
// (TestDispatchSendsTenShardsACall), while their receives and deletes are the event source
// mapping's own, one of each per batch.
const (
	sellerReadLatency = 300 * time.Millisecond // one get_task_status / tasks/get
	listPageLatency   = 500 * time.Millisecond // one list_tasks page of up to 100 tasks
	listPageSize      = 100
	ledgerOpLatency   = 10 * time.Millisecond // one DynamoDB call from the Lambda
	opItemKB          = 2.0                   // the operation item (see opWrite)
	sweepLambdaGB     = lambdaGB
	// perSellerLedgerOps: GetProgress (consistent read), AcquireLock, ReleaseLock, PutProgress.
	// Besides, each shard reports to its plan (one small write).
	perSellerLedgerOps = 4
	// planLedgerOps: a plan reads the index backfill's progress (done) and writes the plan;
	// the fan-out's planner also reads the last plan (consistent reads, small writes).
	planLedgerOps = 2
	// buyWait is how long each buy of the fleet stays pending (the 24-hour rows).
	buyWait = 24 * time.Hour
	// executionChecksPerDay: an operation quiet for StaleAfter has its execution described
	// once per StaleAfter (30 min) of quiet, not once per run.
	executionChecksPerDay = 48
)

// The fan-out (docs/ARCHITECTURE.md, "The sweep's fan-out"): the scheduled run plans, one SQS
// message per seller with pending work, and reconcile workers (an SQS event source, batches of
// sqsBatch messages, at most fanOutWorkers invocations at once) sweep the sellers of their
// batch concurrently, one shard each, reading each seller's pending operations from a
// per-seller pending index. List prices and the assumptions below.
const (
	fanOutWorkers   = 50         // the event source's MaximumConcurrency
	sqsBatch        = 10         // messages per SendMessageBatch / ReceiveMessage / DeleteMessageBatch
	usdPerSQS       = 0.40 / 1e6 // SQS standard, per request (64 KB chunk)
	sqsIdlePolls    = 15         // requests a minute the event source's long polls make while idle
	sqsSendLatency  = 20 * time.Millisecond
	indexWritesBuy  = 6                // operation writes while pending (one per status move and token set)
	shardBudgetMax  = 60 * time.Second // the bound on one shard
	detectBudgetMax = 2 * time.Minute  // seller finishes → ledger terminal, p95
	sweepUSDBudget  = 0.10             // per 1,000 buys, the sweep's share
	fanOutNote      = "SQS ×50"        // the fleet name's engine suffix
)

// sweepFleet is a set of pending buys spread evenly over sellers.
type sweepFleet struct {
	pending, sellers int
	listing          bool // the sellers offer list_tasks / tasks/list
	// fanOut sweeps each seller in its own worker (the SQS fan-out) instead of inside the one
	// scheduled invocation.
	fanOut bool
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
	if f.fanOut {
		l += ", " + fanOutNote
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
	// Each shard first reads its seller's pending operations from the per-seller index (pages
	// of MaxListLimit, eventually consistent: 0.5 RRU per 4 KB).
	indexPages := math.Ceil(perSeller / record.MaxListLimit)
	d.pass += time.Duration(indexPages) * ledgerOpLatency
	if f.fanOut {
		return f.fanOutCost(d, perSeller)
	}
	readTime := planLedgerOps * ledgerOpLatency
	// A pass longer than the shard budget stops there and resumes next run.
	d.pass = min(d.pass, reconcile.DefaultShardBudget)
	waves := math.Ceil(float64(f.sellers) / reconcile.DefaultSellerConcurrency)
	d.run = readTime + time.Duration(waves)*d.pass
	d.period = max(sweepCadence, time.Duration(waves)*d.pass)
	if full := f.fullPass(perSeller); full > d.pass {
		d.period = max(d.period, time.Duration(math.Ceil(float64(full)/float64(d.pass)))*sweepCadence)
	}

	runsPerDay := (24 * time.Hour).Seconds() / sweepCadence.Seconds()
	passesPerDay := (24 * time.Hour).Seconds() / d.period.Seconds()
	d.requests = runsPerDay
	// Runs that find every seller's lease held (a pass longer than the cadence) only read the
	// ledger; the passes themselves run back to back.
	busy := runsPerDay*readTime.Seconds() + passesPerDay*(time.Duration(waves)*d.pass).Seconds()
	d.gbSeconds = busy * sweepLambdaGB
	// Every run reads each seller's index and the backfill's progress.
	d.rru = runsPerDay*(math.Ceil(float64(f.pending)*opItemKB/4)*0.5+consistentRead) + passesPerDay*float64(f.sellers)*consistentRead
	// Per pass and seller: AcquireLock, ReleaseLock, PutProgress; per run and seller, the
	// shard's report (a shard that finds the lease held reports too); per run, the plan and
	// the heartbeat of the plan the last shard completes.
	d.wru = passesPerDay*float64(f.sellers)*3*smallWrite + runsPerDay*(float64(f.sellers)+2)*smallWrite
	d.describes = float64(f.pending) * executionChecksPerDay
	d.usd = d.requests*usdPerRequest + d.gbSeconds*usdPerGBSecond + d.rru*usdPerRRU + (d.wru+f.indexWRU())*usdPerWRU
	d.usdPerBuyDay = d.usd / float64(f.pending)
	// At worst the task ends just after its read: the next pass reads it one period later, and
	// its seller may come in the run's last wave.
	d.detectWorst = d.period + d.run
	return d
}

// fullPass is one seller's whole pass, however many runs it takes.
func (f *sweepFleet) fullPass(perSeller float64) time.Duration {
	if f.listing {
		return 0 // a listing pass is short: the budget never splits it in these fleets
	}
	byConcurrency := time.Duration(math.Ceil(perSeller/reconcile.DefaultPollConcurrency)) * sellerReadLatency
	byRate := time.Duration(perSeller / reconcile.DefaultPollRate * float64(time.Second))
	return max(byConcurrency, byRate) + perSellerLedgerOps*ledgerOpLatency
}

// indexWRU is the per-seller index's upkeep a day: each write to a buy while it is pending
// updates its copy there too (projection ALL).
func (f *sweepFleet) indexWRU() float64 {
	return float64(f.pending) * indexWritesBuy * opWrite * (24 * time.Hour).Hours() / buyWait.Hours()
}

// fanOutCost is cost for the fan-out: d holds the seller pass (its index read included) and
// the calls per run.
func (f *sweepFleet) fanOutCost(d sweepDay, perSeller float64) sweepDay {
	d.pass = min(d.pass, reconcile.DefaultShardBudget)
	batches := math.Ceil(float64(f.sellers) / sqsBatch)
	plan := time.Duration(batches)*sqsSendLatency + (planLedgerOps+1)*ledgerOpLatency // the sends; the ledger
	// A worker's invocation lasts its slowest shard (the sellers of a batch run at once).
	invocations := batches
	waves := math.Ceil(invocations / fanOutWorkers)
	d.run = plan + time.Duration(waves)*d.pass
	d.period = max(sweepCadence, d.run)
	if full := f.fullPass(perSeller); full > d.pass {
		d.period = max(d.period, time.Duration(math.Ceil(float64(full)/float64(d.pass)))*sweepCadence)
	}
	runsPerDay := (24 * time.Hour).Seconds() / sweepCadence.Seconds()
	passesPerDay := (24 * time.Hour).Seconds() / d.period.Seconds()
	d.requests = runsPerDay + passesPerDay*invocations
	d.gbSeconds = (runsPerDay*plan.Seconds() + passesPerDay*invocations*d.pass.Seconds()) * sweepLambdaGB
	// Each operation is read once a pass, from its seller's index (eventually consistent); the
	// planner reads the backfill's progress and the last plan every run.
	d.rru = passesPerDay*(math.Ceil(float64(f.pending)*opItemKB/4)*0.5+float64(f.sellers)*consistentRead) + runsPerDay*2*consistentRead
	// Per pass and seller: AcquireLock, ReleaseLock, PutProgress and the report; per plan (a
	// planner waits while the last plan's shards run), the plan and its heartbeat.
	d.wru = passesPerDay*float64(f.sellers)*4*smallWrite + passesPerDay*2*smallWrite
	d.describes = float64(f.pending) * executionChecksPerDay
	sqsRequests := runsPerDay*(3*batches) + (24*time.Hour).Minutes()*sqsIdlePolls
	d.usd = d.requests*usdPerRequest + d.gbSeconds*usdPerGBSecond + d.rru*usdPerRRU + (d.wru+f.indexWRU())*usdPerWRU + sqsRequests*usdPerSQS
	d.usdPerBuyDay = d.usd / float64(f.pending)
	// At worst the task ends just after its read: the next plan one period later, and its
	// seller's shard in the last wave.
	d.detectWorst = d.period + d.run
	return d
}

// sweepTable prints the sweep's cost per fleet.
func sweepTable() []string {
	lines := []string{
		fmt.Sprintf("reconciliation sweep every %s, per day (list prices; seller read %s, list page %s, ledger op %s; per seller at most %d reads at once, %.0f/s; %d sellers at once)",
			sweepCadence, sellerReadLatency, listPageLatency, ledgerOpLatency, reconcile.DefaultPollConcurrency, reconcile.DefaultPollRate, reconcile.DefaultSellerConcurrency),
		fmt.Sprintf("%-52s %10s %7s %7s %7s %8s %9s %9s %8s %11s %8s %10s %11s",
			"fleet", "calls/run", "pass", "run", "period", "λ req", "GB-s", "RRU", "WRU", "Describe", "$/day", "$/1000 buys", "detect ≤"),
	}
	for _, f := range sweepFleets {
		d := f.cost()
		lines = append(lines, fmt.Sprintf("%-52s %10.0f %7s %7s %7s %8.0f %9.0f %9.0f %8.0f %11.0f %8.3f %10.3f %11s",
			f.name(), d.sellerCallsPerRun, d.pass.Round(100*time.Millisecond), d.run.Round(100*time.Millisecond), d.period.Round(time.Second),
			d.requests, d.gbSeconds, d.rru, d.wru, d.describes, d.usd, d.usdPerBuyDay*buysPerBatch, d.detectWorst.Round(time.Second)))
	}
	lines = append(lines, "$/1000 buys is the share of 1,000 buys that each wait 24 h; DescribeExecution calls are not billed (throttled at 25/s per account and region)",
		fmt.Sprintf("%s rows: the run plans (one SQS message per seller), up to %d worker invocations at once sweep %d sellers each concurrently (pass = one shard, bounded at %s); SQS requests and the per-seller index's upkeep in $; detect ≤ is the worst case",
			fanOutNote, fanOutWorkers, sqsBatch, reconcile.DefaultShardBudget))
	for _, f := range sweepFleets {
		if !f.fanOut || !f.listing {
			continue
		}
		d := f.cost()
		if d.pass > shardBudgetMax || d.detectWorst > detectBudgetMax || d.usdPerBuyDay*buysPerBatch > sweepUSDBudget {
			lines = append(lines, fmt.Sprintf("OVER BUDGET: sweep, %s: shard %s (≤ %s), detection %s (≤ %s), $%.3f per 1,000 buys (≤ $%.2f)",
				f.name(), d.pass.Round(100*time.Millisecond), shardBudgetMax, d.detectWorst.Round(time.Second), detectBudgetMax, d.usdPerBuyDay*buysPerBatch, sweepUSDBudget))
		}
	}
	return lines
}
