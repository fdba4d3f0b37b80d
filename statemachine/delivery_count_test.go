package statemachine

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/clocktest"
	"github.com/buyflow/buyflow/internal/delivery"
	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/stagetest"
	"github.com/buyflow/buyflow/internal/webhook"
	"github.com/buyflow/buyflow/internal/workflow"
)

// countingStore counts the delivery reader's ledger calls by method, over the real ledger.
type countingStore struct {
	*ledger.Store
	mu sync.Mutex
	n  map[string]int
}

// count counts one call of method m about operation id, by id.
func (c *countingStore) count(m, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[id+"/"+m]++
}

// take returns the calls about operation id counted since the last take of it, by method.
func (c *countingStore) take(id string) map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := map[string]int{}
	for k, v := range c.n {
		if m, ok := strings.CutPrefix(k, id+"/"); ok {
			n[m] = v
			delete(c.n, k)
		}
	}
	return n
}

func (c *countingStore) GetBuyState(ctx context.Context, tenant, opID string) (*record.BuyState, error) {
	c.count("GetBuyState", opID)
	return c.Store.GetBuyState(ctx, tenant, opID)
}

func (c *countingStore) PutDeliverySnapshot(ctx context.Context, d record.DeliverySnapshot) (bool, *record.DeliverySnapshot, error) {
	c.count("PutDeliverySnapshot", d.OperationID)
	return c.Store.PutDeliverySnapshot(ctx, d)
}

func (c *countingStore) ListDeliverySnapshots(ctx context.Context, tenant, opID string, limit int) ([]record.DeliverySnapshot, error) {
	c.count("ListDeliverySnapshots", opID)
	return c.Store.ListDeliverySnapshots(ctx, tenant, opID, limit)
}

func (c *countingStore) AppendEvent(ctx context.Context, tenant, opID string, ev record.Event) error {
	c.count("AppendEvent", opID)
	return c.Store.AppendEvent(ctx, tenant, opID, ev)
}

func (c *countingStore) ScheduleLive(ctx context.Context, op *record.Operation, next time.Time, mark string) error {
	c.count("ScheduleLive", op.ID)
	return c.Store.ScheduleLive(ctx, op, next, mark)
}

func (c *countingStore) RetireLive(ctx context.Context, tenant, id string) error {
	c.count("RetireLive", id)
	return c.Store.RetireLive(ctx, tenant, id)
}

func (c *countingStore) BackfillLive(ctx context.Context, scanLimit int) (int, bool, error) {
	c.count("BackfillLive", "")
	return c.Store.BackfillLive(ctx, scanLimit)
}

func (c *countingStore) MarkDeliveryPushed(ctx context.Context, tenant, id string) error {
	c.count("MarkDeliveryPushed", id)
	return c.Store.MarkDeliveryPushed(ctx, tenant, id)
}

// countingDB counts the DynamoDB calls made through it: reads (GetItem, Query, Scan) and
// writes (PutItem, UpdateItem, DeleteItem, TransactWriteItems).
type countingDB struct {
	*dynamodb.Client
	mu            sync.Mutex
	reads, writes int
}

// countCall counts one call of f, a read or a write, and makes it.
func countCall[I, O any](c *countingDB, read bool, f func(context.Context, I, ...func(*dynamodb.Options)) (O, error), ctx context.Context, in I, o ...func(*dynamodb.Options)) (O, error) {
	c.mu.Lock()
	if read {
		c.reads++
	} else {
		c.writes++
	}
	c.mu.Unlock()
	return f(ctx, in, o...)
}

// take returns the reads and writes counted since the last take.
func (c *countingDB) take() (reads, writes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	reads, writes, c.reads, c.writes = c.reads, c.writes, 0, 0
	return reads, writes
}

func (c *countingDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return countCall(c, true, c.Client.GetItem, ctx, in, o...)
}

func (c *countingDB) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return countCall(c, true, c.Client.Query, ctx, in, o...)
}

func (c *countingDB) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	return countCall(c, true, c.Client.Scan, ctx, in, o...)
}

func (c *countingDB) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return countCall(c, false, c.Client.PutItem, ctx, in, o...)
}

func (c *countingDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return countCall(c, false, c.Client.UpdateItem, ctx, in, o...)
}

