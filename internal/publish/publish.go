// Package publish is the publish Lambda's use case: it reads the ledger table's DynamoDB
// stream and puts one status event (internal/statusevent) on the stack's EventBridge bus for
// every status change the ledger recorded: an operation item whose status differs between its
// old and new image (a buy or a change), a campaign item created or given its outcome.
//
// Publishing from the stream, not from the code that moved the status, is what makes it
// exactly one event per transition whoever made it (a stage, the webhook receiver, the sweep,
// an approver): the stream carries each committed write of an item once, in the order of the
// writes. Delivery is at least once: a batch that fails part-way reports the first record it
// could not publish (ReportBatchItemFailures), Lambda retries from there; a PutEvents whose
// answer the SDK could not read (EventBridge had taken it) is sent again by the SDK, and
// EventBridge has no idempotency token, so its entries are put twice. Either way a record
// published twice carries the same event id, which a consumer dedupes on.
package publish

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/buyflow/buyflow/internal/statusevent"
)

// putEventsAPI is the part of the EventBridge client the publisher uses.
type putEventsAPI interface {
	PutEvents(ctx context.Context, in *eventbridge.PutEventsInput, optFns ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error)
}

// Service turns ledger stream records into status events on one bus.
type Service struct {
	api     putEventsAPI
	bus     string
	baseURL string
}

// New returns a publisher to the bus named bus; links in the events start at baseURL (the HTTP
// API's root).
func New(api putEventsAPI, bus, baseURL string) *Service {
	return &Service{api: api, bus: bus, baseURL: baseURL}
}

// maxEntries is PutEvents' limit on entries per call.
const maxEntries = 10

// pending is one event to publish and the stream record it came from.
type pending struct {
	seq   string // the record's stream sequence number, the batch item identifier
	key   string // the operation (or campaign) the event is about
	entry types.PutEventsRequestEntry
}

// chunks splits todo, in order, into PutEvents calls of at most maxEntries that hold at most
// one event of each operation: EventBridge may take some entries of a call and refuse others,
// and an operation's later event must never be taken while its earlier one is refused.
func chunks(todo []pending) [][]pending {
	var out [][]pending
	var cur []pending
	keys := map[string]bool{}
	for _, p := range todo {
		if len(cur) == maxEntries || keys[p.key] {
			out, cur, keys = append(out, cur), nil, map[string]bool{}
		}
		cur, keys[p.key] = append(cur, p), true
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// Handle publishes the status events of one batch of stream records, in the batch's order. It
// reports the first record whose event could not be put (and so every record after it, which
// Lambda sends again): never a later one, so one operation's events never overtake each other.
// A record that is not a status change publishes nothing; one whose images do not decode is
// logged and skipped, since no retry could ever publish it.
func (p *Service) Handle(ctx context.Context, batch events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	var todo []pending
	for _, rec := range batch.Records {
		d, ok, err := transition(rec, p.baseURL)
		if err != nil {
			slog.ErrorContext(ctx, "ledger stream record skipped", "sequenceNumber", rec.Change.SequenceNumber, "err", err)
			continue
		}
		if !ok {
			continue
		}
		detail, err := json.Marshal(d)
		if err != nil {
			return events.DynamoDBEventResponse{}, fmt.Errorf("publish: encode event %s: %w", d.EventID, err)
		}
		todo = append(todo, pending{seq: rec.Change.SequenceNumber, key: string(d.Kind) + ":" + d.OperationID, entry: types.PutEventsRequestEntry{
			EventBusName: aws.String(p.bus), Source: aws.String(statusevent.Source),
			DetailType: aws.String(d.Kind.DetailType()), Detail: aws.String(string(detail)),
			Time: aws.Time(d.OccurredAt),
		}})
	}
	for _, chunk := range chunks(todo) {
		if failed := p.put(ctx, chunk); failed >= 0 {
			return events.DynamoDBEventResponse{BatchItemFailures: []events.DynamoDBBatchItemFailure{{ItemIdentifier: chunk[failed].seq}}}, nil
		}
	}
	return events.DynamoDBEventResponse{}, nil
}

// put sends one chunk and returns the index of its first entry EventBridge did not take, or -1.
func (p *Service) put(ctx context.Context, chunk []pending) int {
	entries := make([]types.PutEventsRequestEntry, len(chunk))
	for i, c := range chunk {
		entries[i] = c.entry
	}
	out, err := p.api.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: entries})
	if err != nil {
		slog.WarnContext(ctx, "put events failed; the batch is retried from its first event", "events", len(entries), "err", err)
		return 0
	}
	if out.FailedEntryCount == 0 {
		return -1
	}
	for i, r := range out.Entries {
		if r.ErrorCode != nil {
			slog.WarnContext(ctx, "an event was not put; the batch is retried from it", "errorCode", aws.ToString(r.ErrorCode), "errorMessage", aws.ToString(r.ErrorMessage))
			return i
		}
	}
	return 0 // a failure count without a failed entry: retry it all
}

