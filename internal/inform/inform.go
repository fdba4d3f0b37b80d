// Package inform is the inform Lambda's use case: it tells the person who submitted a buy, a
// change to it or a campaign, in Slack, what became of it. An EventBridge rule on the status
// event bus sends it every status event whose detail carries notify.slack (the submit's
// "notify" field; a change is told where its buy's submit asked), so what asked for nothing
// costs nothing and hears nothing.
//
// The event says which transition happened; the ledger says the rest: who must approve and
// until when (the latest approval), who approved or rejected it, the PO number, a change's
// budget before and after, a campaign's legs and how many were placed, the seller's own words
// while it holds a buy. Each event is told once, a wait on the seller once per wait: a receipt
// keyed by the event id (or the wait) is written before the post (EventBridge delivers at
// least once and Lambda retries an async invocation), and a post that fails releases it
// again, so the retry posts. A "waiting for approval" event can overtake the notify stage that
// records its approval (governance moves the buy first): it waits for the approval a little
// (DefaultRequestWait), then fails so that Lambda invokes it again.
package inform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/buyflow/buyflow/internal/approvalcore"
	"github.com/buyflow/buyflow/internal/ctxwait"
	"github.com/buyflow/buyflow/internal/money"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/slack"
	"github.com/buyflow/buyflow/internal/statusevent"
	"github.com/buyflow/buyflow/internal/workflow"
)

// Ledger is what the notifier reads and the receipt it keeps.
type Ledger interface {
	GetOperation(ctx context.Context, tenant, id string) (*record.Operation, error)
	ListEvents(ctx context.Context, tenant, opID string, limit int, cursor string) (record.Page[record.Event], error)
	GetApproval(ctx context.Context, id string) (*record.Approval, error)
	GetCampaign(ctx context.Context, tenant, id string) (*record.Campaign, error)
	RecordReceipt(ctx context.Context, r record.Receipt) (duplicate bool, err error)
	ReleaseReceipt(ctx context.Context, sender, key string) error
}

// sender is the receipts' sender for requester notifications: a name no agent id can take
// (agent ids have no colon), so no seller webhook key can collide with an event id.
const sender = "buyflow:requester"

// Service posts requester notifications.
type Service struct {
	ledger Ledger
	slack  slack.Client
	log    *slog.Logger
	// requestWait bounds how long a "waiting for approval" event waits for its approval to be
	// recorded (awaitRequest); sleep pauses between looks (both replaced in tests).
	requestWait time.Duration
	sleep       func(context.Context, time.Duration) error
}

// DefaultRequestWait is how long the notifier waits for the approval a "waiting for approval"
// event is about. Governance moves a buy to awaiting_approval and the notify stage records the
// approval right after, in the next state of the workflow, while the event crosses the ledger
// stream, the publisher and the bus: it usually finds the approval recorded, and when it
// overtook the notify stage, the approval follows within a second or two.
const DefaultRequestWait = 10 * time.Second

// New returns a notifier that reads l and posts with c, a bot client: the message goes to the
// requester's user or channel id. With a nil c (Slack configured as an incoming webhook, which
// posts to its one channel only) every notification is dropped with a warning: a requester's
// direct message must not land in the approvers' channel.
func New(l Ledger, c slack.Client) *Service {
	return &Service{ledger: l, slack: c, log: slog.Default(), requestWait: DefaultRequestWait, sleep: ctxwait.Sleep}
}

