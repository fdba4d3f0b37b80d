package reconcile

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/sfn"
	"github.com/buyflow/buyflow/internal/workflow"
)

// Finding kinds (the Kind dimension of metrics.ReconcileFindings).
const (
	KindLostUpdate     = "lost_update"
	KindUnknownTask    = "unknown_task"
	KindOrphan         = "orphan"
	KindExecutionEnded = "execution_ended"
	KindDeadlinePassed = "deadline_passed"
)

// The pseudo-operation that holds orphan events. Tenants are AWS account ids (or the dev
// header's value on a local stack), so no real tenant is named like this.
const (
	OrphanTenant    = "_reconcile"
	OrphanOperation = "orphans"
)

// actor is the actor of the events the sweep writes on its own account.
const actor = "system:reconcile"

// markPrefix starts every reason the sweep marks an operation with.
const markPrefix = "reconcile: "

// ledger is the part of the ledger the sweep uses; *ledger.Store satisfies it.
type ledger interface {
	// ListPendingBySeller reads one seller's pending operations (the per-seller index);
	// BackfillSellerIndex puts there the ones stored before it existed.
	ListPendingBySeller(ctx context.Context, seller string, limit int, cursor string) (record.Page[*record.Operation], error)
	BackfillSellerIndex(ctx context.Context, scanLimit int) (added int, done bool, err error)
	Transition(ctx context.Context, tenant, id string, to workflow.Status, expectedVersion int64, ch record.Patch) (*record.Operation, error)
	Advance(ctx context.Context, op *record.Operation, to workflow.Status, ch record.Patch, take bool) (*record.Operation, error)
	UpdateFields(ctx context.Context, tenant, id string, expectedVersion int64, ch record.Patch) (*record.Operation, error)
	AppendEvent(ctx context.Context, tenant, opID string, ev record.Event) error
	ClearTaskToken(ctx context.Context, tenant, id, token string) error
	// ListEvents finds where a lost task's grace began (sellertask.RecordLost).
	ListEvents(ctx context.Context, tenant, opID string, limit int, cursor string) (record.Page[record.Event], error)
	AcquireLock(ctx context.Context, name, owner string, ttl time.Duration) (record.Lease, error)
	ReleaseLock(ctx context.Context, l record.Lease) error
	// GetProgress and PutProgress keep where each seller's pass stopped between runs.
	GetProgress(ctx context.Context, seller string) (record.SweepProgress, error)
	PutProgress(ctx context.Context, p record.SweepProgress) error
	// PutSweepHeartbeat vouches for the sweep to the stages that choose the safety net.
	PutSweepHeartbeat(ctx context.Context, h record.SweepHeartbeat) error
	// The plan: the shards the last planner run handed out, and how many reported.
	GetSweepPlan(ctx context.Context) (record.SweepPlan, error)
	PutSweepPlan(ctx context.Context, p record.SweepPlan) error
	ReportShard(ctx context.Context, plan string) (record.SweepPlan, bool, error)
}

// AdCP is the part of the AdCP client the sweep uses; *adcp.Client satisfies it. Listing goes
// through Call with the tool ListTool names, because the sweep filters on fields
// adcp.ListTasksRequest does not carry (context_contains).
type AdCP interface {
	ListTool(ctx context.Context, agentID string) (string, error)
	Call(ctx context.Context, agentID, tool string, req any) (*adcp.Response, error)
	GetTaskStatus(ctx context.Context, agentID string, req adcp.GetTaskStatusRequest) (*adcp.TaskStatusResult, error)
}

// tasks completes parked task tokens; *sfn.Client satisfies it.
type tasks interface {
	Succeed(ctx context.Context, token string, output any) error
}

// executions describes the state machine's executions; *sfn.Client satisfies it.
type executions interface {
	Describe(ctx context.Context, name string) (sfn.Execution, error)
}

var (
	_ AdCP = (*adcp.Client)(nil)
)

// The per-seller budget and the sellers swept at once, unless Config says otherwise.
const (
	DefaultPollConcurrency   = 4
	DefaultPollRate          = 10.0 // reads started per second and seller
	DefaultSellerConcurrency = 16
	// DefaultShardBudget is one seller's pass at most per run: under the minute of the
	// schedule, so a seller is never held by two runs' passes at once.
	DefaultShardBudget = 50 * time.Second
)

