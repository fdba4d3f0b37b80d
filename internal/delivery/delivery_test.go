package delivery_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/adcpschemas"
	"github.com/buyflow/buyflow/internal/adcptest"
	"github.com/buyflow/buyflow/internal/adcpvalidate"
	"github.com/buyflow/buyflow/internal/clocktest"
	"github.com/buyflow/buyflow/internal/delivery"
	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/workflow"
)

// fixture is a ledger on the emulator, the simulated seller (a real MCP server) with one buy
// placed at it, and an AdCP client that talks to it.
type fixture struct {
	db      *dynamodb.Client
	table   string
	store   *ledger.Store
	clk     *clocktest.Clock
	seller  *adcptest.Seller
	client  *adcp.Client
	created *adcp.MediaBuyResult
	place   func(id, kind string)
	// placeWith is place with the buy's submitted request (its flight).
	placeWith func(id, kind string, request json.RawMessage)
}

func start(t *testing.T) *fixture {
	t.Helper()
	return startWith(t, adcptest.SellerOptions{})
}

// startWith is start with the simulated seller's options (its clock is the fixture's).
func startWith(t *testing.T, opts adcptest.SellerOptions) *fixture {
	t.Helper()
	db, table := dynamotest.Start(t)
	clk := clocktest.At(time.Date(2099, 3, 2, 12, 0, 0, 0, time.UTC))
	store := ledger.New(db, table)
	store.Now = clk.Now
	opts.Now = clk.Now
	seller := adcptest.NewSeller(opts)
	seller.Start()
	t.Cleanup(seller.Close)
	reg, err := adcp.NewRegistry(adcp.RegistryConfig{Agents: []adcp.Agent{{ID: "sim-seller", Role: adcp.RoleSeller, MCPURL: seller.URL(),
		CredentialRef: "cred", Webhook: &adcp.WebhookConfig{Mode: adcp.WebhookHMAC, HMACSecretRef: "hmac"}}}})
	if err != nil {
		t.Fatal(err)
	}
	fsys, err := adcpschemas.FS()
	if err != nil {
		t.Fatal(err)
	}
	v, err := adcpvalidate.NewValidator(fsys)
	if err != nil {
		t.Fatal(err)
	}
	client, err := adcp.New(adcp.Options{Registry: reg, Validator: v, CallTimeout: 5 * time.Second,
		Credentials: adcp.CredentialsFunc(func(context.Context, string) (string, error) { return adcptest.DefaultSellerToken, nil })})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	account := adcp.AccountRef{AccountID: "acct-1"}
	in, err := adcp.NewIntent(adcp.ToolCreateMediaBuy, adcp.CreateMediaBuyRequest{Account: account, Brand: adcp.BrandRef{Domain: "acme.example"},
		StartTime: "asap", EndTime: "2099-04-01T00:00:00Z", Context: json.RawMessage(`{"sim":"sync"}`),
		Packages: []adcp.PackageRequest{{ProductID: "p", PricingOptionID: "cpm", Budget: "3000"}}}, clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	created, err := client.CreateMediaBuy(ctx, "sim-seller", in)
	if err != nil || created.MediaBuyID == "" {
		t.Fatalf("create: %+v %v", created, err)
	}

	request := json.RawMessage(`{"seller_id":"sim-seller","currency":"USD","media_buy":{"account":{"account_id":"acct-1"}}}`)
	placeWith := func(id, kind string, request json.RawMessage) {
		t.Helper()
		if _, err := store.CreateOperation(ctx, record.Operation{ID: id, Tenant: "acme", SellerID: "sim-seller", BudgetTotal: "3000.00", Currency: "USD",
			Request: request, Kind: kind, ParentID: map[bool]string{true: "op-buy"}[kind != ""]}); err != nil {
			t.Fatal(err)
		}
		mb := created.MediaBuyID
		for _, to := range []workflow.Status{workflow.StatusCreating, workflow.StatusCompleted} {
			if _, err := store.Transition(ctx, "acme", id, to, record.AnyVersion, record.Patch{MediaBuyID: &mb}); err != nil {
				t.Fatal(err)
			}
		}
	}
	place := func(id, kind string) { t.Helper(); placeWith(id, kind, request) }
	return &fixture{db: db, table: table, store: store, clk: clk, seller: seller, client: client, created: created, place: place, placeWith: placeWith}
}

// TestDeliveryReadsLiveBuysOnACadence places a buy at the simulated seller (a real MCP server),
// records it completed in the ledger, and runs the reader against both: a snapshot and a
// timeline entry per reported as-of, the next read an hour later, the over-budget metric when
// the seller reports spend past the approved budget, changes retired, and a canceled buy read
// up to its cancellation and once more a day after it, then retired.
func TestDeliveryReadsLiveBuysOnACadence(t *testing.T) {
	f := start(t)
	ctx, db, table, store, clk, seller, client, created, place := context.Background(), f.db, f.table, f.store, f.clk, f.seller, f.client, f.created, f.place
	place("op-buy", "")
	place("chg-1", record.KindModification)
	// op-buy was completed before the live list existed, as a deployment's older buys were: no
	// gsi1 keys. The reader's backfill lists it before it reads.
	if _, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table),
		Key: map[string]types.AttributeValue{ledger.AttrPK: &types.AttributeValueMemberS{Value: "TENANT#acme#OP#op-buy"},
			ledger.AttrSK: &types.AttributeValueMemberS{Value: "OP"}},
		UpdateExpression: aws.String("REMOVE " + ledger.AttrGSI1PK + ", " + ledger.AttrGSI1SK)}); err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	rec := metrics.New(&out, metrics.Namespace, clk.Now)
	r := delivery.New(store, client, delivery.Config{Cadence: delivery.Cadence{Every: time.Hour}, Now: clk.Now, Metrics: rec})
	seller.SetDelivered(created.MediaBuyID, 12000, "2999.995")
	clk.Advance(time.Second)
	rep, err := r.Run(ctx)
	if err != nil || rep.Backfilled != 1 || rep.Read != 1 || rep.Snapshots != 1 || rep.OverBudget != 0 || rep.Retired != 1 {
		t.Fatalf("first run: %+v %v; want the old buy backfilled and read, one snapshot, the change retired", rep, err)
	}
	snaps, err := store.ListDeliverySnapshots(ctx, "acme", "op-buy", 10)
	if err != nil || len(snaps) != 1 || snaps[0].Spend != "2999.995" || snaps[0].Impressions != 12000 || snaps[0].Approved != "3000.00" || snaps[0].Pacing != "1" {
		t.Fatalf("snapshots %+v %v", snaps, err)
	}
	if rep, _ := r.Run(ctx); rep.Read != 0 {
		t.Fatalf("a second run at once read %d buys; the next read is an hour away", rep.Read)
	}

	clk.Advance(time.Hour)
	seller.SetDelivered(created.MediaBuyID, 15000, "3000.01")
	if rep, err := r.Run(ctx); err != nil || rep.Snapshots != 1 || rep.OverBudget != 1 {
		t.Fatalf("the over-budget run: %+v %v", rep, err)
	}
	if err := rec.Flush(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"SpendOverBudget"`) || !strings.Contains(out.String(), `"Seller":"sim-seller"`) {
		t.Fatalf("no SpendOverBudget metric for the seller in %s", out.String())
	}
	evs, err := store.ListEvents(ctx, "acme", "op-buy", 100, "")
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, e := range evs.Items {
		if e.Type == record.EventDelivery {
			reasons = append(reasons, e.Amount+": "+e.Reason)
		}
	}
	if len(reasons) != 2 || !strings.Contains(reasons[0], "spent 2999.995 of the approved 3000.00 USD") || !strings.Contains(reasons[1], "over the approved budget of 3000.00") {
		t.Fatalf("the timeline's delivery entries: %q", reasons)
	}

	// A buy canceled after placement: its flight ended with the cancellation. It is read at its
	// due read (what it delivered up to the cancellation) and a final time a day after, when
	// the seller has finalized it, then it leaves the live list.
	if _, err := store.BeginChange(ctx, record.BuyState{Tenant: "acme", OperationID: "op-buy", MediaBuyID: created.MediaBuyID, State: "active",
		BudgetTotal: "3000.00", Currency: "USD"}, "chg-2", "cancel", clk.Now().Add(time.Hour), record.Event{Type: "modification_requested"}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.ApplyChange(ctx, record.BuyState{Tenant: "acme", OperationID: "op-buy", MediaBuyID: created.MediaBuyID, Revision: 2,
		State: record.BuyStateCanceled, BudgetTotal: "3000.00", Currency: "USD"}, "chg-2", record.Event{Type: "modification_applied"}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour)
	seller.SetDelivered(created.MediaBuyID, 15400, "3000.01")
	if rep, err := r.Run(ctx); err != nil || rep.Read != 1 || rep.Snapshots != 1 || rep.Retired != 0 {
		t.Fatalf("the read after the cancellation: %+v %v; want the delivery up to it recorded", rep, err)
	}
	clk.Advance(22 * time.Hour) // the cancellation was an hour before that read
	if rep, err := r.Run(ctx); err != nil || rep.Read != 0 {
		t.Fatalf("a run before the final read: %+v %v", rep, err)
	}
	clk.Advance(time.Hour)
	seller.SetDelivered(created.MediaBuyID, 15420, "3000.01")
	if rep, err := r.Run(ctx); err != nil || rep.Read != 1 || rep.Snapshots != 1 || rep.Retired != 1 {
		t.Fatalf("the final read, a day after the cancellation: %+v %v", rep, err)
	}
	if live, _ := store.ListLiveDue(ctx, clk.Now().Add(48*time.Hour), 10); len(live) != 0 {
		t.Fatalf("still live: %d", len(live))
	}
	if snaps, err := store.ListDeliverySnapshots(ctx, "acme", "op-buy", 10); err != nil || len(snaps) != 4 || snaps[0].Impressions != 15420 {
		t.Fatalf("snapshots after the final read: %+v %v", snaps, err)
	}
}

// countingLedger counts the delivery writes a reader makes: snapshots and timeline events.
type countingLedger struct {
	*ledger.Store
	snapshots, events int
}

func (c *countingLedger) PutDeliverySnapshot(ctx context.Context, d record.DeliverySnapshot) (bool, *record.DeliverySnapshot, error) {
	c.snapshots++
	return c.Store.PutDeliverySnapshot(ctx, d)
}

func (c *countingLedger) AppendEvent(ctx context.Context, tenant, opID string, ev record.Event) error {
	c.events++
	return c.Store.AppendEvent(ctx, tenant, opID, ev)
}

// TestDeliveryWritesOnlyWhenItMoved reads a buy whose seller reports a new reporting period on
// every read: a read that finds the same delivery writes no snapshot and no event (only the
// next read's schedule); a read after the delivery moved, or after the approved budget
// changed, writes one of each.
func TestDeliveryWritesOnlyWhenItMoved(t *testing.T) {
	f := start(t)
	ctx := context.Background()
	f.place("op-buy", "")
	counted := &countingLedger{Store: f.store}
	r := delivery.New(counted, f.client, delivery.Config{Cadence: delivery.Cadence{Every: time.Hour}, Now: f.clk.Now})
	run := func(what string, snapshots, unchanged int) {
		t.Helper()
		f.clk.Advance(time.Hour)
		before := counted.snapshots + counted.events
		rep, err := r.Run(ctx)
		if err != nil || rep.Read != 1 || rep.Snapshots != snapshots || rep.Unchanged != unchanged {
			t.Fatalf("%s: %+v %v; want 1 read, %d snapshots, %d unchanged", what, rep, err, snapshots, unchanged)
		}
		if writes := counted.snapshots + counted.events - before; writes != 2*snapshots {
			t.Fatalf("%s: %d snapshot and event writes, want %d", what, writes, 2*snapshots)
		}
	}
	f.seller.SetDelivered(f.created.MediaBuyID, 12000, "100.5")
	run("the first read", 1, 0)
	run("the same delivery an hour later", 0, 1)
	run("and again", 0, 1)
	f.seller.SetDelivered(f.created.MediaBuyID, 12000, "100.50") // the same amount, written otherwise
	run("the same spend in another literal", 0, 1)
	f.seller.SetDelivered(f.created.MediaBuyID, 13000, "110")
	run("more delivered", 1, 0)
	if _, err := f.store.BeginChange(ctx, record.BuyState{Tenant: "acme", OperationID: "op-buy", MediaBuyID: f.created.MediaBuyID, State: "active",
		BudgetTotal: "3000.00", Currency: "USD"}, "chg-1", "budget", f.clk.Now().Add(time.Hour), record.Event{Type: "modification_requested"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.ApplyChange(ctx, record.BuyState{Tenant: "acme", OperationID: "op-buy", MediaBuyID: f.created.MediaBuyID, Revision: 2,
		State: "active", BudgetTotal: "5000.00", Currency: "USD"}, "chg-1", record.Event{Type: "modification_applied"}); err != nil {
		t.Fatal(err)
	}
	run("the same delivery against a new approved budget", 1, 0)
	snaps, err := f.store.ListDeliverySnapshots(ctx, "acme", "op-buy", 10)
	if err != nil || len(snaps) != 3 || snaps[0].Approved != "5000.00" {
		t.Fatalf("snapshots: %+v %v; want 3, the newest against 5000.00", snaps, err)
	}
}