// Handle tells the requester about one status event. An event that is not a status event, or
// one the requester is not told about, is dropped (no retry could change that); a failed read
// or post is an error, which Lambda retries.
func (n *Service) Handle(ctx context.Context, raw json.RawMessage) error {
	ev, err := statusevent.Parse(raw)
	if err != nil {
		n.log.WarnContext(ctx, "not a status event; dropped", "err", err)
		return nil
	}
	d := ev.Detail
	if d.Notify == nil || d.Notify.Slack == "" {
		return nil
	}
	if n.slack == nil {
		n.log.WarnContext(ctx, "requester notifications need a Slack bot token (the Slack secret holds a webhook); dropped", "operationId", d.OperationID)
		return nil
	}
	u, key, ok, err := n.updateOf(ctx, d)
	if err == nil && !ok {
		return nil
	}
	if errors.Is(err, errStale) {
		n.log.InfoContext(ctx, "the approval was decided before its request was told; not told", "operationId", d.OperationID, "eventId", d.EventID)
		return nil
	}
	if errors.Is(err, errMovedOn) {
		n.log.InfoContext(ctx, "not told", "operationId", d.OperationID, "eventId", d.EventID, "why", err.Error())
		return nil
	}
	if err != nil {
		return err
	}
	msg, err := slack.RequesterMessage(u)
	if err != nil {
		n.log.ErrorContext(ctx, "requester message not built; dropped", "operationId", d.OperationID, "eventId", d.EventID, "err", err)
		return nil
	}
	msg.Channel = d.Notify.Slack
	dup, err := n.ledger.RecordReceipt(ctx, record.Receipt{SellerID: sender, IdempotencyKey: key, Tenant: d.Tenant, OperationID: d.OperationID})
	if err != nil {
		return fmt.Errorf("inform: receipt of %s: %w", d.EventID, err)
	}
	if dup {
		n.log.InfoContext(ctx, "requester already told", "operationId", d.OperationID, "eventId", d.EventID, "receipt", key)
		return nil
	}
	if _, err := n.slack.Post(ctx, msg); err != nil {
		if rerr := n.ledger.ReleaseReceipt(ctx, sender, key); rerr != nil {
			return errors.Join(fmt.Errorf("inform: post %s: %w", d.EventID, err), rerr)
		}
		return fmt.Errorf("inform: post %s: %w", d.EventID, err)
	}
	n.log.InfoContext(ctx, "requester told", "operationId", d.OperationID, "eventId", d.EventID, "kind", string(u.Kind), "subject", string(d.Kind))
	return nil
}

// updateOf is what d tells the requester, by what changed status, and the key of the receipt
// that tells it once (the event id, or the wait's for a wait on the seller); ok is false for a
// transition that is not news.
func (n *Service) updateOf(ctx context.Context, d statusevent.Detail) (u slack.RequesterUpdate, key string, ok bool, err error) {
	key = d.EventID
	switch d.Kind {
	case statusevent.KindMediaBuy:
		kind, ok := kindOf(workflow.Status(d.From), workflow.Status(d.To))
		if !ok {
			return n.sellerWait(ctx, d)
		}
		u, _, err = n.update(ctx, d, kind)
		return u, key, true, err
	case statusevent.KindChange:
		kind, ok := kindOf(workflow.Status(d.From), workflow.Status(d.To))
		if !ok {
			return u, key, false, nil
		}
		u, err = n.changeUpdate(ctx, d, kind)
		return u, key, true, err
	case statusevent.KindCampaign:
		kind, ok := campaignKinds[d.To]
		if !ok {
			return u, key, false, nil
		}
		u, err = n.campaignUpdate(ctx, d, kind)
		return u, key, true, err
	}
	return u, key, false, nil
}

// sellerWait tells the requester that their buy waits on the seller's people: the seller took
// it as a long-running task (submitted: AdCP's status for work that takes hours or days, an
// IO review by its people), or said in its own words what it does while working, or asks for
// input (input_required). A wait in submitted and working is told once, however its status
// moves and however often it is polled: its receipt is keyed by the wait (the buy's rounds
// before the seller: the create, each input asked, each approval), not by the event. Each ask
// for input is its own. Working without the seller's words is its systems at work: not news.
func (n *Service) sellerWait(ctx context.Context, d statusevent.Detail) (u slack.RequesterUpdate, key string, ok bool, err error) {
	to := workflow.Status(d.To)
	if to != workflow.StatusSubmitted && to != workflow.StatusWorking && to != workflow.StatusInputRequired {
		return u, "", false, nil
	}
	said, round := "", 0
	err = n.eachEvent(ctx, d.Tenant, d.OperationID, func(ev record.Event) {
		switch ev.To {
		case workflow.StatusCreating, workflow.StatusInputRequired, workflow.StatusAwaitingApproval:
			round, said = round+1, "" // a new round before the seller: a new wait
		}
		if m := sellerMessage(ev); m != "" {
			said = m
		}
	})
	if err != nil {
		return u, "", false, err
	}
	kind, key := slack.KindSellerWaiting, "seller_wait:"+d.OperationID+":"+strconv.Itoa(round)
	switch {
	case to == workflow.StatusInputRequired:
		kind, key = slack.KindSellerInput, d.EventID
		if said == "" {
			said = d.Reason // the ask as the ledger recorded it (the create's answer)
		}
	case to == workflow.StatusWorking && strings.TrimSpace(said) == "":
		return u, "", false, nil
	}
	u, _, err = n.update(ctx, d, kind)
	u.SellerMessage = said
	return u, key, true, err
}