// Config wires a Service. Ledger, AdCP, Tasks and Sellers are required.
type Config struct {
	Ledger ledger
	AdCP   AdCP
	Tasks  tasks
	// Sellers lists the sellers a plan hands a shard to (SellersOf a registry): every seller
	// that may have pending buys. A shard whose seller has none ends after one index read.
	Sellers func(ctx context.Context) ([]string, error)
	// Dispatcher hands shards to workers (Plan); without it, Run sweeps the shards itself.
	Dispatcher Dispatcher
	// PlanTimeout is how long a plan whose shards have not all reported holds off the next
	// one (default ShardBudget + Margin): shards never pile up behind a slow plan, and a
	// failed shard delays the next plan by this much at most.
	PlanTimeout time.Duration
	// Executions enables the "execution ended" check; without it the check is skipped.
	Executions executions
	// RunConfig rebuilds the wait state of a woken operation (sellertask.WakeOutput).
	RunConfig workflow.RunConfig

	// Statuses are the operation statuses compared with the sellers (default submitted,
	// working, input_required, creating). Every pending status is read, so that a task any
	// pending operation waits on is never an orphan.
	Statuses []workflow.Status
	// StaleAfter is how long an operation must go without an update before its execution is
	// described (default 30 min).
	StaleAfter time.Duration
	// DeadlineSlack is how long past its deadline a pending operation may be before it is
	// marked (default 15 min: the workflow's own timeout normally ends it first).
	DeadlineSlack time.Duration
	// OrphanRenotify is how often one orphan task is recorded again (default 24 h).
	OrphanRenotify time.Duration
	// PageSize is list_tasks' max_results (default 100, the spec's maximum).
	PageSize int
	// PollConcurrency bounds one seller's direct status reads in flight, PollRate their starts
	// per second (defaults DefaultPollConcurrency, DefaultPollRate): a run reads every pending
	// task a seller does not list, so this is the load the sweep puts on a seller without
	// list_tasks.
	PollConcurrency int
	PollRate        float64
	// SellerConcurrency is how many sellers one run sweeps at once (default
	// DefaultSellerConcurrency): a run's time, the Lambda's GB-seconds, is then the slowest
	// seller's pass, not their sum.
	SellerConcurrency int
	// MaxGenerations bounds how many continue-as-new generations are followed (default 100).
	MaxGenerations int
	// HeartbeatFor is how long a run's heartbeat vouches for the sweep (default 5 min: five
	// periods of the minute schedule, so one slow or failed run does not shorten every buy's
	// safety net). Set it to a few periods of the schedule that runs the sweep.
	HeartbeatFor time.Duration
	// ShardBudget bounds one seller's pass (a shard) in a run (default 50 s): a pass that
	// needs longer stops there, keeps its cursor and resumes next run.
	ShardBudget time.Duration
	// Margin is kept free before the Lambda deadline (default 15 s).
	Margin time.Duration
	// MaxRun bounds a run whose context has no deadline (default 2 min).
	MaxRun time.Duration
	// Deadline returns when the sweep must have stopped; default: ctx's deadline minus Margin,
	// or now + MaxRun.
	Deadline func(ctx context.Context) time.Time

	// Metrics receives the EMF lines (the function's stdout); nil discards them.
	Metrics io.Writer
	// Now is the clock (default time.Now).
	Now func() time.Time
	// NewID names the run (the lease owner); default random.
	NewID  func() string
	Logger *slog.Logger
}

// Service runs reconciliation sweeps.
type Service struct {
	cfg Config
	log *slog.Logger
}

