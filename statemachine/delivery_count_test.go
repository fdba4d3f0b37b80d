package statemachine

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

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

func (c *countingStore) count(m string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[m]++
}

func (c *countingStore) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return n
}

func (c *countingStore) GetBuyState(ctx context.Context, tenant, opID string) (*record.BuyState, error) {
	c.count("GetBuyState")
	return c.Store.GetBuyState(ctx, tenant, opID)
}

func (c *countingStore) PutDeliverySnapshot(ctx context.Context, d record.DeliverySnapshot) (bool, *record.DeliverySnapshot, error) {
	c.count("PutDeliverySnapshot")
	return c.Store.PutDeliverySnapshot(ctx, d)
}

func (c *countingStore) ListDeliverySnapshots(ctx context.Context, tenant, opID string, limit int) ([]record.DeliverySnapshot, error) {
	c.count("ListDeliverySnapshots")
	return c.Store.ListDeliverySnapshots(ctx, tenant, opID, limit)
}

func (c *countingStore) AppendEvent(ctx context.Context, tenant, opID string, ev record.Event) error {
	c.count("AppendEvent")
	return c.Store.AppendEvent(ctx, tenant, opID, ev)
}

func (c *countingStore) ScheduleLive(ctx context.Context, op *record.Operation, next time.Time, mark string) error {
	c.count("ScheduleLive")
	return c.Store.ScheduleLive(ctx, op, next, mark)
}

func (c *countingStore) RetireLive(ctx context.Context, tenant, id string) error {
	c.count("RetireLive")
	return c.Store.RetireLive(ctx, tenant, id)
}

func (c *countingStore) MarkDeliveryPushed(ctx context.Context, tenant, id string) error {
	c.count("MarkDeliveryPushed")
	return c.Store.MarkDeliveryPushed(ctx, tenant, id)
}

// movingSeller answers get_media_buy_delivery with delivery that moved since the last call, for
// every buy asked, and counts the calls.
type movingSeller struct {
	calls int
	now   func() time.Time
}

func (s *movingSeller) GetMediaBuyDelivery(_ context.Context, _ string, req adcp.GetMediaBuyDeliveryRequest) (*adcp.DeliveryReport, error) {
	s.calls++
	rep := &adcp.DeliveryReport{Currency: "USD"}
	rep.ReportingPeriod.End = s.now().Format(time.RFC3339)
	for _, id := range req.MediaBuyIDs {
		row := adcp.MediaBuyDelivery{MediaBuyID: id, Status: "active"}
		row.Totals.Spend = json.Number(fmt.Sprint(s.calls))
		rep.MediaBuys = append(rep.MediaBuys, row)
	}
	return rep, nil
}

// TestDeliveryModelMatchesCountedCalls runs the real reader over the real ledger (the
// emulator) through one buy's life, the clock moved an hour at a time, and checks the whole-life
// model's assumptions against what it counted: the pulls (flightReads), the ledger calls per
// pull that moved (pullOps + movedOps) and the retirement, one get_media_buy_delivery per pull
// for a seller's lone buy; and, for a push, the reader's calls (pushReaderOps + movedOps, and
// MarkDeliveryPushed once).
func TestDeliveryModelMatchesCountedCalls(t *testing.T) {
	db, table := dynamotest.Start(t)
	clk := clocktest.At(time.Date(2099, 3, 1, 0, 0, 0, 0, time.UTC))
	store := ledger.New(db, table)
	store.Now = clk.Now
	ctx := context.Background()
	begin := clk.Now()
	req := fmt.Sprintf(`{"seller_id":"s","currency":"USD","media_buy":{"account":{"account_id":"a"},"start_time":%q,"end_time":%q}}`,
		begin.Format(time.RFC3339), begin.Add(lifeFlight).Format(time.RFC3339))
	for _, id := range []string{"op-pull", "op-push"} {
		if _, err := store.CreateOperation(ctx, record.Operation{ID: id, Tenant: "t", SellerID: "s", BudgetTotal: "1000", Currency: "USD", Request: json.RawMessage(req)}); err != nil {
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
	seller := &movingSeller{now: clk.Now}
	r := delivery.New(counted, seller, delivery.Config{Now: clk.Now})

	// The push: the reader's share of one report (the webhook's is in the model's comment).
	op, err := store.GetOperation(ctx, "t", "op-push")
	if err != nil {
		t.Fatal(err)
	}
	if err := store.RetireLive(ctx, "t", "op-push"); err != nil { // keep the pull count to op-pull's
		t.Fatal(err)
	}
	var pushed adcp.DeliveryReport
	pushed.Currency, pushed.ReportingPeriod.End = "USD", begin.Format(time.RFC3339)
	pushed.MediaBuys = []adcp.MediaBuyDelivery{{MediaBuyID: "mb-op-push", Status: "active"}}
	pushed.MediaBuys[0].Totals.Spend = "1"
	if moved, err := r.Push(ctx, op, &pushed); err != nil || !moved {
		t.Fatalf("push: %v %v", moved, err)
	}
	n := counted.take()
	if got := n["GetBuyState"] + n["ListDeliverySnapshots"]; got != pushReaderOps || n["PutDeliverySnapshot"]+n["AppendEvent"] != movedOps || n["MarkDeliveryPushed"] != 1 {
		t.Errorf("one push: %v; the model says %d reads, %d writes when moved, one MarkDeliveryPushed", n, pushReaderOps, movedOps)
	}

	pulls, retired := 0, 0
	for at := time.Duration(0); at <= lifeFlight+delivery.DefaultFinalAfter; at += time.Hour {
		rep, err := r.Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n := counted.take()
		if rep.Read > 0 {
			pulls++
			retired += rep.Retired
			ops := n["GetBuyState"] + n["PutDeliverySnapshot"] + n["AppendEvent"] + n["ScheduleLive"] + n["RetireLive"]
			if rep.Snapshots != 1 || ops != pullOps+movedOps {
				t.Fatalf("the pull at %s: %+v, ledger calls %v; the model says %d", at, rep, n, pullOps+movedOps)
			}
		}
		clk.Advance(time.Hour)
	}
	if want := flightReads(delivery.Cadence{}, 0); pulls != want || seller.calls != want || retired != 1 {
		t.Fatalf("%d pulls, %d calls, %d retired; the model says %d pulls, one call each, retired after the last", pulls, seller.calls, retired, want)
	}
}