// sellerMessage is the seller's message an event of the seller wait keeps (the poll's and the
// webhook's detail.message, bounded when they recorded it), or "".
func sellerMessage(ev record.Event) string {
	switch ev.Type {
	case record.EventPoll, record.EventWebhook, record.EventSellerCall:
	default:
		return ""
	}
	var d struct {
		Message any `json:"message"`
	}
	if json.Unmarshal(ev.Detail, &d) != nil {
		return ""
	}
	m, _ := d.Message.(string)
	return record.Clip(strings.TrimSpace(m), maxSellerMessage)
}

// maxSellerMessage bounds the seller's message a requester reads, whoever recorded it.
const maxSellerMessage = 1000

// kindOf is what a transition tells the requester, if anything: an approval asked for or
// decided, the buy placed or ended. Governance's steps are not news; a buy's wait on the
// seller is sellerWait's to judge.
func kindOf(from, to workflow.Status) (slack.RequesterKind, bool) {
	if from.Placed() && to.Placed() {
		// A pause or a resume: the change's own message tells it; "placed" again would mislead.
		return "", false
	}
	switch to {
	case workflow.StatusAwaitingApproval:
		return slack.KindAwaitingApproval, true
	case workflow.StatusCompleted:
		return slack.KindPlaced, true
	case workflow.StatusFailed:
		return slack.KindFailed, true
	case workflow.StatusRejected:
		return slack.KindRejected, true
	case workflow.StatusCanceled:
		return slack.KindCanceled, true
	case workflow.StatusExpired:
		return slack.KindExpired, true
	}
	if from == workflow.StatusAwaitingApproval && to.Pending() {
		return slack.KindApproved, true
	}
	return "", false
}

// errStale reports a request for approval that was decided before the notifier got to it: the
// bus does not keep order, and "waiting for X" after "approved by X" would mislead; the
// decision's own message tells what happened.
var errStale = errors.New("inform: the approval is already decided")

// update gathers what the message says from the event and the ledger, and returns the
// latest approval it read (nil when it read none).
func (n *Service) update(ctx context.Context, d statusevent.Detail, kind slack.RequesterKind) (slack.RequesterUpdate, *record.Approval, error) {
	op, err := n.ledger.GetOperation(ctx, d.Tenant, d.OperationID)
	if err != nil {
		return slack.RequesterUpdate{}, nil, fmt.Errorf("inform: read operation %s: %w", d.OperationID, err)
	}
	u := slack.RequesterUpdate{
		Kind: kind, OperationID: d.OperationID, PONumber: op.PONumber, Seller: d.SellerID,
		MediaBuyID: d.MediaBuyID, Reason: d.Reason, Link: d.Links.Self,
	}
	if d.Amount != nil {
		u.Amount = exact(d.Amount.Value, d.Amount.Currency)
	}
	if kind != slack.KindAwaitingApproval && kind != slack.KindApproved && kind != slack.KindRejected {
		return u, nil, nil
	}
	a, found, err := n.latestApproval(ctx, d.Tenant, d.OperationID)
	if err == nil && !found && kind == slack.KindAwaitingApproval {
		a, found, err = n.awaitRequest(ctx, d)
	}
	if err != nil || !found {
		return u, nil, err
	}
	if err := decided(&u, a); err != nil {
		return u, nil, err
	}
	return u, a, nil
}

// decided fills in, from approval a, who must approve until when (a request; errStale when a
// was decided since) or who decided (a decision of the kind u tells).
func decided(u *slack.RequesterUpdate, a *record.Approval) error {
	switch {
	case u.Kind == slack.KindAwaitingApproval && a.Status != record.ApprovalPending:
		return errStale
	case u.Kind == slack.KindAwaitingApproval:
		u.Approvers, u.Until = a.Approvers, a.ExpiresAt
	case a.Status == record.ApprovalApproved && u.Kind == slack.KindApproved, a.Status == record.ApprovalRejected && u.Kind == slack.KindRejected:
		u.DecidedBy, u.DecidedAt, u.Comment = a.Decider, a.DecidedAt, a.Comment
	}
	return nil
}

// exact is a decimal amount the ledger stored, as a message shows it; zero when it cannot be
// read exactly (the message then shows no amount rather than a wrong one).
func exact(value, currency string) approvalcore.Money {
	a, err := money.ParseDecimal(value, currency)
	if err != nil {
		return approvalcore.Money{}
	}
	return approvalcore.Money{Minor: a.Minor, Currency: a.Currency}
}

