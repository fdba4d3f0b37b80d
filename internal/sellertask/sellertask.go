package sellertask

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/money"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/sfn"
	"github.com/buyflow/buyflow/internal/workflow"
)

// ledger is the part of the ledger RecordStatus, Move and Wake use; *ledger.Store
// satisfies it, and so do the ledgers of the stages, the webhook receiver and the
// reconciliation sweep.
type ledger interface {
	Transition(ctx context.Context, tenant, id string, to workflow.Status, expectedVersion int64, ch record.Patch) (*record.Operation, error)
	Advance(ctx context.Context, op *record.Operation, to workflow.Status, ch record.Patch, take bool) (*record.Operation, error)
	AppendEvent(ctx context.Context, tenant, opID string, ev record.Event) error
	ClearTaskToken(ctx context.Context, tenant, id, token string) error
}

// Tasks completes a parked Step Functions task token; *sfn.Client satisfies it. A token that
// is already gone is an error matching sfn.ErrTaskGone.
type Tasks interface {
	Succeed(ctx context.Context, token string, output any) error
}

// Deps is what RecordStatus, Move and Wake need from their caller: the poll stage, the
// webhook receiver and the reconciliation sweep each build one.
type Deps struct {
	// Ledger records the transitions and events, and clears the parked token.
	Ledger ledger
	// Tasks completes the parked token; only Wake uses it.
	Tasks Tasks
	// Timeline reads the operation's events; only RecordLost uses it (where the grace began).
	Timeline timeline
	// Grace is RecordLost's lost-task grace (the run configuration's LostTaskGrace; zero:
	// LostTaskGrace).
	Grace time.Duration
	// Metrics receives SellerTaskDuration when a task reaches a terminal status; nil emits
	// nothing.
	Metrics *metrics.Recorder
	// WakeActor, when set, makes Wake append a wake event after it completed a token (actor
	// WakeActor, detail {"by": WakeBy, "status": ...}); when empty Wake appends none.
	WakeActor, WakeBy string
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Log defaults to slog.Default().
	Log *slog.Logger
}

func (d Deps) grace() time.Duration {
	if d.Grace <= 0 {
		return LostTaskGrace
	}
	return d.Grace
}

func (d Deps) now() time.Time {
	if d.Now == nil {
		return time.Now().UTC()
	}
	return d.Now().UTC()
}

func (d Deps) log() *slog.Logger {
	if d.Log == nil {
		return slog.Default()
	}
	return d.Log
}

// Update is one seller report about an operation's task: a poll answer, a webhook
// delivery or a reconciliation poll.
type Update struct {
	// Status is the AdCP task status as the seller sent it (mapped with workflow.FromTaskStatus).
	Status string
	// TaskID is the seller's task id; it is recorded when the operation has none yet.
	TaskID string
	// Result is the task's result; for a completed task, the create_media_buy response
	// (adcp.DecodeMediaBuy).
	Result json.RawMessage
	// Message is the seller's text: appended to the reason of an ended task (failed, rejected,
	// canceled), and the reason of an input-required one.
	Message string
	// Failure is the seller's error for an ended task (a poll's error object). When nil it is
	// read from Result (adcp.ResultFailure: a webhook carries it there). Its code and recovery
	// go into the reason, and its code into the event detail as error_code.
	Failure *adcp.Error
	// CreatedAt is when the seller created the task (RFC 3339, as AdCP sends it). When it
	// parses, reaching a terminal status emits SellerTaskDuration.
	CreatedAt string
	// Actor and EventType label the transition and its audit event.
	Actor, EventType string
	// Detail is the transition's event detail. RecordStatus adds media_buy_id to this map
	// (so a caller's own no-change event carries it too); nil starts an empty one.
	Detail map[string]any
	// Take is set by a caller that completes the parked token itself when the update ends the
	// wait (the webhook receiver, the sweep): when the status reached needs the state machine
	// by itself (terminal, or input required), the move takes the token in its own write, and
	// Recorded.Token holds it for Wake. That saves the waker the token's clear; a wake for
	// a lapsed deadline still clears it first (Wake).
	Take bool
	// SkipRepeat answers a status equal to the operation's with Repeat before the result
	// is read, writing nothing: a poller seeing the same answer again has no news. Without it
	// the repeat goes to the transition and comes back Stale (the webhook records it).
	SkipRepeat bool
}