// The ledger's attribute names the publisher reads (internal/ledger's operation and campaign
// items). Nothing else of an item reaches an event.
const (
	attrSK          = "sk"
	attrID          = "id"
	attrTenant      = "tenant"
	attrStatus      = "status"
	attrVersion     = "version"
	attrKind        = "kind"
	attrParentID    = "parent_id"
	attrSellerID    = "seller_id"
	attrMediaBuyID  = "media_buy_id"
	attrBudget      = "budget_total"
	attrCurrency    = "currency"
	attrReason      = "reason"
	attrErrorCode   = "error_code"
	attrUpdatedAt   = "updated_at"
	attrCreatedAt   = "created_at"
	attrOutcome     = "outcome"
	attrSettledAt   = "settled_at"
	attrNotifySlack = "notify_slack"
	attrApprovalID  = "approval_id"
	skOperation     = "OP"
	skCampaign      = "CAMPAIGN"
	kindChange      = "modification"
	campaignRunning = "running"
	// campaignAwaitingApproval is a campaign whose one approval was requested (a round of it:
	// an escalation asks again); after the decision it runs on (its legs' events say so) until
	// its outcome.
	campaignAwaitingApproval = "awaiting_approval"
)

// transition reads the status change a ledger stream record carries: ok is false for a record
// that is not one (another item, a write that left the status as it was, a removal).
func transition(rec events.DynamoDBEventRecord, baseURL string) (d statusevent.Detail, ok bool, err error) {
	if rec.EventName != string(events.DynamoDBOperationTypeInsert) && rec.EventName != string(events.DynamoDBOperationTypeModify) {
		return d, false, nil
	}
	oldImg, newImg := image(rec.Change.OldImage), image(rec.Change.NewImage)
	switch image(rec.Change.Keys).str(attrSK) {
	case skOperation:
		return operationTransition(oldImg, newImg, baseURL)
	case skCampaign:
		return campaignTransition(oldImg, newImg, rec.Change.ApproximateCreationDateTime.UTC(), baseURL)
	}
	return d, false, nil
}

func operationTransition(oldImg, newImg image, baseURL string) (statusevent.Detail, bool, error) {
	from, to := oldImg.str(attrStatus), newImg.str(attrStatus)
	if from == to {
		return statusevent.Detail{}, false, nil
	}
	id, tenant := newImg.str(attrID), newImg.str(attrTenant)
	seq, err := strconv.ParseInt(newImg.num(attrVersion), 10, 64)
	if err != nil || seq < 1 || id == "" || tenant == "" || to == "" {
		return statusevent.Detail{}, false, fmt.Errorf("publish: operation %q: not an operation image (tenant %q, status %q, version %q)", id, tenant, to, newImg.num(attrVersion))
	}
	kind, buy := statusevent.KindMediaBuy, id
	if newImg.str(attrKind) == kindChange {
		kind, buy = statusevent.KindChange, newImg.str(attrParentID)
	}
	d := statusevent.Detail{
		SchemaVersion: statusevent.SchemaVersion, EventID: statusevent.EventID(kind, id, seq), Kind: kind,
		OperationID: id, Tenant: tenant, Sequence: seq, From: from, To: to,
		SellerID: newImg.str(attrSellerID), MediaBuyID: newImg.str(attrMediaBuyID),
		Amount: amount(newImg), Reason: newImg.str(attrReason), ErrorCode: newImg.str(attrErrorCode),
		OccurredAt: newImg.time(attrUpdatedAt), Links: links(baseURL, "media-buys", buy), Notify: notify(newImg),
	}
	if kind == statusevent.KindChange {
		d.ParentID = buy
	}
	return d, true, nil
}