// changeUpdate is update for a change to a placed buy: the buy it changes (its PO number), the
// budget before (the buy's when the change was asked for) and after, from the change's own
// record: what the approver is asked to approve or approved (the approval's amount, the
// change's "after" the notify stage computed), what the seller applied once it is (the total
// the change asked for, else the approved amount). Never from a timeline read alone: the
// change's applied event is written after the status this message tells, so it may not be
// there yet. A change not applied leaves the buy as it was.
func (n *Service) changeUpdate(ctx context.Context, d statusevent.Detail, kind slack.RequesterKind) (slack.RequesterUpdate, error) {
	u, a, err := n.update(ctx, d, kind)
	if err != nil {
		return u, err
	}
	u.Subject, u.BuyID, u.Before = slack.SubjectChange, d.ParentID, u.Amount
	if buy, err := n.ledger.GetOperation(ctx, d.Tenant, d.ParentID); err == nil {
		u.PONumber = buy.PONumber
	} else if !errors.Is(err, record.ErrNotFound) {
		return u, fmt.Errorf("inform: read buy %s: %w", d.ParentID, err)
	}
	approved := approvalcore.Money{}
	if a != nil {
		approved = exact(a.Amount, a.Currency)
	}
	switch kind {
	case slack.KindAwaitingApproval, slack.KindApproved:
		if approved.Currency != "" {
			u.Amount = approved
		}
	case slack.KindPlaced:
		op, err := n.ledger.GetOperation(ctx, d.Tenant, d.OperationID)
		if err != nil {
			return u, fmt.Errorf("inform: read change %s: %w", d.OperationID, err)
		}
		after, ok := asked(op, u.Before)
		if !ok && a != nil && a.Status == record.ApprovalApproved && approved.Currency != "" {
			after, ok = approved, true
		}
		if ok {
			u.Amount = after
			return u, nil
		}
		// A change of package budgets without an approval: its record holds the new package
		// budgets, not the total, which the seller call's event records (written before the
		// change completes) and the applied event confirms.
		u.Amount = approvalcore.Money{}
		err = n.eachEvent(ctx, d.Tenant, d.OperationID, func(ev record.Event) {
			if ev.Type == record.EventModificationSellerCall || ev.Type == record.EventModificationApplied {
				u.Amount = exact(ev.Amount, ev.Currency)
			}
		})
		if err != nil {
			return u, err
		}
	}
	return u, nil
}

// asked is the buy's total after change op as the change's own record says it: the total a
// budget change asked for (in the buy's currency), the total before for a change that moves
// no budget (an end time, a pause, a resume, a cancellation). ok is false when the record does
// not say it: a change of package budgets, or a record that does not read.
func asked(op *record.Operation, before approvalcore.Money) (approvalcore.Money, bool) {
	var c struct {
		Kind  string      `json:"kind"`
		Total json.Number `json:"total"`
	}
	if len(op.Change) == 0 || json.Unmarshal(op.Change, &c) != nil {
		return approvalcore.Money{}, false
	}
	switch {
	case c.Kind != "budget":
		return before, before.Currency != ""
	case c.Total != "":
		after := exact(c.Total.String(), op.Currency)
		return after, after.Currency != ""
	}
	return approvalcore.Money{}, false
}

// campaignKinds are the campaign statuses the requester is told about.
var campaignKinds = map[string]slack.RequesterKind{
	"running":             slack.KindSubmitted,
	"awaiting_approval":   slack.KindAwaitingApproval,
	"completed":           slack.KindPlaced,
	"partially_completed": slack.KindPartial,
	"failed":              slack.KindFailed,
	"canceled":            slack.KindCanceled,
}