// UpdateFrom returns the update a get_task_status / tasks/get answer reports: its status,
// result, creation time, and the task's failure as the message. The caller adds the task id,
// actor, event type and detail.
func UpdateFrom(ts *adcp.TaskStatusResult) Update {
	return Update{Status: string(ts.Status), Result: ts.Result, CreatedAt: ts.CreatedAt, Failure: ts.Failure(), Message: polledMessage(ts.Raw)}
}

// MaxMessageBytes bounds the seller's message kept on an event: enough for a person's note
// ("IO review by our sales team, 2-3 business days"), never a page the seller chose to send.
const MaxMessageBytes = 1000

// Message is the seller's message as an event keeps it: trimmed and bounded (record.Clip).
// It is untrusted text; whoever renders it escapes it.
func Message(s string) string {
	return record.Clip(strings.TrimSpace(s), MaxMessageBytes)
}

// polledMessage is the seller's words in a task status answer: its message (the official
// SDK's tasks/get sends the task's status message there), else its progress's current step
// (what the SDK's handoff context reports while people work on the task).
func polledMessage(raw json.RawMessage) string {
	var w struct {
		Message  any `json:"message"`
		Progress struct {
			CurrentStep any `json:"current_step"`
		} `json:"progress"`
	}
	if json.Unmarshal(raw, &w) != nil {
		return ""
	}
	// Typed as any: a seller that sends a number or an object here must not cost the poll.
	if s, ok := w.Message.(string); ok && strings.TrimSpace(s) != "" {
		return s
	}
	if s, ok := w.Progress.CurrentStep.(string); ok {
		return s
	}
	return ""
}

// Outcome is what RecordStatus did with an update.
type Outcome int

// The outcomes of RecordStatus.
const (
	// Applied: the operation moved forward.
	Applied Outcome = iota + 1
	// Stale: the ledger refused the move (it holds this status or a newer one); nothing
	// was written. The caller records it as it sees fit.
	Stale
	// Repeat: with SkipRepeat, the status is the operation's; nothing was written.
	Repeat
	// Unmapped: a status without lifecycle meaning (auth-required, unknown); nothing was
	// written.
	Unmapped
)

// Recorded is the result of RecordStatus.
type Recorded struct {
	// Op is the operation as it now is: after the transition, the ledger's current one when
	// the move was refused, the given one when nothing was tried.
	Op *record.Operation
	// Outcome says what was done.
	Outcome Outcome
	// To is the status the update asked for, after the result was read (a completion whose
	// result is an error is failed); empty for Unmapped.
	To workflow.Status
	// Token is the parked task token the move took from the ledger (Update.Take): nobody else
	// can complete it now, so the caller must (Wake).
	Token string
}