// campaignTransition: a campaign is running from its creation until the Campaign execution
// records its outcome, once; each round of its one approval is an event of its own (written
// at).  The sequence is the campaign's version after the write (1 and 2 for the creation and
// the outcome of a campaign stored before versions were counted).
func campaignTransition(oldImg, newImg image, at time.Time, baseURL string) (statusevent.Detail, bool, error) {
	id, tenant := newImg.str(attrID), newImg.str(attrTenant)
	if id == "" || tenant == "" {
		return statusevent.Detail{}, false, fmt.Errorf("publish: campaign %q: not a campaign image", id)
	}
	d := statusevent.Detail{
		SchemaVersion: statusevent.SchemaVersion, Kind: statusevent.KindCampaign, OperationID: id, Tenant: tenant,
		Amount: amount(newImg), Links: links(baseURL, "campaigns", id), Notify: notify(newImg),
	}
	version, err := strconv.ParseInt(newImg.num(attrVersion), 10, 64)
	if err != nil {
		version = 0
	}
	outcome, approval := newImg.str(attrOutcome), newImg.str(attrApprovalID)
	switch {
	case oldImg == nil:
		d.Sequence, d.To, d.OccurredAt = max(version, 1), campaignRunning, newImg.time(attrCreatedAt)
	case oldImg.str(attrOutcome) == "" && outcome != "":
		d.Sequence, d.From, d.To, d.OccurredAt = max(version, 2), campaignRunning, outcome, newImg.time(attrSettledAt)
		d.Reason = newImg.str(attrReason) // a campaign that failed in its own steps says why
	case outcome == "" && approval != "" && approval != oldImg.str(attrApprovalID):
		if version < 2 {
			return statusevent.Detail{}, false, fmt.Errorf("publish: campaign %q: an approval named without a version", id)
		}
		d.Sequence, d.From, d.To, d.OccurredAt = version, campaignRunning, campaignAwaitingApproval, at
	default:
		return statusevent.Detail{}, false, nil
	}
	d.EventID = statusevent.EventID(d.Kind, id, d.Sequence)
	return d, true, nil
}

func amount(img image) *statusevent.Amount {
	v, c := img.str(attrBudget), img.str(attrCurrency)
	if v == "" || c == "" {
		return nil
	}
	return &statusevent.Amount{Value: v, Currency: c}
}

func links(baseURL, collection, id string) statusevent.Links {
	self := baseURL + "/v1/" + collection + "/" + url.PathEscape(id)
	return statusevent.Links{Self: self, Events: self + "/events"}
}

func notify(img image) *statusevent.Notify {
	if s := img.str(attrNotifySlack); s != "" {
		return &statusevent.Notify{Slack: s}
	}
	return nil
}

// image is one side of a stream record (nil when absent, as the old image of an insert).
type image map[string]events.DynamoDBAttributeValue

func (m image) str(name string) string {
	if v, ok := m[name]; ok && v.DataType() == events.DataTypeString {
		return v.String()
	}
	return ""
}

func (m image) num(name string) string {
	if v, ok := m[name]; ok && v.DataType() == events.DataTypeNumber {
		return v.Number()
	}
	return ""
}

// time reads a time the ledger stored (attributevalue encodes time.Time as RFC 3339 text).
func (m image) time(name string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, m.str(name))
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}
