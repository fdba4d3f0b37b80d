// Package delivery reads what live buys delivered: on a cadence that follows each buy's
// flight (often at launch and near the end, daily in between, once after the end, when the buy
// leaves the live list), get_media_buy_delivery for every completed buy whose read is due (one
// call per seller and account, for all its due buys), a delivery snapshot in the ledger when
// the delivery moved since the last one (impressions, spend, pacing, and the budget approved
// then), an event on the buy's timeline showing spend against the approved budget, and the
// SpendOverBudget metric when a buy spent past it.
package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/buy"
	"github.com/buyflow/buyflow/internal/jsonnum"
	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/money"
	"github.com/buyflow/buyflow/internal/record"
)

// Store is the part of the ledger the reader uses; *ledger.Store satisfies it.
type Store interface {
	ListLiveDue(ctx context.Context, dueBefore time.Time, limit int) ([]*record.Operation, error)
	BackfillLive(ctx context.Context, scanLimit int) (added int, done bool, err error)
	ScheduleLive(ctx context.Context, op *record.Operation, next time.Time, mark string) error
	RetireLive(ctx context.Context, tenant, id string) error
	GetBuyState(ctx context.Context, tenant, opID string) (*record.BuyState, error)
	PutDeliverySnapshot(ctx context.Context, d record.DeliverySnapshot) (stored bool, replaced *record.DeliverySnapshot, err error)
	ListDeliverySnapshots(ctx context.Context, tenant, opID string, limit int) ([]record.DeliverySnapshot, error)
	MarkDeliveryPushed(ctx context.Context, tenant, id string) error
	AppendEvent(ctx context.Context, tenant, opID string, ev record.Event) error
}

// adCP is the part of the AdCP client the reader uses; *adcp.Client satisfies it.
type adCP interface {
	GetMediaBuyDelivery(ctx context.Context, agentID string, req adcp.GetMediaBuyDeliveryRequest) (*adcp.DeliveryReport, error)
	// Capabilities tells a seller that pushes its reports (the client caches the answer).
	Capabilities(ctx context.Context, agentID string) (*adcp.Capabilities, error)
}

// The Reader's defaults: at most DefaultBatch buys a run, and DefaultBackfillScan ledger items
// scanned a run until the backfill is done. When each buy is read is its Cadence's.
const (
	DefaultBatch        = 200
	defaultBackfillScan = 1000
)