// RecordStatus records a seller's task update on op, forward only: the AdCP status mapped
// with workflow.FromTaskStatus, media_buy_id (or the error) read from a completion's result
// with adcp.DecodeMediaBuy, the seller task id recorded when the operation has none, a reason
// for an ended, failed-on-completion or input-required task, and a legal step through working
// when the transition table needs it. The move is the ledger's Advance from op: another
// writer's change since op was read is read back from the refusal and the move tried again
// from it while it stays legal. A transition the ledger refuses is Stale, never an error. When
// the task reached a terminal status, SellerTaskDuration is emitted (by raw AdCP status) if
// deps.Metrics is set and u.CreatedAt parses.
//
// The only errors are the ledger's (wrapped, matching record.ErrNotFound, record.ErrContention
// and the like) and ctx's. Waking the workflow is Wake's job.
func RecordStatus(ctx context.Context, deps Deps, op *record.Operation, u Update) (Recorded, error) {
	to, ok := workflow.FromTaskStatus(u.Status)
	switch {
	case !ok:
		return Recorded{Op: op, Outcome: Unmapped}, nil
	case u.SkipRepeat && to == op.Status:
		return Recorded{Op: op, Outcome: Repeat, To: to}, nil
	}
	if u.Detail == nil {
		u.Detail = map[string]any{}
	}
	ch := record.Patch{Actor: u.Actor, EventType: u.EventType}
	if op.SellerTaskID == "" && u.TaskID != "" {
		ch.SellerTaskID = &u.TaskID
	}
	switch to {
	case workflow.StatusCompleted:
		mb, derr := adcp.DecodeMediaBuy(u.Result)
		switch {
		case derr != nil && mb != nil && mb.Shape == adcp.ShapeError:
			to = workflow.StatusFailed
			r := record.Clip("the seller completed the task with an error: "+derr.Error(), 1000)
			ch.Reason = &r
			if code := adcpCode(derr); code != "" {
				u.Detail["error_code"], ch.ErrorCode = code, &code
			}
		case derr == nil && EndedMediaBuy(mb) && op.Kind != record.KindModification:
			// The task completed, but the seller declined or ended the buy it created. (For a
			// change to a placed buy, a canceled media buy is what a cancellation completes with.)
			to = workflow.StatusRejected
			r := record.Clip("the seller answered media buy "+mb.MediaBuyID+" with status "+mb.MediaBuyStatus, 1000)
			ch.Reason, ch.MediaBuyID = &r, &mb.MediaBuyID
			u.Detail["media_buy_id"], u.Detail["media_buy_status"] = mb.MediaBuyID, mb.MediaBuyStatus
		case derr == nil && mb.MediaBuyID != "":
			ch.MediaBuyID = &mb.MediaBuyID
			u.Detail["media_buy_id"] = mb.MediaBuyID
			if op.Kind != record.KindModification {
				ch.SellerPackages = SellerPackages(mb.Packages, op.Currency)
			}
		default:
			// A completion without a readable artifact: record it; report needs the id, so say so.
			r := "the seller completed the task without a readable media buy in its result"
			ch.Reason = &r
		}
	case workflow.StatusFailed, workflow.StatusRejected, workflow.StatusCanceled:
		r := "the seller ended the task " + u.Status
		if u.Message != "" {
			r += ": " + u.Message
		}
		f := u.Failure
		if f == nil {
			f = adcp.ResultFailure(u.Result)
		}
		if f != nil {
			r += " (" + f.Error() + ")"
			if f.Code != "" {
				u.Detail["error_code"], ch.ErrorCode = f.Code, &f.Code
			}
		}
		r = record.Clip(r, 1000)
		ch.Reason = &r
	case workflow.StatusInputRequired:
		if u.Message != "" {
			r := record.Clip(u.Message, 1000)
			ch.Reason = &r
		}
	}
	ch.Detail = record.EventDetail(u.Detail)

	take := u.Take && workflow.SellerOutput{Status: to, Terminal: to.Terminal()}.NeedsDecision()
	cur, moved, token, err := advanceVia(ctx, deps, op, to, ch, take)
	if err != nil {
		return Recorded{Op: op, To: to}, err
	}
	if !moved {
		return Recorded{Op: cur, Outcome: Stale, To: to}, nil
	}
	if to.Terminal() && deps.Metrics != nil {
		if created, perr := time.Parse(time.RFC3339, u.CreatedAt); perr == nil {
			deps.Metrics.Duration(metrics.SellerTaskDuration, metrics.Dims{"Status": u.Status}, deps.now().Sub(created))
		}
	}
	return Recorded{Op: cur, Outcome: Applied, To: to, Token: token}, nil
}

// EndedMediaBuy reports whether a successful create answer reports a media buy the seller
// already declined or ended (3.0 sellers answer with the buy's status, which can be rejected
// or canceled).
func EndedMediaBuy(mb *adcp.MediaBuyResult) bool {
	return mb.MediaBuyID != "" && (mb.MediaBuyStatus == "rejected" || mb.MediaBuyStatus == "canceled")
}

// advanceTries bounds how often advance tries again after another writer changed the operation:
// each refusal hands back the item as it then was, so only a storm of writers exhausts it.
const advanceTries = 4

