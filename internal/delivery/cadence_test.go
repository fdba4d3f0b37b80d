package delivery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/adcptest"
	"github.com/buyflow/buyflow/internal/delivery"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/workflow"
)

// TestCadenceFollowsTheFlight checks each of the cadence's decisions: before the flight, at
// launch, mid-flight, near the end, after it, and under the operator's override.
func TestCadenceFollowsTheFlight(t *testing.T) {
	start := time.Date(2099, 3, 1, 0, 0, 0, 0, time.UTC)
	end := start.Add(30 * 24 * time.Hour)
	h := time.Hour
	def := delivery.Cadence{}
	override := delivery.Cadence{Every: 2 * h}
	for _, c := range []struct {
		name   string
		c      delivery.Cadence
		now    time.Time
		end    time.Time
		next   time.Time
		retire bool
	}{
		{"before the flight: at its start", def, start.Add(-5 * 24 * h), end, start, false},
		{"at launch: every edge step", def, start, end, start.Add(delivery.DefaultEdgeEvery), false},
		{"late in the launch window: not past it", def, start.Add(23 * h), end, start.Add(delivery.DefaultLaunchWindow), false},
		{"mid-flight: a quiet step", def, start.Add(5 * 24 * h), end, start.Add(5*24*h + delivery.DefaultQuietEvery), false},
		{"mid-flight, the end window near: at its opening", def, end.Add(-36 * h), end, end.Add(-delivery.DefaultEndWindow), false},
		{"in the end window: every edge step", def, end.Add(-20 * h), end, end.Add(-20*h + delivery.DefaultEdgeEvery), false},
		{"just before the end: at the end", def, end.Add(-h), end, end, false},
		{"at the end: the final read", def, end, end, end.Add(delivery.DefaultFinalAfter), false},
		{"the final read: retire", def, end.Add(delivery.DefaultFinalAfter), end, time.Time{}, true},
		{"no end known: quiet for good", def, start.Add(90 * 24 * h), time.Time{}, start.Add(90*24*h + delivery.DefaultQuietEvery), false},
		{"override mid-flight", override, start.Add(5 * 24 * h), end, start.Add(5*24*h + 2*h), false},
		{"override before the flight", override, start.Add(-24 * h), end, start.Add(-22 * h), false},
		{"override, the end near: at the end", override, end.Add(-h), end, end, false},
		{"override after the end: the final read", override, end.Add(h), end, end.Add(delivery.DefaultFinalAfter), false},
		{"windows of the operator's", delivery.Cadence{LaunchWindow: 2 * h, EdgeEvery: h, QuietEvery: 6 * h}, start.Add(3 * h), end, start.Add(9 * h), false},
		{"a run late in its slot: the nearest slot", def, start.Add(5*24*h + 40*time.Second), end, start.Add(6 * 24 * h), false},
		{"a buy live at 10:37: its next read on the hour", def, start.Add(10*h + 37*time.Minute), end, start.Add(14 * h), false},
		{"in the end window, off the grid", def, end.Add(-20*h - 29*time.Minute), end, end.Add(-17 * h), false},
		{"the override is not aligned", override, start.Add(5*24*h + 40*time.Second), end, start.Add(5*24*h + 2*h + 40*time.Second), false},
	} {
		next, retire := c.c.Next(c.now, start, c.end)
		if !next.Equal(c.next) || retire != c.retire {
			t.Errorf("%s: next %s, retire %v; want %s, %v", c.name, next, retire, c.next, c.retire)
		}
	}
	// A buy whose seller pushes its reports is pulled as a watchdog only: every PushWatch,
	// whatever the phase, never past the end, and a final time after it.
	for _, c := range []struct {
		name   string
		now    time.Time
		next   time.Time
		retire bool
	}{
		{"pushed, at launch", start.Add(h), start.Add(h + delivery.DefaultPushWatch), false},
		{"pushed, mid-flight", start.Add(10 * 24 * h), start.Add(10*24*h + delivery.DefaultPushWatch), false},
		{"pushed, the end within a watch", end.Add(-3 * 24 * h), end, false},
		{"pushed, at the end", end, end.Add(delivery.DefaultFinalAfter), false},
		{"pushed, the final read", end.Add(delivery.DefaultFinalAfter), time.Time{}, true},
	} {
		next, retire := def.NextPushed(c.now, start, end)
		if !next.Equal(c.next) || retire != c.retire {
			t.Errorf("%s: next %s, retire %v; want %s, %v", c.name, next, retire, c.next, c.retire)
		}
	}
	// A buy whose seller was asked to push, none pushed yet: read at launch, then when the
	// launch window closes; after it, pulled as any buy; the override still wins.
	short := start.Add(12 * h)
	for _, c := range []struct {
		name string
		c    delivery.Cadence
		now  time.Time
		end  time.Time
		next time.Time
	}{
		{"asked, at launch: the window's close", def, start, end, start.Add(delivery.DefaultLaunchWindow)},
		{"asked, late in the window: its close", def, start.Add(20 * h), end, start.Add(delivery.DefaultLaunchWindow)},
		{"asked, no push after the window: a quiet step", def, start.Add(delivery.DefaultLaunchWindow), end, start.Add(delivery.DefaultLaunchWindow + delivery.DefaultQuietEvery)},
		{"asked, a flight shorter than the window: its end", def, start, short, short},
		{"asked, under the override", override, start, end, start.Add(2 * h)},
	} {
		next, retire := c.c.NextPushAsked(c.now, start, c.end)
		if !next.Equal(c.next) || retire {
			t.Errorf("%s: next %s, retire %v; want %s", c.name, next, retire, c.next)
		}
	}
}