// New checks cfg and fills its defaults.
func New(cfg Config) (*Service, error) {
	var missing []string
	if cfg.Ledger == nil {
		missing = append(missing, "Ledger")
	}
	if cfg.AdCP == nil {
		missing = append(missing, "AdCP")
	}
	if cfg.Tasks == nil {
		missing = append(missing, "Tasks")
	}
	if cfg.Sellers == nil {
		missing = append(missing, "Sellers")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("reconcile: missing %v", missing)
	}
	if len(cfg.Statuses) == 0 {
		cfg.Statuses = []workflow.Status{workflow.StatusSubmitted, workflow.StatusWorking, workflow.StatusInputRequired, workflow.StatusCreating}
	}
	for _, st := range cfg.Statuses {
		if !st.Pending() {
			return nil, fmt.Errorf("reconcile: %q is not a pending status", st)
		}
	}
	if cfg.RunConfig == (workflow.RunConfig{}) {
		cfg.RunConfig = workflow.DefaultRunConfig()
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.StaleAfter, 30*time.Minute)
	def(&cfg.DeadlineSlack, 15*time.Minute)
	def(&cfg.OrphanRenotify, 24*time.Hour)
	def(&cfg.HeartbeatFor, 5*time.Minute)
	def(&cfg.ShardBudget, DefaultShardBudget)
	def(&cfg.Margin, 15*time.Second)
	def(&cfg.MaxRun, 2*time.Minute)
	def(&cfg.PlanTimeout, planTimeout(cfg))
	if cfg.PageSize <= 0 || cfg.PageSize > 100 {
		cfg.PageSize = 100
	}
	if cfg.PollConcurrency <= 0 {
		cfg.PollConcurrency = DefaultPollConcurrency
	}
	if cfg.PollRate <= 0 {
		cfg.PollRate = DefaultPollRate
	}
	if cfg.SellerConcurrency <= 0 {
		cfg.SellerConcurrency = DefaultSellerConcurrency
	}
	if cfg.MaxGenerations <= 0 {
		cfg.MaxGenerations = 100
	}
	if cfg.Metrics == nil {
		cfg.Metrics = io.Discard
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.NewID == nil {
		cfg.NewID = randomID
	}
	if cfg.Deadline == nil {
		margin, maxRun, now := cfg.Margin, cfg.MaxRun, cfg.Now
		cfg.Deadline = func(ctx context.Context) time.Time {
			if d, ok := ctx.Deadline(); ok {
				return d.Add(-margin)
			}
			return now().Add(maxRun)
		}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Service{cfg: cfg, log: log}, nil
}

// Summary is what one run did; it is the Lambda's output (no ids of operations, no tokens).
type Summary struct {
	RunID   string         `json:"run_id"`
	Pending map[string]int `json:"pending"`
	// Reconciled are the sellers whose pass completed; Incomplete those stopped by the time
	// budget (resumed next run); Skipped those another run held; Deferred those not reached.
	Reconciled []string       `json:"reconciled"`
	Incomplete []string       `json:"incomplete,omitempty"`
	Skipped    []string       `json:"skipped,omitempty"`
	Deferred   []string       `json:"deferred,omitempty"`
	Failed     []string       `json:"failed,omitempty"`
	Findings   map[string]int `json:"findings"`
	// Partial is true when the ledger could not be read completely within the budget: a
	// seller's pending operations, or the per-seller index's backfill, not finished.
	Partial bool `json:"partial,omitempty"`
	// Plan is the plan this planner run made and Shards its number of shards; Waiting is true
	// when it made none because the last plan's shards were still running.
	Plan    string `json:"plan,omitempty"`
	Shards  int    `json:"shards,omitempty"`
	Waiting bool   `json:"waiting,omitempty"`
}

// Handle is the scheduled Lambda handler (the EventBridge Scheduler event is ignored): Plan
// when shards go to workers (Config.Dispatcher), else Run.
func (s *Service) Handle(ctx context.Context, _ json.RawMessage) (Summary, error) {
	if s.cfg.Dispatcher != nil {
		return s.Plan(ctx)
	}
	return s.Run(ctx)
}

// run is the state of one sweep; sellers are swept concurrently, so sum is written under mu.
type run struct {
	id       string
	deadline time.Time
	rec      *metrics.Recorder
	mu       sync.Mutex
	sum      *Summary
	// noDescribe is set once Step Functions refused DescribeExecution (a missing IAM grant):
	// the check is skipped for the rest of the run instead of failing once per operation.
	noDescribe atomic.Bool
}

// note appends seller to one of the summary's seller lists.
func (r *run) note(list *[]string, seller string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	*list = append(*list, seller)
}

func (s *Service) now() time.Time { return s.cfg.Now().UTC() }

func (r *run) out(now time.Time) bool { return !now.Before(r.deadline) }

// shard is one seller's pass within a run: the unit a fan-out hands to a worker. Its own
// deadline (Config.ShardBudget after it starts, never past the run's) bounds it in time
// whatever the run's budget, so a slow seller stops, stores its cursor and resumes next run
// instead of holding a worker.
type shard struct {
	*run
	deadline time.Time
}

func (r *shard) out(now time.Time) bool { return !now.Before(r.deadline) }

func (r *run) finding(kind string) {
	r.mu.Lock()
	r.sum.Findings[kind]++
	r.mu.Unlock()
	r.rec.Count(metrics.ReconcileFindings, metrics.Dims{"Kind": kind}, 1)
}

// Run sweeps once in this invocation: a plan of one shard per seller, each shard run here
// (SellerConcurrency at once) as a worker would run it. It returns an error only when the plan
// cannot be made; a failing seller is reported in the summary (Failed) and the logs.
func (s *Service) Run(ctx context.Context) (Summary, error) {
	r := s.newRun(ctx)
	defer s.flush(ctx, r)
	err := s.plan(ctx, r, false, s.inProcess(r))
	sortSellers(r.sum)
	s.logSummary(ctx, r, "reconciliation sweep")
	return *r.sum, err
}

// sortSellers sorts the summary's seller lists: the order the sellers finished in says nothing.
func sortSellers(sum *Summary) {
	for _, l := range []*[]string{&sum.Reconciled, &sum.Incomplete, &sum.Skipped, &sum.Deferred, &sum.Failed} {
		slices.Sort(*l)
	}
}

func (s *Service) newRun(ctx context.Context) *run {
	r := &run{id: s.cfg.NewID(), deadline: s.cfg.Deadline(ctx),
		rec: metrics.New(s.cfg.Metrics, metrics.Namespace, s.cfg.Now),
		sum: &Summary{Pending: map[string]int{}, Findings: map[string]int{}, Reconciled: []string{}}}
	r.sum.RunID = r.id
	return r
}

func (s *Service) flush(ctx context.Context, r *run) {
	if err := r.rec.Flush(); err != nil {
		s.log.WarnContext(ctx, "metrics not written", "err", err)
	}
}

func (s *Service) logSummary(ctx context.Context, r *run, msg string) {
	s.log.InfoContext(ctx, msg, "runId", r.id, "plan", r.sum.Plan, "shards", r.sum.Shards, "waiting", r.sum.Waiting,
		"pending", r.sum.Pending, "reconciled", len(r.sum.Reconciled),
		"incomplete", r.sum.Incomplete, "skipped", r.sum.Skipped, "deferred", r.sum.Deferred, "failed", r.sum.Failed,
		"findings", r.sum.Findings, "partial", r.sum.Partial)
}

// heartbeat stores the sweep's heartbeat for a plan made at start; a failed write only
// shortens the safety nets chosen meanwhile, so it is logged, not returned.
func (s *Service) heartbeat(ctx context.Context, start time.Time) {
	if err := s.cfg.Ledger.PutSweepHeartbeat(ctx, record.SweepHeartbeat{At: start, Until: start.Add(s.cfg.HeartbeatFor)}); err != nil {
		s.log.WarnContext(ctx, "sweep heartbeat not stored", "err", err)
	}
}

// sweepSellerLeased holds the seller's lease around one pass.
func (s *Service) sweepSellerLeased(ctx context.Context, r *run, seller string, ops []*record.Operation, prog record.SweepProgress) {
	sh := &shard{run: r, deadline: r.deadline}
	if d := s.now().Add(s.cfg.ShardBudget); d.Before(sh.deadline) {
		sh.deadline = d
	}
	// The lease outlives the budget a little, so it never lapses while this run still works;
	// the run releases it as soon as the pass stops.
	ttl := sh.deadline.Sub(s.now()) + s.cfg.Margin
	lease, err := s.cfg.Ledger.AcquireLock(ctx, record.ReconcileLock(seller), r.id, ttl)
	var held *record.LockHeldError
	switch {
	case errors.As(err, &held):
		s.log.InfoContext(ctx, "seller reconciled by another run", "seller", seller, "until", held.Holder.ExpiresAt)
		r.note(&r.sum.Skipped, seller)
		return
	case err != nil:
		s.log.ErrorContext(ctx, "reconcile lease not acquired", "seller", seller, "err", err)
		r.note(&r.sum.Failed, seller)
		return
	}
	defer func() {
		// A fresh context: the lease must be released even when ctx is done.
		if err := s.cfg.Ledger.ReleaseLock(context.WithoutCancel(ctx), lease); err != nil {
			s.log.WarnContext(ctx, "reconcile lease not released", "seller", seller, "err", err)
		}
	}()
	complete, err := s.sweepSeller(ctx, sh, seller, ops, prog, lease.Fence)
	switch {
	case err != nil:
		s.log.ErrorContext(ctx, "seller not reconciled", "seller", seller, "err", err)
		r.note(&r.sum.Failed, seller)
	case complete:
		r.note(&r.sum.Reconciled, seller)
	default:
		r.note(&r.sum.Incomplete, seller)
	}
}

func randomID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return "reconcile-" + hex.EncodeToString(b[:])
}
