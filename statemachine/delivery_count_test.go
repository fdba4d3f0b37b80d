package statemachine

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/clocktest"
	"github.com/buyflow/buyflow/internal/delivery"
	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/record"
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

func (c *countingStore) MarkDeliveryPushed(ctx context.Context, tenant, id string) error {
	c.count("MarkDeliveryPushed", id)
	return c.Store.MarkDeliveryPushed(ctx, tenant, id)
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
// report a day from its first day: the reader's calls per push (pushReaderOps + movedOps), its
// MarkDeliveryPushed calls (pushMarks), and its pulls (flightReads with pushedAfter), each of a pushed
// buy also reading its newest snapshot.
func TestDeliveryModelMatchesCountedCalls(t *testing.T) {
	db, table := dynamotest.Start(t)
	clk := clocktest.At(time.Date(2099, 3, 1, 0, 0, 0, 0, time.UTC))
	store := ledger.New(db, table)
	store.Now = clk.Now
	ctx := context.Background()
	begin := clk.Now()
	for _, id := range []string{"op-pull", "op-push"} {
		seller := map[string]string{"op-pull": "s", "op-push": "s-push"}[id]
		req := fmt.Sprintf(`{"seller_id":%q,"currency":"USD","media_buy":{"account":{"account_id":%q},"start_time":%q,"end_time":%q}}`,
			seller, id, begin.Format(time.RFC3339), begin.Add(lifeFlight).Format(time.RFC3339))
		if _, err := store.CreateOperation(ctx, record.Operation{ID: id, Tenant: "t", SellerID: seller, BudgetTotal: "1000", Currency: "USD", Request: json.RawMessage(req)}); err != nil {
			t.Fatal(err)
		}
		mb := "mb-" + id
		for _, to := range []workflow.Status{workflow.StatusCreating, workflow.StatusCompleted} {
			if _, err := store.Transition(ctx, "t", id, to, record.AnyVersion, record.Patch{MediaBuyID: &mb}); err != nil {
				t.Fatal(err)
			}
		}
	}
	counted := &countingStore{Store: store, n: map[string]int{}}
	seller := &movingSeller{now: clk.Now, calls: map[string]int{}}
	r := delivery.New(counted, seller, delivery.Config{Now: clk.Now})

	pushedAfter := 24 * time.Hour / reportsPerDay
	var opAfterFirst *record.Operation
	pulls := map[string]int{}
	retired, pushes, pushedPulls, marks := 0, 0, 0, 0
	for at := time.Duration(0); at <= lifeFlight+delivery.DefaultFinalAfter; at += time.Hour {
		if at >= pushedAfter && at <= lifeFlight && at%(24*time.Hour/reportsPerDay) == 0 { // the day's report, the last one at the end
			op, err := store.GetOperation(ctx, "t", "op-push")
			if err != nil {
				t.Fatal(err)
			}
			var pushed adcp.DeliveryReport
			pushed.Currency, pushed.ReportingPeriod.End = "USD", clk.Now().Format(time.RFC3339)
			pushed.MediaBuys = []adcp.MediaBuyDelivery{{MediaBuyID: "mb-op-push", Status: "active"}}
			pushed.MediaBuys[0].Totals.Spend = json.Number(fmt.Sprint(hoursIn(clk.Now()) + 0.5)) // not what a pull reads then
			if moved, err := r.Push(ctx, op, &pushed); err != nil || !moved {
				t.Fatalf("push at %s: %v %v", at, moved, err)
			}
			n := counted.take("op-push")
			if n["GetBuyState"]+n["ListDeliverySnapshots"] != pushReaderOps || n["PutDeliverySnapshot"]+n["AppendEvent"] != movedOps {
				t.Fatalf("the push at %s: %v; the model says %d reads, %d writes when moved", at, n, pushReaderOps, movedOps)
			}
			marks += n["MarkDeliveryPushed"]
			pushes++
		}
		wasPushed := pushes > 0
		rep, err := r.Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"op-pull", "op-push"} {
			n := counted.take(id)
			if n["ScheduleLive"]+n["RetireLive"] == 0 {
				continue // not due
			}
			pulls[id]++
			retired += n["RetireLive"]
			want := liveEntry.pullOps + movedOps
			if id == "op-push" && wasPushed {
				pushedPulls++
				want++ // the newest snapshot, to compare with
			}
			ops := n["GetBuyState"] + n["PutDeliverySnapshot"] + n["AppendEvent"] + n["ScheduleLive"] + n["RetireLive"] + n["ListDeliverySnapshots"]
			if float64(ops) != want || n["PutDeliverySnapshot"] != 1 {
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
	pull, push := flightReads(delivery.Cadence{}, 0), flightReads(delivery.Cadence{}, pushedAfter)
	if pulls["op-pull"] != pull.pulls || seller.calls["op-pull"] != pull.pulls || pulls["op-push"] != push.pulls || seller.calls["op-push"] != push.pulls ||
		pushedPulls != push.pushedPulls || retired != 2 || float64(pushes) != lifeFlight.Hours()/24*reportsPerDay ||
		float64(marks) != pushMarks(push, true) {
		t.Fatalf("pulls %v (%d of them pushed), calls %v, %d retired, %d pushes, %d MarkDeliveryPushed; the model says %+v pulled, %+v pushed, one call each, each retired after its last, %v marks",
			pulls, pushedPulls, seller.calls, retired, pushes, marks, pull, push, pushMarks(push, true))
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
