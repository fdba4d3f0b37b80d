// Package inform is the inform Lambda's use case: it tells the person who submitted a buy, in
// Slack, what became of it. An EventBridge rule on the status event bus sends it every
// "MediaBuy Status Changed" event whose detail carries notify.slack (the submit's "notify"
// field), so a buy that asked for nothing costs nothing and hears nothing.
//
// The event says which transition happened; the ledger says the rest: who must approve and
// until when (the buy's latest approval), who approved or rejected it, the PO number. Each
// event is told once: a receipt keyed by the event id is written before the post (EventBridge
// delivers at least once and Lambda retries an async invocation), and a post that fails
// releases it again, so the retry posts.
package inform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/buyflow/buyflow/internal/approvalcore"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/money"
	"github.com/buyflow/buyflow/internal/slack"
	"github.com/buyflow/buyflow/internal/statusevent"
	"github.com/buyflow/buyflow/internal/workflow"
)

// Ledger is what the notifier reads and the receipt it keeps.
type Ledger interface {
	GetOperation(ctx context.Context, tenant, id string) (*ledger.Operation, error)
	ListEvents(ctx context.Context, tenant, opID string, limit int, cursor string) (ledger.Page[ledger.Event], error)
	GetApproval(ctx context.Context, id string) (*ledger.Approval, error)
	RecordReceipt(ctx context.Context, r ledger.Receipt) (duplicate bool, err error)
	ReleaseReceipt(ctx context.Context, sender, key string) error
}

// Sender is the receipts' sender for requester notifications: a name no agent id can take
// (agent ids have no colon), so no seller webhook key can collide with an event id.
const Sender = "buyflow:requester"

// Notifier posts requester notifications.
type Notifier struct {
	ledger Ledger
	slack  slack.Client
	log    *slog.Logger
}

// New returns a notifier that reads l and posts with c, a bot client: the message goes to the
// requester's user or channel id. With a nil c (Slack configured as an incoming webhook, which
// posts to its one channel only) every notification is dropped with a warning: a requester's
// direct message must not land in the approvers' channel.
func New(l Ledger, c slack.Client) *Notifier {
	return &Notifier{ledger: l, slack: c, log: slog.Default()}
}

// Handle tells the requester about one status event. An event that is not a status event, or
// one the requester is not told about, is dropped (no retry could change that); a failed read
// or post is an error, which Lambda retries.
func (n *Notifier) Handle(ctx context.Context, raw json.RawMessage) error {
	ev, err := statusevent.Parse(raw)
	if err != nil {
		n.log.WarnContext(ctx, "not a status event; dropped", "err", err)
		return nil
	}
	d := ev.Detail
	if d.Kind != statusevent.KindMediaBuy || d.Notify == nil || d.Notify.Slack == "" {
		return nil
	}
	if n.slack == nil {
		n.log.WarnContext(ctx, "requester notifications need a Slack bot token (the Slack secret holds a webhook); dropped", "operationId", d.OperationID)
		return nil
	}
	kind, ok := kindOf(workflow.Status(d.From), workflow.Status(d.To))
	if !ok {
		return nil
	}
	u, err := n.update(ctx, d, kind)
	if errors.Is(err, errStale) {
		n.log.InfoContext(ctx, "the approval was decided before its request was told; not told", "operationId", d.OperationID, "eventId", d.EventID)
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
	dup, err := n.ledger.RecordReceipt(ctx, ledger.Receipt{SellerID: Sender, IdempotencyKey: d.EventID, Tenant: d.Tenant, OperationID: d.OperationID})
	if err != nil {
		return fmt.Errorf("inform: receipt of %s: %w", d.EventID, err)
	}
	if dup {
		n.log.InfoContext(ctx, "requester already told", "operationId", d.OperationID, "eventId", d.EventID)
		return nil
	}
	if _, err := n.slack.Post(ctx, msg); err != nil {
		if rerr := n.ledger.ReleaseReceipt(ctx, Sender, d.EventID); rerr != nil {
			return errors.Join(fmt.Errorf("inform: post %s: %w", d.EventID, err), rerr)
		}
		return fmt.Errorf("inform: post %s: %w", d.EventID, err)
	}
	n.log.InfoContext(ctx, "requester told", "operationId", d.OperationID, "eventId", d.EventID, "kind", string(kind))
	return nil
}

// kindOf is what a transition tells the requester, if anything: an approval asked for or
// decided, the buy placed or ended. The steps between (governance, the seller working) are
// not news.
func kindOf(from, to workflow.Status) (slack.RequesterKind, bool) {
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

// update gathers what the message says from the event and the ledger.
func (n *Notifier) update(ctx context.Context, d statusevent.Detail, kind slack.RequesterKind) (slack.RequesterUpdate, error) {
	op, err := n.ledger.GetOperation(ctx, d.Tenant, d.OperationID)
	if err != nil {
		return slack.RequesterUpdate{}, fmt.Errorf("inform: read operation %s: %w", d.OperationID, err)
	}
	u := slack.RequesterUpdate{
		Kind: kind, OperationID: d.OperationID, PONumber: op.PONumber, Seller: d.SellerID,
		MediaBuyID: d.MediaBuyID, Reason: d.Reason, Link: d.Links.Self,
	}
	if d.Amount != nil {
		if a, err := money.ParseDecimal(d.Amount.Value, d.Amount.Currency); err == nil {
			u.Amount = approvalcore.Money{Minor: a.Minor, Currency: a.Currency}
		}
	}
	if kind != slack.KindAwaitingApproval && kind != slack.KindApproved && kind != slack.KindRejected {
		return u, nil
	}
	a, found, err := n.latestApproval(ctx, d.Tenant, d.OperationID)
	if err != nil || !found {
		return u, err
	}
	switch {
	case kind == slack.KindAwaitingApproval && a.Status != ledger.ApprovalPending:
		return u, errStale
	case kind == slack.KindAwaitingApproval:
		u.Approvers, u.Until = a.Approvers, a.ExpiresAt
	case a.Status == ledger.ApprovalApproved && kind == slack.KindApproved, a.Status == ledger.ApprovalRejected && kind == slack.KindRejected:
		u.DecidedBy, u.DecidedAt, u.Comment = a.Decider, a.DecidedAt, a.Comment
	}
	return u, nil
}

// latestApproval is the buy's most recent approval; found is false when it never asked for one.
func (n *Notifier) latestApproval(ctx context.Context, tenant, opID string) (a *ledger.Approval, found bool, err error) {
	id, cursor := "", ""
	for {
		page, err := n.ledger.ListEvents(ctx, tenant, opID, ledger.MaxListLimit, cursor)
		if err != nil {
			return nil, false, fmt.Errorf("inform: timeline of %s: %w", opID, err)
		}
		for _, ev := range page.Items {
			if ev.Type != ledger.EventApprovalRequested {
				continue
			}
			var detail struct {
				ApprovalID string `json:"approval_id"`
			}
			if json.Unmarshal(ev.Detail, &detail) == nil && detail.ApprovalID != "" {
				id = detail.ApprovalID
			}
		}
		if cursor = page.Cursor; cursor == "" {
			break
		}
	}
	if id == "" {
		return nil, false, nil
	}
	if a, err = n.ledger.GetApproval(ctx, id); err != nil {
		return nil, false, fmt.Errorf("inform: read approval %s: %w", id, err)
	}
	return a, true, nil
}