// TestBuyAskedToPushIsNotPulledThroughItsLaunch: a buy at a seller that offers push reporting
// is read at launch and when the launch window closes, not every EdgeEvery through it.
func TestBuyAskedToPushIsNotPulledThroughItsLaunch(t *testing.T) {
	f := startWith(t, adcptest.SellerOptions{PushReporting: true})
	ctx := context.Background()
	begin := f.clk.Now()
	f.placeWith("op-buy", "", json.RawMessage(fmt.Sprintf(`{"seller_id":"sim-seller","currency":"USD","media_buy":{"account":{"account_id":"acct-1"},"start_time":%q,"end_time":%q}}`,
		begin.Format(time.RFC3339), begin.Add(30*24*time.Hour).Format(time.RFC3339))))
	r := delivery.New(f.store, f.client, delivery.Config{Now: f.clk.Now})
	reads := 0
	for at := time.Duration(0); at <= delivery.DefaultLaunchWindow; at += time.Hour {
		rep, err := r.Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		reads += rep.Read
		f.clk.Advance(time.Hour)
	}
	if reads != 2 {
		t.Fatalf("%d reads through the launch window, want 2: at launch and at its close", reads)
	}
}

// TestDeliveryReadsAFlightOnItsCadence lives a 30-day buy through the reader on the ledger
// and the simulated seller, the clock moved an hour at a time: reads come at launch, daily in
// between, near the end, once after it, and then the buy is off the live list. Delivery that
// moves every read writes a snapshot each time.
func TestDeliveryReadsAFlightOnItsCadence(t *testing.T) {
	f := start(t)
	ctx := context.Background()
	begin := f.clk.Now()
	end := begin.Add(30 * 24 * time.Hour)
	f.placeWith("op-buy", "", json.RawMessage(fmt.Sprintf(`{"seller_id":"sim-seller","currency":"USD","media_buy":{"account":{"account_id":"acct-1"},"start_time":%q,"end_time":%q}}`,
		begin.Format(time.RFC3339), end.Format(time.RFC3339))))
	r := delivery.New(f.store, f.client, delivery.Config{Now: f.clk.Now})
	var reads []time.Duration // when, after the flight's start
	retired, snapshots := 0, 0
	for at := time.Duration(0); at <= 32*24*time.Hour; at += time.Hour {
		f.seller.SetDelivered(f.created.MediaBuyID, int64(at/time.Hour)*100, fmt.Sprint(int64(at/time.Hour)))
		rep, err := r.Run(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for range rep.Read {
			reads = append(reads, at)
		}
		retired += rep.Retired
		snapshots += rep.Snapshots
		f.clk.Advance(time.Hour)
	}
	var want []time.Duration
	day := 24 * time.Hour
	for at := time.Duration(0); at < day; at += delivery.DefaultEdgeEvery {
		want = append(want, at) // launch
	}
	for at := day; at < 29*day; at += day {
		want = append(want, at) // quiet
	}
	for at := 29 * day; at <= 30*day; at += delivery.DefaultEdgeEvery {
		want = append(want, at) // the end window, and the end
	}
	want = append(want, 31*day) // final
	if fmt.Sprint(reads) != fmt.Sprint(want) {
		t.Fatalf("reads at %v\nwant       %v", reads, want)
	}
	if retired != 1 || snapshots != len(want) {
		t.Fatalf("%d retired, %d snapshots; want the buy retired after its final read and %d snapshots", retired, snapshots, len(want))
	}
	if live, err := f.store.ListLiveDue(ctx, f.clk.Now().Add(365*day), 10); err != nil || len(live) != 0 {
		t.Fatalf("still live: %d %v", len(live), err)
	}
}

// TestPushedBuyIsPulledAsAWatchdog: once the seller pushed a report for a buy (Push, as the
// webhook receiver calls it), the scheduled read pulls it only every PushWatch, and then only
// when no push wrote a snapshot within PushAlive: a watch that finds the channel alive
// reschedules the buy without asking the seller.
func TestPushedBuyIsPulledAsAWatchdog(t *testing.T) {
	f := start(t)
	ctx := context.Background()
	begin := f.clk.Now()
	f.placeWith("op-buy", "", json.RawMessage(fmt.Sprintf(`{"seller_id":"sim-seller","currency":"USD","media_buy":{"account":{"account_id":"acct-1"},"start_time":%q,"end_time":%q}}`,
		begin.Format(time.RFC3339), begin.Add(30*24*time.Hour).Format(time.RFC3339))))
	r := delivery.New(f.store, f.client, delivery.Config{Now: f.clk.Now})
	read := func(what string, want, watched int) {
		t.Helper()
		calls := len(f.seller.CallsTo("get_media_buy_delivery"))
		if rep, err := r.Run(ctx); err != nil || rep.Read != want || rep.Watched != watched {
			t.Fatalf("%s: %+v %v; want %d read, %d watched", what, rep, err, want, watched)
		}
		if n := len(f.seller.CallsTo("get_media_buy_delivery")) - calls; n != want {
			t.Fatalf("%s: %d calls to the seller, want %d", what, n, want)
		}
	}
	push := func(key, spend string) {
		t.Helper()
		op, err := f.store.GetOperation(ctx, "acme", "op-buy")
		if err != nil {
			t.Fatal(err)
		}
		var pushed adcp.DeliveryReport
		pushed.Currency, pushed.ReportingPeriod.End = "USD", f.clk.Now().Add(time.Hour).Format(time.RFC3339)
		pushed.MediaBuys = []adcp.MediaBuyDelivery{{MediaBuyID: f.created.MediaBuyID, Status: "active"}}
		pushed.MediaBuys[0].Totals.Spend = json.Number(spend)
		if moved, _, err := r.Push(ctx, op, &pushed, key, ""); err != nil || !moved {
			t.Fatalf("push: %v %v", moved, err)
		}
	}
	read("at launch", 1, 0)
	push("whk_cadence_push_0001", "12.5")
	f.clk.Advance(delivery.DefaultEdgeEvery)
	read("the read scheduled before the push, 3 h after it: the channel is alive", 0, 1)
	f.clk.Advance(24 * time.Hour)
	read("a day later: no launch or quiet read for a pushed buy", 0, 0)
	f.clk.Advance(delivery.DefaultPushWatch)
	read("a watch later, nothing pushed since: the watchdog pulls", 1, 0)
	f.clk.Advance(delivery.DefaultPushWatch - 24*time.Hour)
	push("whk_cadence_push_0002", "20")
	f.clk.Advance(24 * time.Hour)
	read("a watch later, a day after a push", 0, 1)
}

// TestReadsOfOneSellerShareTheirSlot: two buys at one seller and account that went live 20
// minutes apart are due in the same slot for their next read, and one call reads both.
func TestReadsOfOneSellerShareTheirSlot(t *testing.T) {
	f := start(t)
	ctx := context.Background()
	r := delivery.New(f.store, f.client, delivery.Config{Now: f.clk.Now})
	f.place("op-a", "")
	if rep, err := r.Run(ctx); err != nil || rep.Read != 1 {
		t.Fatalf("the first buy at launch: %+v %v", rep, err)
	}
	f.clk.Advance(20 * time.Minute)
	in, err := adcp.NewIntent(adcp.ToolCreateMediaBuy, adcp.CreateMediaBuyRequest{Account: adcp.AccountRef{AccountID: "acct-1"}, Brand: adcp.BrandRef{Domain: "acme.example"},
		StartTime: "asap", EndTime: "2099-04-01T00:00:00Z", Context: json.RawMessage(`{"sim":"sync"}`),
		Packages: []adcp.PackageRequest{{ProductID: "p", PricingOptionID: "cpm", Budget: "3000"}}}, f.clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	second, err := f.client.CreateMediaBuy(ctx, "sim-seller", in)
	if err != nil || second.MediaBuyID == "" || second.MediaBuyID == f.created.MediaBuyID {
		t.Fatalf("the second buy: %+v %v", second, err)
	}
	if _, err := f.store.CreateOperation(ctx, record.Operation{ID: "op-b", Tenant: "acme", SellerID: "sim-seller", BudgetTotal: "3000.00", Currency: "USD",
		Request: json.RawMessage(`{"seller_id":"sim-seller","currency":"USD","media_buy":{"account":{"account_id":"acct-1"}}}`)}); err != nil {
		t.Fatal(err)
	}
	for _, to := range []workflow.Status{workflow.StatusCreating, workflow.StatusCompleted} {
		if _, err := f.store.Transition(ctx, "acme", "op-b", to, record.AnyVersion, record.Patch{MediaBuyID: &second.MediaBuyID}); err != nil {
			t.Fatal(err)
		}
	}
	if rep, err := r.Run(ctx); err != nil || rep.Read != 1 {
		t.Fatalf("the second buy at launch: %+v %v", rep, err)
	}
	calls := len(f.seller.CallsTo("get_media_buy_delivery"))
	f.clk.Advance(delivery.DefaultEdgeEvery - 20*time.Minute + 30*time.Second) // the first run of the slot
	if rep, err := r.Run(ctx); err != nil || rep.Read != 2 {
		t.Fatalf("the next slot: %+v %v; want both buys read", rep, err)
	}
	if n := len(f.seller.CallsTo("get_media_buy_delivery")) - calls; n != 1 {
		t.Fatalf("%d calls for both buys, want one", n)
	}
}