// campaignUpdate is what a campaign's event tells: its legs and budget when submitted; while
// it waits, who must approve until when and the approval's total of the legs it covers (the
// one its gate compared); once ended, how many legs were placed and what they committed.
func (n *Service) campaignUpdate(ctx context.Context, d statusevent.Detail, kind slack.RequesterKind) (slack.RequesterUpdate, error) {
	rec, err := n.ledger.GetCampaign(ctx, d.Tenant, d.OperationID)
	if err != nil {
		return slack.RequesterUpdate{}, fmt.Errorf("inform: read campaign %s: %w", d.OperationID, err)
	}
	u := slack.RequesterUpdate{Kind: kind, Subject: slack.SubjectCampaign, OperationID: rec.ID, Name: rec.Name, Legs: len(rec.Legs),
		Link: d.Links.Self, Amount: exact(rec.BudgetTotal, rec.Currency)}
	switch kind {
	case slack.KindSubmitted:
		return u, nil
	case slack.KindAwaitingApproval:
		if rec.ApprovalID == "" {
			return u, errors.New("inform: campaign " + rec.ID + " waits for an approval it does not name")
		}
		a, err := n.ledger.GetApproval(ctx, rec.ApprovalID)
		if err != nil {
			return u, fmt.Errorf("inform: read approval %s: %w", rec.ApprovalID, err)
		}
		if a.Tenant != rec.Tenant || a.CampaignID != rec.ID { // keyed by id alone: only the campaign's own
			return u, fmt.Errorf("inform: approval %s is not campaign %s's", a.ID, rec.ID)
		}
		if len(a.Legs) > 0 {
			u.Legs = len(a.Legs)
		}
		u.Amount = exact(a.Amount, a.Currency)
		return u, decided(&u, a)
	}
	u.Amount, u.Reason = exact(rec.Committed, rec.Currency), rec.Reason
	for _, leg := range rec.Legs {
		op, err := n.ledger.GetOperation(ctx, rec.Tenant, leg.OperationID)
		if err != nil {
			return u, fmt.Errorf("inform: read leg %s: %w", leg.OperationID, err)
		}
		if op.Status.Placed() {
			u.Landed++
		}
	}
	return u, nil
}

// eachEvent calls f with every event of opID's timeline, oldest first.
func (n *Service) eachEvent(ctx context.Context, tenant, opID string, f func(record.Event)) error {
	cursor := ""
	for {
		page, err := n.ledger.ListEvents(ctx, tenant, opID, record.MaxListLimit, cursor)
		if err != nil {
			return fmt.Errorf("inform: timeline of %s: %w", opID, err)
		}
		for _, ev := range page.Items {
			f(ev)
		}
		if cursor = page.Cursor; cursor == "" {
			return nil
		}
	}
}

// errNotRequested is a "waiting for approval" event whose approval the notify stage has not
// recorded within the wait: an error, so that Lambda invokes the notifier again later (and the
// failure queue keeps the event if it never comes).
var errNotRequested = errors.New("inform: the operation waits for an approval that is not recorded yet")

// errMovedOn is a "waiting for approval" event of an operation that left awaiting_approval
// without an approval recorded: there is nothing to tell.
var errMovedOn = errors.New("inform: the operation left awaiting_approval without an approval")

// awaitRequest waits up to requestWait for the first approval of an operation that moved to
// awaiting_approval before it had one (governance moves it there, the notify stage then records
// the approval; the event may overtake the notify stage). Still none after the wait, it is
// errMovedOn when the operation has moved on meanwhile (its next event tells the requester what
// became of it), else errNotRequested.
func (n *Service) awaitRequest(ctx context.Context, d statusevent.Detail) (a *record.Approval, found bool, err error) {
	pause := 50 * time.Millisecond
	for waited := time.Duration(0); waited < n.requestWait; {
		pause = min(pause, n.requestWait-waited)
		if err := n.sleep(ctx, pause); err != nil {
			return nil, false, err
		}
		waited += pause
		if a, found, err = n.latestApproval(ctx, d.Tenant, d.OperationID); err != nil || found {
			return a, found, err
		}
		pause = min(2*pause, time.Second)
	}
	op, err := n.ledger.GetOperation(ctx, d.Tenant, d.OperationID)
	if err != nil {
		return nil, false, fmt.Errorf("inform: read operation %s: %w", d.OperationID, err)
	}
	if op.Status != workflow.StatusAwaitingApproval {
		return nil, false, fmt.Errorf("%w: it is %s", errMovedOn, op.Status)
	}
	return nil, false, fmt.Errorf("%w (operation %s, after %s)", errNotRequested, d.OperationID, n.requestWait)
}

// latestApproval is the operation's most recent approval; found is false when it never asked
// for one.
func (n *Service) latestApproval(ctx context.Context, tenant, opID string) (a *record.Approval, found bool, err error) {
	id := ""
	err = n.eachEvent(ctx, tenant, opID, func(ev record.Event) {
		if ev.Type != record.EventApprovalRequested {
			return
		}
		var detail struct {
			ApprovalID string `json:"approval_id"`
		}
		if json.Unmarshal(ev.Detail, &detail) == nil && detail.ApprovalID != "" {
			id = detail.ApprovalID
		}
	})
	if err != nil {
		return nil, false, err
	}
	if id == "" {
		return nil, false, nil
	}
	if a, err = n.ledger.GetApproval(ctx, id); err != nil {
		return nil, false, fmt.Errorf("inform: read approval %s: %w", id, err)
	}
	return a, true, nil
}
