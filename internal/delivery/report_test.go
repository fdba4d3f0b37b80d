package delivery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/delivery"
	"github.com/buyflow/buyflow/internal/record"
)

// TestPullAfterPushesComparesWithThePushedFigures: a watchdog pull of a pushed buy that finds
// what the last push reported writes nothing, although the live list's mark is the last
// pull's.
func TestPullAfterPushesComparesWithThePushedFigures(t *testing.T) {
	f := start(t)
	ctx := context.Background()
	f.place("op-buy", "")
	r := delivery.New(f.store, f.client, delivery.Config{Now: f.clk.Now})
	f.seller.SetDelivered(f.created.MediaBuyID, 1000, "10")
	if rep, err := r.Run(ctx); err != nil || rep.Snapshots != 1 {
		t.Fatalf("the first pull: %+v %v", rep, err)
	}
	op, err := f.store.GetOperation(ctx, "acme", "op-buy")
	if err != nil {
		t.Fatal(err)
	}
	var pushed adcp.DeliveryReport
	pushed.Currency, pushed.ReportingPeriod.End = "USD", f.clk.Now().Add(time.Hour).Format(time.RFC3339)
	pushed.MediaBuys = make([]adcp.MediaBuyDelivery, 1)
	// As the simulated seller reports a one-package buy: its pacing too.
	if err := json.Unmarshal([]byte(`{"media_buy_id":"`+f.created.MediaBuyID+`","status":"active","totals":{"impressions":5000,"spend":50},
		"by_package":[{"package_id":"pkg-1","spend":50,"pacing_index":1}]}`), &pushed.MediaBuys[0]); err != nil {
		t.Fatal(err)
	}
	if moved, _, err := r.Push(ctx, op, &pushed, "whk_report_push_0001", "hash-0001"); err != nil || !moved {
		t.Fatalf("push: %v %v", moved, err)
	}
	f.seller.SetDelivered(f.created.MediaBuyID, 5000, "50")
	f.clk.Advance(delivery.DefaultPushWatch)
	if rep, err := r.Run(ctx); err != nil || rep.Read != 1 || rep.Snapshots != 0 || rep.Unchanged != 1 {
		t.Fatalf("the watchdog pull of what the push reported: %+v %v; want read, unchanged", rep, err)
	}
}

// TestCorrectedReportReplacesItsAsOf: a report for an as-of already recorded, with other
// figures, is the seller's correction: the snapshot for that as-of says the corrected figures,
// and the timeline gets a delivery entry marked corrected that keeps the replaced ones; the
// same correction again writes nothing.
func TestCorrectedReportReplacesItsAsOf(t *testing.T) {
	f := start(t)
	ctx := context.Background()
	f.place("op-buy", "")
	r := delivery.New(f.store, f.client, delivery.Config{Now: f.clk.Now})
	op, err := f.store.GetOperation(ctx, "acme", "op-buy")
	if err != nil {
		t.Fatal(err)
	}
	report := func(spend string) *adcp.DeliveryReport {
		var rep adcp.DeliveryReport
		rep.Currency, rep.ReportingPeriod.End = "USD", "2099-03-03T00:00:00Z"
		rep.MediaBuys = []adcp.MediaBuyDelivery{{MediaBuyID: f.created.MediaBuyID, Status: "active"}}
		rep.MediaBuys[0].Totals.Impressions, rep.MediaBuys[0].Totals.Spend = "1000", json.Number(spend)
		return &rep
	}
	for i, c := range []struct {
		spend string
		moved bool
	}{{"10", true}, {"10", false}, {"9.5", true}, {"9.5", false}} {
		if moved, dup, err := r.Push(ctx, op, report(c.spend), fmt.Sprintf("whk_correction_%04d", i), fmt.Sprintf("hash-%04d", i)); err != nil || moved != c.moved || dup != nil {
			t.Fatalf("report %d (spend %s): moved %v, %v; want %v", i, c.spend, moved, err, c.moved)
		}
	}
	// The delivery that wrote the newest snapshot, delivered again (its response was lost):
	// recognised by its key on the snapshot, nothing read from the report or written.
	if moved, dup, err := r.Push(ctx, op, report("9.5"), "whk_correction_0002", "hash-other"); err != nil || moved || dup == nil || dup.PushHash != "hash-0002" {
		t.Fatalf("the redelivery of the newest report: moved %v, duplicate %v, %v; want a duplicate", moved, dup, err)
	}
	snaps, err := f.store.ListDeliverySnapshots(ctx, "acme", "op-buy", 10)
	if err != nil || len(snaps) != 1 || snaps[0].Spend != "9.5" {
		t.Fatalf("snapshots: %+v %v; want the as-of once, corrected to 9.5", snaps, err)
	}
	evs, err := f.store.ListEvents(ctx, "acme", "op-buy", 100, "")
	if err != nil {
		t.Fatal(err)
	}
	var delivered []record.Event
	for _, ev := range evs.Items {
		if ev.Type == record.EventDelivery {
			delivered = append(delivered, ev)
		}
	}
	if len(delivered) != 2 || delivered[1].Amount != "9.5" || !strings.HasPrefix(delivered[1].Reason, "corrected: ") {
		t.Fatalf("delivery events: %+v; want two, the second the correction", delivered)
	}
	var detail struct {
		Corrected bool `json:"corrected"`
		Replaced  struct {
			Spend string `json:"spend"`
		} `json:"replaced"`
	}
	if err := json.Unmarshal(delivered[1].Detail, &detail); err != nil || !detail.Corrected || detail.Replaced.Spend != "10" {
		t.Fatalf("the correction's detail %s: %v", delivered[1].Detail, err)
	}
}