// advance moves op to to with the ledger's Advance (taking the parked token when take is set
// and one is parked). A move the ledger refuses because another writer changed the operation
// since op was read is tried again from the operation as the refusal read it, while the move
// stays legal; any other refusal is "no change" (the current operation, moved=false). A move
// not legal from the status read is left to the ledger's own status (Move). token is the token
// the move took.
func advance(ctx context.Context, deps Deps, op *record.Operation, to workflow.Status, ch record.Patch, take bool) (cur *record.Operation, moved bool, token string, err error) {
	for range advanceTries {
		switch {
		case op.Status == to:
			return op, false, "", nil
		case !workflow.CanMove(op.Status, to):
			// Not from the status read: the ledger decides from the one it holds now.
			cur, moved, err := Move(ctx, deps, op, to, ch)
			return cur, moved, "", err
		}
		taking := take && op.TaskToken != ""
		next, err := deps.Ledger.Advance(ctx, op, to, ch, taking)
		var te *record.TransitionError
		switch {
		case err == nil && taking:
			return next, true, op.TaskToken, nil
		case err == nil:
			return next, true, "", nil
		case errors.As(err, &te) && te.Current != nil && te.Kind == record.ConflictVersion:
			op = te.Current
			continue
		case errors.As(err, &te) && te.Current != nil:
			return te.Current, false, "", nil
		}
		return nil, false, "", fmt.Errorf("move operation %s to %s: %w", op.ID, to, err)
	}
	return nil, false, "", fmt.Errorf("move operation %s to %s: changed by others %d times: %w", op.ID, to, advanceTries, record.ErrContention)
}

// advanceVia is advance that, for a completion the table does not allow directly
// (awaiting_approval → completed after the seller's input-required was answered), takes the
// legal step through working first. A repeated input-required after that approval stays "no
// change", so nobody is asked twice.
func advanceVia(ctx context.Context, deps Deps, op *record.Operation, to workflow.Status, ch record.Patch, take bool) (*record.Operation, bool, string, error) {
	if to == workflow.StatusCompleted && !workflow.CanMove(op.Status, to) && op.Status != workflow.StatusWorking &&
		workflow.CanMove(op.Status, workflow.StatusWorking) && workflow.CanMove(workflow.StatusWorking, to) {
		mid, _, _, err := advance(ctx, deps, op, workflow.StatusWorking, record.Patch{Actor: ch.Actor, EventType: ch.EventType,
			SellerTaskID: ch.SellerTaskID, Detail: ch.Detail}, false)
		if err != nil {
			return nil, false, "", err
		}
		op = mid
	}
	return advance(ctx, deps, op, to, ch, take)
}

// Move transitions op to to, forward only. A refused transition is "no change": it returns the
// ledger's current operation and moved=false. Any other failure is returned wrapped ("move
// operation <id> to <status>: ..."), with a nil operation; a transaction race the ledger's own
// retries did not win is one (record.ErrContention).
func Move(ctx context.Context, deps Deps, op *record.Operation, to workflow.Status, ch record.Patch) (cur *record.Operation, moved bool, err error) {
	if op.Status == to {
		return op, false, nil
	}
	next, err := deps.Ledger.Transition(ctx, op.Tenant, op.ID, to, record.AnyVersion, ch)
	var te *record.TransitionError
	switch {
	case err == nil:
		return next, true, nil
	case errors.As(err, &te) && te.Current != nil:
		return te.Current, false, nil
	}
	return nil, false, fmt.Errorf("move operation %s to %s: %w", op.ID, to, err)
}

// Wake completes the parked AwaitSeller token when the ledger's state needs the state machine
// to act (WakeOutput(op, wait, cfg, now).NeedsDecision()); woken says it did. taken is the token
// the caller's own update took from the ledger (Recorded.Token), which nobody else can complete
// now. Without one, the token stored on op is cleared first (conditional on the stored value),
// so that of a park, a poll, webhooks and a sweep racing for it exactly one completes it; a
// token someone else cleared or replaced is left alone. A token Step Functions no longer knows
// (sfn.ErrTaskGone) is fine: whoever completed it had the ledger's truth. Any other failure to
// complete is returned (wrapped); the ledger holds the truth and the wait's timeout polls it.
// After a completion a wake event is appended when deps.WakeActor is set.
func Wake(ctx context.Context, deps Deps, op *record.Operation, taken string, wait workflow.WaitState, cfg workflow.RunConfig, now time.Time) (woken bool, err error) {
	out := WakeOutput(op, wait, cfg, now)
	if taken != "" {
		return complete(ctx, deps, op, taken, out)
	}
	if !out.NeedsDecision() || op.TaskToken == "" {
		return false, nil
	}
	switch err := deps.Ledger.ClearTaskToken(ctx, op.Tenant, op.ID, op.TaskToken); {
	case errors.Is(err, record.ErrTokenMismatch):
		return false, nil // someone else completed or replaced the wait
	case err != nil:
		// Wake anyway: a double completion is answered "gone", a missed one costs a poll interval.
		deps.log().WarnContext(ctx, "task token not cleared", "operationId", op.ID, "err", err)
	}
	return complete(ctx, deps, op, op.TaskToken, out)
}

