package publish

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/statusevent"
	"github.com/buyflow/buyflow/internal/workflow"
)

const base = "https://api.example.com"

// fakeBus records what was put; fail decides, per call and entry, whether EventBridge refuses
// an entry.
type fakeBus struct {
	calls int
	put   []types.PutEventsRequestEntry
	fail  func(call, entry int) bool
	err   error
}

func (b *fakeBus) PutEvents(_ context.Context, in *eventbridge.PutEventsInput, _ ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error) {
	b.calls++
	if b.err != nil {
		return nil, b.err
	}
	out := &eventbridge.PutEventsOutput{}
	for i, e := range in.Entries {
		if b.fail != nil && b.fail(b.calls, i) {
			out.FailedEntryCount++
			out.Entries = append(out.Entries, types.PutEventsResultEntry{ErrorCode: aws.String("InternalFailure"), ErrorMessage: aws.String("try again")})
			continue
		}
		b.put = append(b.put, e)
		out.Entries = append(out.Entries, types.PutEventsResultEntry{EventId: aws.String(strconv.Itoa(len(b.put)))})
	}
	return out, nil
}

func (b *fakeBus) details(t *testing.T) []statusevent.Detail {
	t.Helper()
	var out []statusevent.Detail
	for _, e := range b.put {
		var d statusevent.Detail
		if err := json.Unmarshal([]byte(aws.ToString(e.Detail)), &d); err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// streamImage is the stream image of a ledger item: the ledger's own encoding (attributevalue,
// as it writes the item), in the stream's attribute-value type.
func streamImage(t *testing.T, item any, sk string) map[string]events.DynamoDBAttributeValue {
	t.Helper()
	av, err := attributevalue.MarshalMap(item)
	if err != nil {
		t.Fatal(err)
	}
	av["sk"] = &ddbtypes.AttributeValueMemberS{Value: sk}
	out := map[string]events.DynamoDBAttributeValue{}
	for k, v := range av {
		out[k] = convert(t, v)
	}
	return out
}

func convert(t *testing.T, v ddbtypes.AttributeValue) events.DynamoDBAttributeValue {
	switch v := v.(type) {
	case *ddbtypes.AttributeValueMemberS:
		return events.NewStringAttribute(v.Value)
	case *ddbtypes.AttributeValueMemberN:
		return events.NewNumberAttribute(v.Value)
	case *ddbtypes.AttributeValueMemberBOOL:
		return events.NewBooleanAttribute(v.Value)
	case *ddbtypes.AttributeValueMemberB:
		return events.NewBinaryAttribute(v.Value)
	case *ddbtypes.AttributeValueMemberNULL:
		return events.NewNullAttribute()
	case *ddbtypes.AttributeValueMemberL:
		var l []events.DynamoDBAttributeValue
		for _, e := range v.Value {
			l = append(l, convert(t, e))
		}
		return events.NewListAttribute(l)
	case *ddbtypes.AttributeValueMemberM:
		m := map[string]events.DynamoDBAttributeValue{}
		for k, e := range v.Value {
			m[k] = convert(t, e)
		}
		return events.NewMapAttribute(m)
	}
	t.Fatalf("unexpected attribute %T", v)
	return events.DynamoDBAttributeValue{}
}

var seq int

func streamRecord(t *testing.T, name events.DynamoDBOperationType, sk string, oldItem, newItem any) events.DynamoDBEventRecord {
	t.Helper()
	seq++
	r := events.DynamoDBEventRecord{EventName: string(name), Change: events.DynamoDBStreamRecord{
		SequenceNumber: strconv.Itoa(seq), Keys: map[string]events.DynamoDBAttributeValue{"pk": events.NewStringAttribute("x"), "sk": events.NewStringAttribute(sk)},
	}}
	if oldItem != nil {
		r.Change.OldImage = streamImage(t, oldItem, sk)
	}
	if newItem != nil {
		r.Change.NewImage = streamImage(t, newItem, sk)
	}
	return r
}

var t0 = time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)

// buy returns the operation at version v in status s, with a task token and a webhook token
// hash: what must never reach an event.
func buy(v int64, s workflow.Status) record.Operation {
	return record.Operation{
		ID: "op-1", Tenant: "acme", Status: s, Version: v, SellerID: "seller-a", BudgetTotal: "15000.00", Currency: "USD",
		TaskToken: "SECRET-TASK-TOKEN", WebhookTokenHash: "SECRET-HASH", GovernanceContext: "SECRET-GOV-CONTEXT",
		CreatedAt: t0, UpdatedAt: t0.Add(time.Duration(v) * time.Second),
	}
}

// history is a buy's life as the ledger writes it: created, transitions, and writes that leave
// the status as it is (a parked token, an updated field).
func history(t *testing.T) []events.DynamoDBEventRecord {
	created := buy(1, workflow.StatusRequested)
	checking := buy(2, workflow.StatusCheckingGovernance)
	tokened := checking
	tokened.TaskToken = "ANOTHER-SECRET"
	creating := buy(3, workflow.StatusCreating)
	submitted := buy(4, workflow.StatusSubmitted)
	updated := buy(5, workflow.StatusSubmitted)
	completed := buy(6, workflow.StatusCompleted)
	completed.MediaBuyID = "mb-77"
	return []events.DynamoDBEventRecord{
		streamRecord(t, events.DynamoDBOperationTypeInsert, "OP", nil, created),
		streamRecord(t, events.DynamoDBOperationTypeInsert, "EV#2026", nil, record.Event{Type: "created"}),
		streamRecord(t, events.DynamoDBOperationTypeModify, "OP", created, checking),
		streamRecord(t, events.DynamoDBOperationTypeModify, "OP", checking, tokened),
		streamRecord(t, events.DynamoDBOperationTypeModify, "OP", tokened, creating),
		streamRecord(t, events.DynamoDBOperationTypeModify, "OP", creating, submitted),
		streamRecord(t, events.DynamoDBOperationTypeModify, "OP", submitted, updated),
		streamRecord(t, events.DynamoDBOperationTypeModify, "OP", updated, completed),
		streamRecord(t, events.DynamoDBOperationTypeRemove, "OP", completed, nil),
	}
}

func TestOneEventPerTransitionInOrder(t *testing.T) {
	bus := &fakeBus{}
	resp, err := New(bus, "buyflow-status", base).Handle(context.Background(), events.DynamoDBEvent{Records: history(t)})
	if err != nil || len(resp.BatchItemFailures) != 0 {
		t.Fatalf("Handle = %+v, %v", resp, err)
	}
	got := bus.details(t)
	want := []struct {
		from, to string
		seq      int64
	}{{"", "requested", 1}, {"requested", "checking_governance", 2}, {"checking_governance", "creating", 3}, {"creating", "submitted", 4}, {"submitted", "completed", 6}}
	if len(got) != len(want) {
		t.Fatalf("published %d events, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		d := got[i]
		if d.From != w.from || d.To != w.to || d.Sequence != w.seq || d.EventID != statusevent.EventID(statusevent.KindMediaBuy, "op-1", w.seq) {
			t.Errorf("event %d = %s→%s seq %d id %s, want %s→%s seq %d", i, d.From, d.To, d.Sequence, d.EventID, w.from, w.to, w.seq)
		}
		if d.Tenant != "acme" || d.SellerID != "seller-a" || d.Amount == nil || *d.Amount != (statusevent.Amount{Value: "15000.00", Currency: "USD"}) {
			t.Errorf("event %d: tenant, seller or amount wrong: %+v", i, d)
		}
		if d.Links.Self != base+"/v1/media-buys/op-1" || d.Links.Events != base+"/v1/media-buys/op-1/events" {
			t.Errorf("event %d links = %+v", i, d.Links)
		}
		if e := bus.put[i]; aws.ToString(e.Source) != statusevent.Source || aws.ToString(e.DetailType) != statusevent.DetailTypeMediaBuy || aws.ToString(e.EventBusName) != "buyflow-status" {
			t.Errorf("entry %d envelope = %s / %s / %s", i, aws.ToString(e.Source), aws.ToString(e.DetailType), aws.ToString(e.EventBusName))
		}
	}
	if got[4].MediaBuyID != "mb-77" || !got[4].OccurredAt.Equal(t0.Add(6*time.Second)) {
		t.Errorf("completed event = %+v", got[4])
	}
	for _, e := range bus.put {
		for _, secret := range []string{"SECRET", "task_token", "webhook_token", "governance_context"} {
			if json.Valid([]byte(*e.Detail)) && contains(*e.Detail, secret) {
				t.Errorf("an event carries %q: %s", secret, *e.Detail)
			}
		}
		ev := `{"id":"x","source":"buyflow","detail-type":` + strconv.Quote(*e.DetailType) + `,"time":"2026-05-01T09:00:00Z","detail":` + *e.Detail + `}`
		if _, err := statusevent.Parse([]byte(ev)); err != nil {
			t.Errorf("a published event does not parse as one: %v", err)
		}
	}
}

func contains(s, sub string) bool {
	return len(sub) > 0 && len(s) >= len(sub) && (s == sub || indexOf(s, sub) >= 0)
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

// A batch that fails part-way reports the first record not published; Lambda sends the batch
// again from it, and what a consumer then sees, deduped on the event id, is every transition
// once and in order.
func TestRetriedPublishIsNotAVisibleDuplicate(t *testing.T) {
	recs := history(t)
	for _, tc := range []struct {
		name string
		bus  *fakeBus
	}{
		{"an entry refused", &fakeBus{fail: func(call, entry int) bool { return call == 3 && entry == 0 }}},
		{"the call failed", &fakeBus{err: errors.New("throttled")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := New(tc.bus, "bus", base)
			resp, err := p.Handle(context.Background(), events.DynamoDBEvent{Records: recs})
			if err != nil || len(resp.BatchItemFailures) != 1 {
				t.Fatalf("Handle = %+v, %v; want one batch item failure", resp, err)
			}
			from := resp.BatchItemFailures[0].ItemIdentifier
			tc.bus.err = nil
			i := 0
			for recs[i].Change.SequenceNumber != from {
				i++
			}
			if resp, err := p.Handle(context.Background(), events.DynamoDBEvent{Records: recs[i:]}); err != nil || len(resp.BatchItemFailures) != 0 {
				t.Fatalf("retry = %+v, %v", resp, err)
			}
			seen := map[string]bool{}
			var order []int64
			for _, d := range tc.bus.details(t) {
				if !seen[d.EventID] {
					seen[d.EventID] = true
					order = append(order, d.Sequence)
				}
			}
			if want := []int64{1, 2, 3, 4, 6}; !equal(order, want) {
				t.Errorf("deduped sequences = %v, want %v", order, want)
			}
		})
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestChangeAndCampaignEvents(t *testing.T) {
	chgOld := buy(3, workflow.StatusSubmitted)
	chgOld.ID, chgOld.Kind, chgOld.ParentID = "chg-1", record.KindModification, "op-1"
	chgNew := chgOld
	chgNew.Version, chgNew.Status, chgNew.Reason = 4, workflow.StatusFailed, "seller refused the update"
	camp := record.Campaign{ID: "cmp-1", Tenant: "acme", BudgetTotal: "50000.00", Currency: "EUR", CreatedAt: t0}
	settled := camp
	settled.Outcome, settled.SettledAt = "completed", t0.Add(time.Hour)
	bus := &fakeBus{}
	_, err := New(bus, "bus", base).Handle(context.Background(), events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{
		streamRecord(t, events.DynamoDBOperationTypeModify, "OP", chgOld, chgNew),
		streamRecord(t, events.DynamoDBOperationTypeInsert, "CAMPAIGN", nil, camp),
		streamRecord(t, events.DynamoDBOperationTypeModify, "CAMPAIGN", camp, camp),
		streamRecord(t, events.DynamoDBOperationTypeModify, "CAMPAIGN", camp, settled),
		streamRecord(t, events.DynamoDBOperationTypeModify, "CAMPAIGN", settled, settled),
	}})
	if err != nil {
		t.Fatal(err)
	}
	got := bus.details(t)
	if len(got) != 3 {
		t.Fatalf("published %d events, want 3: %+v", len(got), got)
	}
	if c := got[0]; c.Kind != statusevent.KindChange || c.ParentID != "op-1" || c.Links.Self != base+"/v1/media-buys/op-1" || c.Reason != "seller refused the update" || c.EventID != "change:chg-1:4" {
		t.Errorf("change event = %+v", c)
	}
	if aws.ToString(bus.put[0].DetailType) != statusevent.DetailTypeChange || aws.ToString(bus.put[1].DetailType) != statusevent.DetailTypeCampaign {
		t.Errorf("detail types = %s, %s", aws.ToString(bus.put[0].DetailType), aws.ToString(bus.put[1].DetailType))
	}
	if c := got[1]; c.To != "running" || c.Sequence != 1 || c.Amount.Currency != "EUR" || c.Links.Self != base+"/v1/campaigns/cmp-1" {
		t.Errorf("campaign created = %+v", c)
	}
	if c := got[2]; c.From != "running" || c.To != "completed" || c.Sequence != 2 || !c.OccurredAt.Equal(t0.Add(time.Hour)) {
		t.Errorf("campaign settled = %+v", c)
	}
}

// A campaign that failed in its own steps carries its reason on the outcome event.
func TestCampaignFailureEventCarriesTheReason(t *testing.T) {
	camp := record.Campaign{ID: "cmp-3", Tenant: "acme", BudgetTotal: "50000.00", Currency: "EUR", CreatedAt: t0, Version: 1}
	failed := camp
	failed.Outcome, failed.SettledAt, failed.Version, failed.Reason = "failed", t0.Add(time.Hour), 2, "The campaign stopped before any leg was placed."
	bus := &fakeBus{}
	_, err := New(bus, "bus", base).Handle(context.Background(), events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{
		streamRecord(t, events.DynamoDBOperationTypeModify, "CAMPAIGN", camp, failed),
	}})
	if err != nil {
		t.Fatal(err)
	}
	got := bus.details(t)
	if len(got) != 1 || got[0].To != "failed" || got[0].Reason != failed.Reason {
		t.Fatalf("events = %+v", got)
	}
}

// Each round of a campaign's approval is an event (running -> awaiting_approval) ordered by the
// campaign's version, with the requester's Slack id; a retried write naming the same approval
// is none, and the outcome comes after it.
func TestCampaignApprovalEvents(t *testing.T) {
	camp := record.Campaign{ID: "cmp-2", Tenant: "acme", BudgetTotal: "50000.00", Currency: "EUR", CreatedAt: t0, Version: 1, NotifySlack: "U024BE7LH"}
	asked := camp
	asked.ApprovalID, asked.Version = "apr_1", 2
	retried := asked
	retried.Version = 3
	escalated := retried
	escalated.ApprovalID, escalated.Version = "apr_2", 4
	settled := escalated
	settled.Outcome, settled.SettledAt, settled.Version = "canceled", t0.Add(time.Hour), 5
	rec := streamRecord(t, events.DynamoDBOperationTypeModify, "CAMPAIGN", camp, asked)
	rec.Change.ApproximateCreationDateTime = events.SecondsEpochTime{Time: t0.Add(time.Minute)}
	bus := &fakeBus{}
	_, err := New(bus, "bus", base).Handle(context.Background(), events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{
		streamRecord(t, events.DynamoDBOperationTypeInsert, "CAMPAIGN", nil, camp),
		rec,
		streamRecord(t, events.DynamoDBOperationTypeModify, "CAMPAIGN", asked, retried),
		streamRecord(t, events.DynamoDBOperationTypeModify, "CAMPAIGN", retried, escalated),
		streamRecord(t, events.DynamoDBOperationTypeModify, "CAMPAIGN", escalated, settled),
	}})
	if err != nil {
		t.Fatal(err)
	}
	got := bus.details(t)
	var seen []string
	for _, d := range got {
		seen = append(seen, fmt.Sprintf("%d:%s>%s", d.Sequence, d.From, d.To))
		if d.Notify == nil || d.Notify.Slack != "U024BE7LH" || d.EventID != statusevent.EventID(statusevent.KindCampaign, "cmp-2", d.Sequence) {
			t.Errorf("event %+v", d)
		}
	}
	if want := "1:>running 2:running>awaiting_approval 4:running>awaiting_approval 5:running>canceled"; strings.Join(seen, " ") != want {
		t.Errorf("events %s, want %s", strings.Join(seen, " "), want)
	}
	if len(got) > 1 && !got[1].OccurredAt.Equal(t0.Add(time.Minute)) {
		t.Errorf("the approval event occurred at %s, want the write's time", got[1].OccurredAt)
	}
}

// A record whose image is not the ledger's shape is skipped, not retried for ever.
func TestUndecodableRecordIsSkipped(t *testing.T) {
	bad := events.DynamoDBEventRecord{EventName: "MODIFY", Change: events.DynamoDBStreamRecord{
		SequenceNumber: "1", Keys: map[string]events.DynamoDBAttributeValue{"sk": events.NewStringAttribute("OP")},
		NewImage: map[string]events.DynamoDBAttributeValue{"status": events.NewStringAttribute("completed"), "version": events.NewStringAttribute("seven")},
	}}
	good := streamRecord(t, events.DynamoDBOperationTypeInsert, "OP", nil, buy(1, workflow.StatusRequested))
	bus := &fakeBus{}
	resp, err := New(bus, "bus", base).Handle(context.Background(), events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{bad, good}})
	if err != nil || len(resp.BatchItemFailures) != 0 || len(bus.put) != 1 {
		t.Fatalf("Handle = %+v, %v; put %d", resp, err, len(bus.put))
	}
}

// Many operations' events go out at most ten to a call and one per operation to a call, so a
// refused entry never lets the same operation's next event through first.
func TestBatchIsChunkedPerOperation(t *testing.T) {
	var recs []events.DynamoDBEventRecord
	for i := range 12 {
		op := buy(1, workflow.StatusRequested)
		op.ID = "op-" + strconv.Itoa(i)
		recs = append(recs, streamRecord(t, events.DynamoDBOperationTypeInsert, "OP", nil, op))
	}
	first, second := buy(1, workflow.StatusRequested), buy(2, workflow.StatusCheckingGovernance)
	first.ID, second.ID = "op-0", "op-0"
	recs = append(recs, streamRecord(t, events.DynamoDBOperationTypeModify, "OP", first, second))
	bus := &fakeBus{}
	if _, err := New(bus, "bus", base).Handle(context.Background(), events.DynamoDBEvent{Records: recs}); err != nil {
		t.Fatal(err)
	}
	if bus.calls != 2 || len(bus.put) != 13 {
		t.Fatalf("%d calls put %d events, want 2 calls (10, then 2 + op-0's second)", bus.calls, len(bus.put))
	}
	got := bus.details(t)
	if last := got[12]; last.OperationID != "op-0" || last.Sequence != 2 {
		t.Errorf("last event = %+v", last)
	}
}