// Config holds a Reader's settings.
type Config struct {
	// Cadence decides when each buy is read next, from its flight.
	Cadence Cadence
	// Batch bounds the buys read in one run (default DefaultBatch); the rest are read on the
	// next run.
	Batch int
	// BackfillScan bounds the ledger items one run scans for buys completed before the live
	// list existed (default DefaultBackfillScan), until the backfill has covered the table once.
	BackfillScan int
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Metrics receives SpendOverBudget; nil records nothing.
	Metrics *metrics.Recorder
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Reader reads delivery; it is safe for one run at a time.
type Reader struct {
	ledger Store
	adcp   adCP
	cfg    Config
	log    *slog.Logger
	// backfilled is set once the ledger says the backfill is done: a warm function then stops
	// asking.
	backfilled bool
}

// New returns a Reader. A Reader that only records pushed reports (Push) needs no AdCP client:
// a nil one.
func New(l Store, a adCP, cfg Config) *Reader {
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.BackfillScan <= 0 {
		cfg.BackfillScan = defaultBackfillScan
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Reader{ledger: l, adcp: a, cfg: cfg, log: log}
}

// Report is what one run did.
type Report struct {
	Read, Snapshots, OverBudget, Retired, Failed int
	// Unchanged counts the buys read whose delivery had not moved since their last snapshot:
	// nothing was written for them but their next read.
	Unchanged int
	// Corrected counts the snapshots (among Snapshots) that replaced what the seller had
	// reported before for the same as-of.
	Corrected int
	// Backfilled counts the buys completed before the live list that this run listed live.
	Backfilled int
	// Watched counts the pushed buys due for a watchdog pull whose seller had pushed within
	// Cadence.PushAlive: rescheduled (or retired) without a call.
	Watched int
}

// group is the due buys of one seller and account: one call reads them all.
type group struct {
	seller  string
	account adcp.AccountRef
	buys    map[string]*record.Operation // media buy id → operation
	// flights holds what each buy's read needs besides its operation (by media buy id).
	flights map[string]flight
}

// flight is one buy's flight, as its request and its later changes set it (a cancellation
// ends it: canceledEnd), and its approved budget now (both from the buy state).
type flight struct {
	start, end time.Time
	approved   string
}

// Run first lists live, within BackfillScan, buys completed before the live list existed
// (until the backfill is done), then reads every buy that is due, at most Batch of them. A
// seller that fails is logged and its buys are read again on the next run; the others go on.
func (r *Reader) Run(ctx context.Context) (Report, error) {
	var rep Report
	now := r.cfg.Now().UTC()
	if !r.backfilled {
		n, done, err := r.ledger.BackfillLive(ctx, r.cfg.BackfillScan)
		if err != nil {
			r.log.WarnContext(ctx, "live backfill failed; the next run goes on", "err", err)
		}
		rep.Backfilled, r.backfilled = n, done
	}
	ops, err := r.ledger.ListLiveDue(ctx, now, r.cfg.Batch)
	if err != nil {
		return rep, err
	}
	groups := map[string]*group{}
	var order []string
	for _, op := range ops {
		if op.Kind == record.KindModification || op.MediaBuyID == "" {
			r.retire(ctx, op, &rep) // a change delivers nothing; a buy without a seller id cannot be read
			continue
		}
		var req buy.SubmitRequest
		var mb struct {
			Account   adcp.AccountRef `json:"account"`
			StartTime string          `json:"start_time"`
			EndTime   string          `json:"end_time"`
		}
		if json.Unmarshal(op.Request, &req) != nil || json.Unmarshal(req.MediaBuy, &mb) != nil {
			r.retire(ctx, op, &rep)
			continue
		}
		// "asap" (or no start) starts the flight when the buy was submitted.
		fl := flight{start: op.CreatedAt, approved: op.BudgetTotal}
		if t, err := time.Parse(time.RFC3339, mb.StartTime); err == nil {
			fl.start = t
		}
		fl.end, _ = time.Parse(time.RFC3339, mb.EndTime)
		if st, err := r.ledger.GetBuyState(ctx, op.Tenant, op.ID); err == nil {
			fl.approved = st.BudgetTotal
			if t, err := time.Parse(time.RFC3339, st.EndTime); err == nil {
				fl.end = t // a change moved the end
			}
			if st.State == record.BuyStateCanceled {
				fl.end = canceledEnd(fl.end, st.UpdatedAt, now)
			}
		}
		if op.DeliveryPushed {
			// Pushes write snapshots without touching the live list, so the mark it carries is
			// the last pull's: a watchdog pull compares with the newest snapshot instead (a
			// read of one small item, for the few pulls of a pushed buy).
			last, err := r.ledger.ListDeliverySnapshots(ctx, op.Tenant, op.ID, 1)
			if err != nil {
				r.log.WarnContext(ctx, "last delivery snapshot not read; the next run reads the buy", "operationId", op.ID, "err", err)
				continue
			}
			if len(last) == 1 {
				op.DeliveryMark = mark(last[0])
			}
			if len(last) == 1 && r.cfg.Cadence.pushAlive(last[0], now) {
				// The watchdog is for a push channel gone quiet, and this one is not: the
				// seller is not asked, and nothing is written but the next watch.
				r.watch(ctx, op, fl, now, &rep)
				continue
			}
		}
		acct, _ := json.Marshal(mb.Account)
		k := op.SellerID + "\x00" + string(acct)
		g, ok := groups[k]
		if !ok {
			g = &group{seller: op.SellerID, account: mb.Account, buys: map[string]*record.Operation{}, flights: map[string]flight{}}
			groups[k] = g
			order = append(order, k)
		}
		g.buys[op.MediaBuyID] = op
		g.flights[op.MediaBuyID] = fl
	}
	for _, k := range order {
		r.read(ctx, groups[k], now, &rep)
	}
	return rep, nil
}

// watch reschedules a pushed buy whose push channel is alive, without reading it: its next
// watch, or its retirement when the flight is over (the seller's reports carried its end).
func (r *Reader) watch(ctx context.Context, op *record.Operation, fl flight, now time.Time, rep *Report) {
	rep.Watched++
	next, last := r.cfg.Cadence.NextPushed(now, fl.start, fl.end)
	if last {
		r.retire(ctx, op, rep)
		return
	}
	if err := r.ledger.ScheduleLive(ctx, op, next, ""); err != nil && !errors.Is(err, record.ErrConflict) {
		r.log.WarnContext(ctx, "next delivery watch not scheduled", "operationId", op.ID, "err", err)
	}
}

// canceledEnd is the end of a canceled buy's flight: its cancellation (when the buy's state
// recorded it; now for a state that kept no time), unless the flight had ended before. From
// there the buy is read as any buy at its flight's end: at its due read (what it delivered up
// to the cancellation) and a final time Cadence.FinalAfter later, when sellers have finalized
// what it delivered (AdCP reports a canceled buy's delivery, is_final on the last report),
// then it leaves the live list. Retired at once, a buy canceled mid-flight kept a snapshot up
// to a day older than the cancellation, short of what the seller bills.
func canceledEnd(end, canceledAt, now time.Time) time.Time {
	if canceledAt.IsZero() {
		canceledAt = now
	}
	if end.IsZero() || canceledAt.Before(end) {
		return canceledAt
	}
	return end
}

func (r *Reader) retire(ctx context.Context, op *record.Operation, rep *Report) {
	if err := r.ledger.RetireLive(ctx, op.Tenant, op.ID); err != nil && !errors.Is(err, record.ErrConflict) {
		r.log.WarnContext(ctx, "live operation not retired", "operationId", op.ID, "err", err)
		return
	}
	rep.Retired++
}

// read asks one seller for its due buys and records what it reports.
func (r *Reader) read(ctx context.Context, g *group, now time.Time, rep *Report) {
	ids := make([]string, 0, len(g.buys))
	for id := range g.buys {
		ids = append(ids, id)
	}
	res, err := r.adcp.GetMediaBuyDelivery(ctx, g.seller, adcp.GetMediaBuyDeliveryRequest{Account: &g.account, MediaBuyIDs: ids})
	if err != nil {
		rep.Failed += len(ids)
		r.log.WarnContext(ctx, "delivery not read", "seller", g.seller, "buys", len(ids), "err", err)
		return
	}
	asOf := now
	if t, err := time.Parse(time.RFC3339, res.ReportingPeriod.End); err == nil {
		asOf = t
	}
	marks := map[string]string{} // media buy id → the mark of the snapshot this read stored
	for _, row := range res.MediaBuys {
		op, ok := g.buys[row.MediaBuyID]
		if !ok {
			continue // a buy the seller reports that this read did not ask for
		}
		rep.Read++
		mark, err := r.record(ctx, op, g.flights[row.MediaBuyID].approved, row, res.Currency, asOf, nil, rep)
		if err != nil {
			rep.Failed++
			r.log.WarnContext(ctx, "delivery not recorded", "operationId", op.ID, "err", err)
			continue
		}
		marks[row.MediaBuyID] = mark
	}
	// The create registered a reporting_webhook at a seller whose capabilities offer push (the
	// same test, create.createIntent): its buys' first report is due within the launch window,
	// which they need not be pulled through. Capabilities not readable: pulled as usual.
	asked := false
	for _, op := range g.buys {
		if !op.DeliveryPushed {
			caps, err := r.adcp.Capabilities(ctx, g.seller)
			asked = err == nil && caps.PushesDelivery()
			break
		}
	}
	for id, op := range g.buys {
		fl := g.flights[id]
		next, last := r.cfg.Cadence.next(now, fl.start, fl.end, op.DeliveryPushed)
		if asked && !op.DeliveryPushed {
			next, last = r.cfg.Cadence.NextPushAsked(now, fl.start, fl.end)
		}
		if last {
			r.retire(ctx, op, rep) // the flight ended and its final read is in
			continue
		}
		if err := r.ledger.ScheduleLive(ctx, op, next, marks[id]); err != nil && !errors.Is(err, record.ErrConflict) {
			r.log.WarnContext(ctx, "next delivery read not scheduled", "operationId", op.ID, "err", err)
		}
	}
}

// record stores one buy's reported delivery and, for a new snapshot, its timeline event. A
// report that matches the buy's last snapshot (its DeliveryMark) moved nothing: it stores
// nothing, since a snapshot per read of an unmoved buy is most of what reading costs. It
// returns the mark of the snapshot it stored ("" when it stored none). push is the pushed
// delivery that reported it, nil for a pull.
func (r *Reader) record(ctx context.Context, op *record.Operation, approved string, row adcp.MediaBuyDelivery, currency string, asOf time.Time, push *pushed, rep *Report) (string, error) {
	if currency == "" {
		currency = op.Currency
	}
	if currency != op.Currency {
		return "", fmt.Errorf("the seller reports delivery in %s, the buy is in %s", currency, op.Currency)
	}
	spend, ok := decimal(row.Totals.Spend)
	if !ok {
		return "", fmt.Errorf("the seller reports spend %q, not a decimal amount of 0 or more", row.Totals.Spend)
	}
	impressions, _ := strconv.ParseInt(string(row.Totals.Impressions), 10, 64)
	snap := record.DeliverySnapshot{Tenant: op.Tenant, OperationID: op.ID, MediaBuyID: op.MediaBuyID, AsOf: asOf,
		Impressions: impressions, Spend: spend, Currency: op.Currency, Approved: approved, Pushed: push != nil}
	if push != nil {
		snap.PushKey, snap.PushHash = push.key, push.hash
	}
	if len(row.ByPackage) == 1 {
		if p, ok := decimal(row.ByPackage[0].PacingIndex); ok {
			snap.Pacing = p
		}
	}
	m := mark(snap)
	if m == op.DeliveryMark {
		rep.Unchanged++
		return "", nil
	}
	stored, replaced, err := r.ledger.PutDeliverySnapshot(ctx, snap)
	if err != nil || !stored {
		return "", err
	}
	rep.Snapshots++
	over := money.OverBudget(spend, approved)
	reason := fmt.Sprintf("spent %s of the approved %s %s", spend, approved, op.Currency)
	fields := map[string]any{"as_of": asOf.Format(time.RFC3339), "impressions": impressions, "spend": spend,
		"approved_budget": approved, "media_buy_status": row.Status}
	if replaced != nil {
		// The seller corrected what it reported for this as-of: the snapshot now says the
		// corrected figures, and the timeline keeps what they replaced.
		rep.Corrected++
		reason = fmt.Sprintf("corrected: spent %s of the approved %s %s (reported before: %s)", spend, approved, op.Currency, replaced.Spend)
		fields["corrected"] = true
		fields["replaced"] = map[string]any{"impressions": replaced.Impressions, "spend": replaced.Spend, "pacing": replaced.Pacing,
			"approved_budget": replaced.Approved, "read_at": replaced.ReadAt.UTC().Format(time.RFC3339)}
	}
	if over {
		rep.OverBudget++
		reason = fmt.Sprintf("spent %s %s, over the approved budget of %s", spend, op.Currency, approved)
		if replaced != nil {
			reason = "corrected: " + reason
		}
		if r.cfg.Metrics != nil {
			r.cfg.Metrics.Count(metrics.SpendOverBudget, nil, 1) // the alarm's series
			r.cfg.Metrics.Count(metrics.SpendOverBudget, metrics.Dims{"Seller": op.SellerID}, 1)
		}
		r.log.WarnContext(ctx, "spend over the approved budget", "operationId", op.ID, "spend", spend, "approved", approved, "currency", op.Currency)
	}
	fields["over_budget"] = over
	detail, _ := json.Marshal(fields)
	if err := r.ledger.AppendEvent(ctx, op.Tenant, op.ID, record.Event{At: r.cfg.Now().UTC(), Type: record.EventDelivery, Actor: "seller:" + op.SellerID,
		Amount: spend, Currency: op.Currency, Reason: reason, Detail: detail}); err != nil {
		return "", err
	}
	return m, nil
}

// mark is what a snapshot says that a reader compares: delivered, spent, pacing, and the
// budget it was measured against. The as-of is left out on purpose: a seller stamps every
// answer with a new reporting period even when nothing moved.
func mark(s record.DeliverySnapshot) string {
	return strings.Join([]string{strconv.FormatInt(s.Impressions, 10), s.Spend, s.Pacing, s.Approved}, "|")
}

// Push records a delivery report the seller pushed for op's buy (its reporting_webhook), after
// the webhook receiver verified the delivery, whose idempotency key is key: as a read's report,
// a snapshot and a timeline event only when the delivery moved, compared here with the buy's
// last snapshot (a push writes nothing else on the operation). Rows about other media buys are
// ignored. The first push marks the buy pushed, so that the scheduled read pulls it only as a
// watchdog from then on. It reports whether a snapshot (and its timeline event) was written,
// and, when the delivery carries the key of the one that wrote the buy's newest snapshot
// (nothing was done), that snapshot (its PushHash is that delivery's payload hash, "" for one
// stored before hashes were kept), for the receiver's retry rules. A report for an operation that delivers nothing (a change, a buy the
// seller has not placed) is an error matching record.ErrConflict.
//
// The snapshot is the report's receipt: it is stored once per (buy, as-of) with its figures
// and the key of the delivery that wrote it, by a conditional put, so a redelivery (the
// seller's retry, or two copies at once) writes nothing, and one of the newest snapshot is
// answered as a duplicate, without a receipt of its own. hash is the delivery's payload hash,
// kept on the snapshot it writes.
func (r *Reader) Push(ctx context.Context, op *record.Operation, res *adcp.DeliveryReport, key, hash string) (moved bool, prior *record.DeliverySnapshot, err error) {
	rep, prior, err := r.push(ctx, op, res, key, hash)
	return rep.Snapshots > 0, prior, err
}

// pushed is the delivery a pushed report came in: its idempotency key and payload hash.
type pushed struct{ key, hash string }

func (r *Reader) push(ctx context.Context, op *record.Operation, res *adcp.DeliveryReport, key, hash string) (rep Report, prior *record.DeliverySnapshot, err error) {
	notLive := fmt.Errorf("delivery: operation %s is not a live buy: %w", op.ID, record.ErrConflict)
	if op.Kind == record.KindModification || op.MediaBuyID == "" {
		return rep, nil, notLive
	}
	approved := op.BudgetTotal
	// A canceled buy's reports are recorded too: what it delivered up to the cancellation is
	// what the seller bills, and its final report may come days later (canceledEnd).
	switch st, err := r.ledger.GetBuyState(ctx, op.Tenant, op.ID); {
	case err == nil:
		approved = st.BudgetTotal
	case !errors.Is(err, record.ErrNotFound):
		return rep, nil, err
	}
	last, err := r.ledger.ListDeliverySnapshots(ctx, op.Tenant, op.ID, 1)
	if err != nil {
		return rep, nil, err
	}
	if len(last) == 1 && key != "" && last[0].PushKey == key {
		return rep, &last[0], nil
	}
	cur := *op
	if len(last) == 1 {
		cur.DeliveryMark = mark(last[0])
	}
	asOf, err := time.Parse(time.RFC3339, res.ReportingPeriod.End)
	if err != nil {
		return rep, nil, fmt.Errorf("the pushed report's reporting_period.end %q is not a date-time", res.ReportingPeriod.End)
	}
	// The buy's push flag lives on its live entry, which the webhook does not read: a newest
	// snapshot that a push wrote says the buy is marked already, so only its first push (or
	// the first after a pull found news) pays the write. Marked before the report is recorded,
	// so a failure in between leaves the buy marked, never a pushed snapshot on an unmarked buy.
	if !op.DeliveryPushed && (len(last) == 0 || !last[0].Pushed) {
		if err := r.ledger.MarkDeliveryPushed(ctx, op.Tenant, op.ID); err != nil && !errors.Is(err, record.ErrConflict) {
			return rep, nil, err
		}
	}
	for _, row := range res.MediaBuys {
		if row.MediaBuyID != op.MediaBuyID {
			continue
		}
		rep.Read++
		if _, err := r.record(ctx, &cur, approved, row, res.Currency, asOf, &pushed{key: key, hash: hash}, &rep); err != nil {
			return rep, nil, err
		}
	}
	return rep, nil, nil
}

// decimal returns a seller's number literal as a plain decimal string (its exact value, in as
// many decimals as it has), or false for one that is not a number of 0 or more.
func decimal(n json.Number) (string, bool) {
	// jsonnum bounds the literal (digits, exponent, magnitude) before any arithmetic, so no
	// seller's "1e99999999" makes the read slow.
	if _, err := jsonnum.Split(string(n)); err != nil {
		return "", false
	}
	r, ok := new(big.Rat).SetString(string(n))
	if !ok || r.Sign() < 0 {
		return "", false
	}
	if r.IsInt() {
		return r.RatString(), true
	}
	for digits := 1; digits <= 12; digits++ {
		if s := r.FloatString(digits); mustEqual(s, r) {
			return s, true
		}
	}
	return r.FloatString(12), true
}

func mustEqual(s string, r *big.Rat) bool {
	x, ok := new(big.Rat).SetString(s)
	return ok && x.Cmp(r) == 0
}

// AfterSweep returns a scheduled handler that runs sweep, then the delivery read: the
// reconcile function's one schedule drives both, and the read's own cadence (Config.Cadence)
// decides which buys are due. A failed read is logged, never the sweep's failure.
func AfterSweep[S any](sweep func(context.Context, json.RawMessage) (S, error), r *Reader) func(context.Context, json.RawMessage) (S, error) {
	return func(ctx context.Context, in json.RawMessage) (S, error) {
		out, err := sweep(ctx, in)
		rep, derr := r.Run(ctx)
		if derr != nil {
			r.log.WarnContext(ctx, "delivery read failed", "err", derr)
		} else if rep != (Report{}) {
			r.log.InfoContext(ctx, "delivery read", "read", rep.Read, "snapshots", rep.Snapshots, "unchanged", rep.Unchanged, "overBudget", rep.OverBudget, "retired", rep.Retired,
				"failed", rep.Failed, "backfilled", rep.Backfilled, "watched", rep.Watched)
		}
		return out, err
	}
}