// complete sends out to the parked token the caller holds, then appends the wake event when
// deps.WakeActor is set.
func complete(ctx context.Context, deps Deps, op *record.Operation, token string, out workflow.SellerOutput) (bool, error) {
	err := deps.Tasks.Succeed(ctx, token, out)
	switch {
	case errors.Is(err, sfn.ErrTaskGone):
		deps.log().InfoContext(ctx, "wait already completed", "operationId", op.ID)
		return false, nil
	case err != nil:
		return false, fmt.Errorf("wake the wait of %s: %w", op.ID, err)
	}
	if deps.WakeActor != "" {
		if err := deps.Ledger.AppendEvent(ctx, op.Tenant, op.ID, record.Event{Type: record.EventWake, Actor: deps.WakeActor,
			Detail: record.EventDetail(map[string]any{"by": deps.WakeBy, "status": out.Status})}); err != nil {
			deps.log().WarnContext(ctx, "wake event not recorded", "operationId", op.ID, "err", err)
		}
	}
	return true, nil
}

// WakeOutput is the SellerOutput that completes AwaitSeller from what the ledger holds: the
// operation's (forward-only) status, Terminal, the wait state unchanged, and DeadlineExceeded
// when the wait's deadline has passed and the seller neither finished nor needs input. The
// webhook Lambda calls it after recording an update, and sends SendTaskSuccess with it to the
// stored token when out.NeedsDecision() (a non-decision update needs no wake: the next poll
// reads the ledger). Park computes the same output for the lost-wakeup race.
//
// wait is the wait state park stored with the token. A caller that does not have it (the
// webhook: the ledger stores only the token) passes the zero WaitState; it is then rebuilt
// from the operation: the safety net's interval of cfg, the deadline recorded at create
// (Operation.Deadline), round 0.
func WakeOutput(op *record.Operation, wait workflow.WaitState, cfg workflow.RunConfig, now time.Time) workflow.SellerOutput {
	if wait == (workflow.WaitState{}) {
		wait = workflow.WaitState{IntervalSeconds: max(cfg.PollMaxSeconds, 1)}
		if !op.Deadline.IsZero() {
			wait.DeadlineUnix = op.Deadline.Unix()
		}
	}
	out := workflow.SellerOutput{Status: op.Status, Terminal: op.Status.Terminal(), Next: wait, Reason: op.Reason}
	if !out.Terminal && op.Status != workflow.StatusInputRequired && wait.Expired(now) {
		out.DeadlineExceeded = true
	}
	return out
}

// adcpCode is the AdCP error code err carries, or "".
func adcpCode(err error) string {
	var ae *adcp.Error
	if errors.As(err, &ae) {
		return ae.Code
	}
	return ""
}

// SellerPackages is what the seller reports it placed, for the ledger: each package's id and
// budget, the budget read exactly in the buy's currency (one the seller leaves out, or that is
// not money in that currency, stays empty rather than guessed). Nil when no package has an id.
func SellerPackages(pkgs []adcp.Package, currency string) []record.PackageBudget {
	var out []record.PackageBudget
	for _, p := range pkgs {
		if p.PackageID == "" {
			continue
		}
		pb := record.PackageBudget{PackageID: record.Clip(p.PackageID, 255)}
		if amt, err := money.Parse(string(p.Budget), currency); p.Budget != "" && err == nil {
			pb.Budget = amt.Decimal()
		}
		out = append(out, pb)
	}
	return out
}
