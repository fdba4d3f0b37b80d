package reconcile

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/registry"
	"github.com/buyflow/buyflow/internal/workflow"
)

// ShardMessage is one shard of a plan: one seller's pass, as the planner hands it to a worker
// (the body of one queue message). It carries no operations: the worker reads its seller's
// pending operations from the ledger's per-seller index, so a message stays small whatever
// the seller's backlog.
type ShardMessage struct {
	Plan   string `json:"plan"`
	Seller string `json:"seller"`
}

// Dispatcher hands a plan's shards to workers that run them in their own invocations
// (internal/sweepqueue: one SQS message per shard, whose event source mapping invokes the
// worker with Shards). Dispatch returns once every shard was handed out, not run; an error
// names the shards it could not hand out, and their plan then earns no heartbeat.
type Dispatcher interface {
	Dispatch(ctx context.Context, shards []ShardMessage) error
}

// SellersOf lists the sellers of a registry (*registry.Cache's All) for Config.Sellers:
// disabled ones too, since their open buys still finish.
func SellersOf(all func(context.Context) ([]registry.Record, error)) func(context.Context) ([]string, error) {
	return func(ctx context.Context) ([]string, error) {
		recs, err := all(ctx)
		if err != nil {
			return nil, err
		}
		var out []string
		for _, r := range recs {
			if r.Role == adcp.RoleSeller {
				out = append(out, r.ID)
			}
		}
		return out, nil
	}
}

// backfillScan is how many items one BackfillSellerIndex call scans, and backfillFor how long
// one plan continues the backfill at most: on a large table it takes many plans, and the shards
// must still run meanwhile (they sweep the operations already indexed; the others keep their
// short per-buy safety net, since no heartbeat is stored until the backfill is done).
const (
	backfillScan = 1000
	backfillFor  = 10 * time.Second
)

// plan is a planner run: it finishes the per-seller index's backfill if it can, and, unless
// wait finds the previous plan's shards still running, stores a new plan of one shard per
// seller and hands the shards to dispatch. The shards themselves store the heartbeat: the
// one that completes a plan vouches for the sweep (Service.report).
func (s *Service) plan(ctx context.Context, r *run, wait bool, dispatch func(context.Context, []ShardMessage) error) error {
	indexed := false
	for until := s.now().Add(backfillFor); s.now().Before(until) && !r.out(s.now()); {
		_, done, err := s.cfg.Ledger.BackfillSellerIndex(ctx, backfillScan)
		if err != nil {
			// The plan goes on: only operations stored before the index are missed, and the
			// heartbeat waits for the backfill (Indexed stays false).
			s.log.WarnContext(ctx, "per-seller pending index not backfilled", "err", err)
			break
		}
		if indexed = done; done {
			break
		}
	}
	if !indexed {
		r.sum.Partial = true
	}
	if wait {
		prev, err := s.cfg.Ledger.GetSweepPlan(ctx)
		if err != nil {
			return fmt.Errorf("reconcile: read the last plan: %w", err)
		}
		if !prev.Complete() && prev.ID != "" && s.now().Before(prev.At.Add(s.cfg.PlanTimeout)) {
			s.log.InfoContext(ctx, "the last plan's shards are still running", "plan", prev.ID, "shards", prev.Shards, "reported", prev.Reported)
			r.sum.Waiting = true
			return nil
		}
	}
	sellers, err := s.cfg.Sellers(ctx)
	if err != nil {
		return fmt.Errorf("reconcile: list the sellers: %w", err)
	}
	slices.Sort(sellers)
	sellers = slices.Compact(sellers)
	p := record.SweepPlan{ID: r.id, At: s.now(), Shards: len(sellers), Indexed: indexed}
	if err := s.cfg.Ledger.PutSweepPlan(ctx, p); err != nil {
		return fmt.Errorf("reconcile: store the plan: %w", err)
	}
	r.sum.Plan, r.sum.Shards = p.ID, p.Shards
	if len(sellers) == 0 {
		s.vouch(ctx, p)
		return nil
	}
	shards := make([]ShardMessage, len(sellers))
	for i, seller := range sellers {
		shards[i] = ShardMessage{Plan: p.ID, Seller: seller}
	}
	return dispatch(ctx, shards)
}

// inProcess runs the shards in this invocation, SellerConcurrency at once, into r's summary:
// the sellers least recently completed first, so that one the run's deadline cut off goes
// first next time. A shard not started before r's deadline is deferred and does not report, so
// that plan earns no heartbeat.
func (s *Service) inProcess(r *run) func(context.Context, []ShardMessage) error {
	return func(ctx context.Context, shards []ShardMessage) error {
		progress := make(map[string]*record.SweepProgress, len(shards))
		for _, m := range shards {
			p, err := s.cfg.Ledger.GetProgress(ctx, m.Seller)
			if err != nil {
				s.log.WarnContext(ctx, "reconcile progress not read", "seller", m.Seller, "err", err)
			}
			progress[m.Seller] = &p
		}
		slices.SortFunc(shards, func(a, b ShardMessage) int {
			return cmp.Or(progress[a.Seller].LastPass.Compare(progress[b.Seller].LastPass), cmp.Compare(a.Seller, b.Seller))
		})
		slots := make(chan struct{}, s.cfg.SellerConcurrency)
		var wg sync.WaitGroup
		for _, m := range shards {
			slots <- struct{}{}
			if r.out(s.now()) {
				<-slots
				r.note(&r.sum.Deferred, m.Seller)
				continue
			}
			wg.Go(func() {
				defer func() { <-slots }()
				if err := s.shard(ctx, r, m, progress[m.Seller]); err != nil {
					s.log.ErrorContext(ctx, "shard not swept", "seller", m.Seller, "err", err)
					r.note(&r.sum.Failed, m.Seller)
				}
			})
		}
		wg.Wait()
		return nil
	}
}