func (c *countingDB) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return countCall(c, false, c.Client.DeleteItem, ctx, in, o...)
}

func (c *countingDB) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return countCall(c, false, c.Client.TransactWriteItems, ctx, in, o...)
}

// movingSeller answers get_media_buy_delivery with delivery that moved since the last call, for
// every buy asked, and counts the calls by account.
type movingSeller struct {
	calls map[string]int
	now   func() time.Time
}

// Capabilities: seller "s-push" offers push reporting, the others do not.
func (s *movingSeller) Capabilities(_ context.Context, agentID string) (*adcp.Capabilities, error) {
	if agentID == "s-push" {
		return &adcp.Capabilities{Raw: json.RawMessage(`{"media_buy":{"reporting_delivery_methods":["webhook"]}}`)}, nil
	}
	return &adcp.Capabilities{Raw: json.RawMessage(`{}`)}, nil
}

func (s *movingSeller) GetMediaBuyDelivery(_ context.Context, _ string, req adcp.GetMediaBuyDeliveryRequest) (*adcp.DeliveryReport, error) {
	s.calls[req.Account.AccountID]++
	rep := &adcp.DeliveryReport{Currency: "USD"}
	rep.ReportingPeriod.End = s.now().Format(time.RFC3339)
	for _, id := range req.MediaBuyIDs {
		row := adcp.MediaBuyDelivery{MediaBuyID: id, Status: "active"}
		row.Totals.Spend = json.Number(fmt.Sprint(hoursIn(s.now())))
		rep.MediaBuys = append(rep.MediaBuys, row)
	}
	return rep, nil
}

// hoursIn is the spend the sellers of TestDeliveryModelMatchesCountedCalls report at t: it grows
// every hour, within the buys' budget.
func hoursIn(t time.Time) float64 {
	return t.Sub(time.Date(2099, 3, 1, 0, 0, 0, 0, time.UTC)).Hours()
}