// Plan is the scheduled planner's run when shards go to workers (Config.Dispatcher): no new
// plan while the last one's shards run (until PlanTimeout after it), else one shard per
// seller handed to the Dispatcher.
func (s *Service) Plan(ctx context.Context) (Summary, error) {
	if s.cfg.Dispatcher == nil {
		return Summary{}, fmt.Errorf("reconcile: Plan needs a Dispatcher")
	}
	r := s.newRun(ctx)
	defer s.flush(ctx, r)
	err := s.plan(ctx, r, true, s.cfg.Dispatcher.Dispatch)
	s.logSummary(ctx, r, "reconciliation plan")
	return *r.sum, err
}

// Shards is a worker's run: a batch of shards (a queue's, each the message of one seller's
// pass of its plan), SellerConcurrency at once, in this invocation and its one summary. errs[i]
// is shard i's failure: its seller's pending operations could not be read, so it did not
// report to its plan (the queue delivers that message again, alone). A seller whose pass
// failed otherwise is in the summary's Failed and its shard reported, exactly as in Run.
func (s *Service) Shards(ctx context.Context, shards []ShardMessage) (sum Summary, errs []error) {
	r := s.newRun(ctx)
	defer s.flush(ctx, r)
	errs = make([]error, len(shards))
	slots := make(chan struct{}, s.cfg.SellerConcurrency)
	var wg sync.WaitGroup
	for i, m := range shards {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			if errs[i] = s.shard(ctx, r, m, nil); errs[i] != nil {
				s.log.ErrorContext(ctx, "shard not swept", "plan", m.Plan, "seller", m.Seller, "err", errs[i])
				r.note(&r.sum.Failed, m.Seller)
			}
		})
	}
	wg.Wait()
	sortSellers(r.sum)
	s.logSummary(ctx, r, "reconciliation shards")
	return *r.sum, errs
}

// shard reads the seller's pending operations from the per-seller index and sweeps them under
// the seller's lease, read budget, retry_after deferral and cursor; then it reports to the
// plan, unless the read was cut short (the plan then earns no heartbeat). known is the
// seller's progress when the caller read it already (nil: read here, if anything is pending).
func (s *Service) shard(ctx context.Context, r *run, m ShardMessage, known *record.SweepProgress) error {
	ops, complete, err := s.readSeller(ctx, r, m.Seller)
	if err != nil {
		return err
	}
	if len(ops) > 0 {
		var prog record.SweepProgress
		if known != nil {
			prog = *known
		} else if prog, err = s.cfg.Ledger.GetProgress(ctx, m.Seller); err != nil {
			s.log.WarnContext(ctx, "reconcile progress not read", "seller", m.Seller, "err", err)
		}
		if nb := prog.NotBefore; s.now().Before(nb) {
			s.log.InfoContext(ctx, "seller not called before its retry_after", "seller", m.Seller, "notBefore", nb)
			r.note(&r.sum.Deferred, m.Seller)
		} else {
			s.sweepSellerLeased(ctx, r, m.Seller, ops, prog)
		}
	}
	if complete {
		s.report(ctx, m.Plan)
	}
	return nil
}

// readSeller reads the seller's pending operations (the per-seller index, pages of
// MaxListLimit) and counts them by status. complete is false when the run's deadline cut the
// read short.
func (s *Service) readSeller(ctx context.Context, r *run, seller string) (ops []*record.Operation, complete bool, err error) {
	byStatus := map[workflow.Status]int{}
	cursor := ""
	for {
		if r.out(s.now()) {
			r.mu.Lock()
			r.sum.Partial = true
			r.mu.Unlock()
			return ops, false, nil
		}
		page, err := s.cfg.Ledger.ListPendingBySeller(ctx, seller, record.MaxListLimit, cursor)
		if err != nil {
			return nil, false, fmt.Errorf("reconcile: read the pending operations of %s: %w", seller, err)
		}
		for _, op := range page.Items {
			byStatus[op.Status]++
		}
		ops = append(ops, page.Items...)
		if cursor = page.Cursor; cursor == "" {
			break
		}
	}
	// Counts add up in the invocation's recorder: Run emits the fleet's count, a worker's
	// Shard its seller's.
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, st := range workflow.Statuses {
		if st.Pending() {
			r.sum.Pending[string(st)] += byStatus[st]
			r.rec.Count(metrics.PendingOperations, metrics.Dims{"Stage": string(st)}, byStatus[st])
		}
	}
	return ops, true, nil
}

// report counts the shard in its plan; the shard that completes a plan made with every
// pending operation on the index vouches for the sweep. A report that is not stored only
// withholds one heartbeat, so it is logged, not returned.
func (s *Service) report(ctx context.Context, plan string) {
	p, current, err := s.cfg.Ledger.ReportShard(ctx, plan)
	switch {
	case err != nil:
		s.log.WarnContext(ctx, "shard not reported to its plan", "plan", plan, "err", err)
	case !current:
		s.log.InfoContext(ctx, "shard of a replaced plan: not counted", "plan", plan)
	case p.Reported == p.Shards:
		s.vouch(ctx, p)
	}
}

// vouch stores the heartbeat of a complete plan (one made with every pending operation on the
// index): fresh for HeartbeatFor from when the plan was made.
func (s *Service) vouch(ctx context.Context, p record.SweepPlan) {
	if !p.Indexed {
		return
	}
	s.heartbeat(ctx, p.At)
}

// planTimeout is Config.PlanTimeout's default: a plan's shards are over one shard budget and
// the margin after it, unless one failed or waited in the queue.
func planTimeout(cfg Config) time.Duration { return cfg.ShardBudget + cfg.Margin }