// TestDeliveryModelMatchesCountedCalls runs the real reader over the real ledger (the
// emulator) through the life of two buys, one at a seller that offers push reporting, the clock moved an
// hour at a time, and checks the whole-life model's assumptions against what it counted. The
// pulled buy: its pulls (flightReads), the ledger calls per pull that moved (pullOps +
// movedOps) and its retirement, one get_media_buy_delivery per pull; and after its first pull
// no read writes its operation (its live entry takes the listing). The pushed buy, pushed a
// report a day from its first day through the real webhook receiver (Bearer, as its
// reporting_webhook is registered): the DynamoDB calls per push (pushReceiverOps +
// pushReaderOps reads, movedOps writes, one more write when it marks the buy), its
// MarkDeliveryPushed calls (pushMarks), its pulls (flightReads with pushedAfter), each of a
// pushed buy also reading its newest snapshot, and its watches (the pushed pulls that found a
// push within PushAlive: no call to the seller, nothing written but the next watch). A
// redelivered push writes nothing. The backfill's progress is read once by a warm reader.
func TestDeliveryModelMatchesCountedCalls(t *testing.T) {
	db, table := dynamotest.Start(t)
	clk := clocktest.At(time.Date(2099, 3, 1, 0, 0, 0, 0, time.UTC))
	cdb := &countingDB{Client: db}
	store := ledger.New(cdb, table)
	store.Now = clk.Now
	ctx := context.Background()
	begin := clk.Now()
	const pushToken = "tok-op-push-0123456789abcdef"
	tokenHash := record.HashToken(pushToken)
	for _, id := range []string{"op-pull", "op-push"} {
		seller := map[string]string{"op-pull": "s", "op-push": "s-push"}[id]
		req := fmt.Sprintf(`{"seller_id":%q,"currency":"USD","media_buy":{"account":{"account_id":%q},"start_time":%q,"end_time":%q}}`,
			seller, id, begin.Format(time.RFC3339), begin.Add(lifeFlight).Format(time.RFC3339))
		if _, err := store.CreateOperation(ctx, record.Operation{ID: id, Tenant: "t", SellerID: seller, BudgetTotal: "1000", Currency: "USD", Request: json.RawMessage(req)}); err != nil {
			t.Fatal(err)
		}
		mb := "mb-" + id
		for _, to := range []workflow.Status{workflow.StatusCreating, workflow.StatusCompleted} {
			if _, err := store.Transition(ctx, "t", id, to, record.AnyVersion, record.Patch{MediaBuyID: &mb, WebhookTokenHash: &tokenHash}); err != nil {
				t.Fatal(err)
			}
		}
	}
	counted := &countingStore{Store: store, n: map[string]int{}}
	seller := &movingSeller{now: clk.Now, calls: map[string]int{}}
	r := delivery.New(counted, seller, delivery.Config{Now: clk.Now})
	receiver, err := webhook.New(webhook.Config{Ledger: counted, Operations: counted, Tasks: &stagetest.Completer{}, Now: clk.Now,
		Reports: delivery.New(counted, nil, delivery.Config{Now: clk.Now}), PublicBaseURL: "https://api.example.com",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	push := func(key string, spend float64) events.APIGatewayV2HTTPResponse {
		t.Helper()
		body, err := json.Marshal(map[string]any{"idempotency_key": key, "task_id": "rpt-mb-op-push", "task_type": "media_buy_delivery",
			"status": "completed", "timestamp": clk.Now().Format(time.RFC3339), "token": pushToken,
			"result": map[string]any{"notification_type": "scheduled", "currency": "USD",
				"reporting_period":     map[string]any{"start": begin.Format(time.RFC3339), "end": clk.Now().Format(time.RFC3339)},
				"media_buy_deliveries": []any{map[string]any{"media_buy_id": "mb-op-push", "status": "active", "totals": map[string]any{"spend": spend}}}}})
		if err != nil {
			t.Fatal(err)
		}
		req := events.APIGatewayV2HTTPRequest{RawPath: "/v1/webhooks/adcp/op-push", Body: string(body),
			PathParameters: map[string]string{"operation_id": "op-push"},
			Headers:        map[string]string{"content-type": "application/json", "authorization": "Bearer " + pushToken}}
		req.RequestContext.HTTP.Method = http.MethodPost
		resp, err := receiver.HandleHTTP(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}

	pushedAfter := 24 * time.Hour / reportsPerDay
	var opAfterFirst *record.Operation
	pulls := map[string]int{}
	retired, pushes, pushedPulls, watched, marks, runs := 0, 0, 0, 0, 0, 0
	for at := time.Duration(0); at <= lifeFlight+delivery.DefaultFinalAfter; at += time.Hour {
		if at >= pushedAfter && at <= lifeFlight && at%(24*time.Hour/reportsPerDay) == 0 { // the day's report, the last one at the end
			// The day's report reaches a webhook instance that has not seen the buy, as the
			// model assumes (a day apart): a fresh store, without the owners LocateOperation
			// remembers, so the push reads the operation index as a cold instance does.
			fresh := ledger.New(cdb, table)
			fresh.Now = clk.Now
			counted.Store = fresh
			cdb.take()
			key := fmt.Sprintf("whk_push_%06d_0123456789", pushes)
			spend := hoursIn(clk.Now()) + 0.5 // not what a pull reads then
			if resp := push(key, spend); resp.StatusCode != http.StatusOK || !strings.Contains(resp.Body, `"reported"`) {
				t.Fatalf("push at %s: %d %s", at, resp.StatusCode, resp.Body)
			}
			n := counted.take("op-push")
			reads, writes := cdb.take()
			mark := n["MarkDeliveryPushed"]
			if reads != pushReceiverOps+pushReaderOps || writes != movedOps+mark || n["PutDeliverySnapshot"]+n["AppendEvent"] != movedOps {
				t.Fatalf("the push at %s: %d reads, %d writes (%v); the model says %d reads, %d writes when moved (and one when it marks)",
					at, reads, writes, n, pushReceiverOps+pushReaderOps, movedOps)
			}
			if resp := push(key, spend); resp.StatusCode != http.StatusOK || !strings.Contains(resp.Body, `"duplicate"`) {
				t.Fatalf("the push at %s again: %d %s", at, resp.StatusCode, resp.Body)
			}
			counted.take("op-push")
			if _, writes := cdb.take(); writes != 0 {
				t.Fatalf("the push at %s, delivered again, wrote %d items", at, writes)
			}
			marks += mark
			pushes++
		}
		wasPushed := pushes > 0
		calls := seller.calls["op-push"]
		rep, err := r.Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		runs++
		if n := counted.take(""); n["BackfillLive"] != map[bool]int{true: 1, false: 0}[runs == 1] {
			t.Fatalf("run %d read the backfill's progress %d times; a warm reader reads it once", runs, n["BackfillLive"])
		}
		for _, id := range []string{"op-pull", "op-push"} {
			n := counted.take(id)
			if n["ScheduleLive"]+n["RetireLive"] == 0 {
				continue // not due
			}
			pulls[id]++
			retired += n["RetireLive"]
			want, snaps := liveEntry.pullOps+movedOps, 1
			if id == "op-push" && wasPushed {
				pushedPulls++
				want++ // the newest snapshot, to compare with
				if seller.calls["op-push"] == calls {
					watched++ // the channel is alive: no call, nothing but the next watch
					want, snaps = liveEntry.pullOps+1, 0
				}
			}
			ops := n["GetBuyState"] + n["PutDeliverySnapshot"] + n["AppendEvent"] + n["ScheduleLive"] + n["RetireLive"] + n["ListDeliverySnapshots"]
			if float64(ops) != want || n["PutDeliverySnapshot"] != snaps {
				t.Fatalf("the pull of %s at %s: %+v, ledger calls %v; the model says %v", id, at, rep, n, want)
			}
		}
		if pulls["op-pull"] == 1 && opAfterFirst == nil {
			if opAfterFirst, err = store.GetOperation(ctx, "t", "op-pull"); err != nil {
				t.Fatal(err)
			}
			if kb := itemKB(t, db, table, "TENANT#t#OP#op-pull", "LIVE"); kb > entryKB {
				t.Fatalf("the live entry is %.2f KB; the model says %.2f", kb, entryKB)
			}
		}
		clk.Advance(time.Hour)
	}
	if op, err := store.GetOperation(ctx, "t", "op-pull"); err != nil || !reflect.DeepEqual(op, opAfterFirst) {
		t.Fatalf("the pulls after the first wrote the operation:\nafter the first %+v\nat the end %+v (%v)", opAfterFirst, op, err)
	}
	pull, pushed := flightReads(delivery.Cadence{}, 0), flightReads(delivery.Cadence{}, pushedAfter)
	if pulls["op-pull"] != pull.pulls || seller.calls["op-pull"] != pull.pulls || pulls["op-push"] != pushed.pulls || seller.calls["op-push"] != pushed.pulls-pushed.watched ||
		pushedPulls != pushed.pushedPulls || watched != pushed.watched || retired != 2 || float64(pushes) != lifeFlight.Hours()/24*reportsPerDay ||
		float64(marks) != pushMarks(pushed, true) {
		t.Fatalf("pulls %v (%d of them pushed, %d watched), calls %v, %d retired, %d pushes, %d MarkDeliveryPushed; the model says %+v pulled, %+v pushed, one call a pull not watched, each retired after its last, %v marks",
			pulls, pushedPulls, watched, seller.calls, retired, pushes, marks, pull, pushed, pushMarks(pushed, true))
	}
}

// itemKB is the size of item pk/sk as DynamoDB bills a write of it: each attribute's name and
// value (strings and numbers by their bytes, a bool one byte). The model's one write unit per
// entry write holds while this stays under 1 KB (ids near their 256-byte limit would not).
func itemKB(t *testing.T, db *dynamodb.Client, table, pk, sk string) float64 {
	t.Helper()
	out, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{ledger.AttrPK: &types.AttributeValueMemberS{Value: pk}, ledger.AttrSK: &types.AttributeValueMemberS{Value: sk}}})
	if err != nil || len(out.Item) == 0 {
		t.Fatalf("item %s/%s: %v", pk, sk, err)
	}
	n := 0
	for name, v := range out.Item {
		n += len(name)
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			n += len(v.Value)
		case *types.AttributeValueMemberN:
			n += len(v.Value)
		case *types.AttributeValueMemberBOOL:
			n++
		default:
			t.Fatalf("item %s/%s: attribute %s of type %T", pk, sk, name, v)
		}
	}
	return float64(n) / 1024
}
