package campaign

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/buy"
	"github.com/buyflow/buyflow/internal/buytest"
	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/submit"
	"github.com/buyflow/buyflow/internal/workflow"
)

// executions is a fake Step Functions that records the executions started, by name.
type executions struct {
	mu     sync.Mutex
	starts map[string]any
}

func (e *executions) Start(_ context.Context, name string, input any) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.starts == nil {
		e.starts = map[string]any{}
	}
	e.starts[name] = input
	return "arn:exec:" + name, nil
}

func (e *executions) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.starts)
}

type fixture struct {
	svc       *Service
	placer    *buy.Placer
	buys      *submit.Service
	store     *ledger.Store
	execs     *executions // MediaBuy executions (single buys)
	campaigns *executions // Campaign executions
}

func newFixture(t *testing.T) fixture {
	t.Helper()
	client, table := dynamotest.Start(t)
	store := ledger.New(client, table)
	execs := &executions{}
	placer := buy.NewPlacer(store, buy.PlaceConfig{Run: workflow.DefaultRunConfig(), StateMachineARN: mediaBuyARN})
	buys := submit.New(store, execs, placer, buytest.Agents, buytest.Schemas(t))
	campaigns := &executions{}
	svc := New(store, placer, buys, campaigns, buytest.Agents, buytest.Schemas(t), Config{Run: workflow.DefaultRunConfig(), MediaBuyStateMachineARN: mediaBuyARN})
	return fixture{svc: svc, placer: placer, buys: buys, store: store, execs: execs, campaigns: campaigns}
}

const mediaBuyARN = "arn:aws:states:us-east-1:000000000000:stateMachine:MediaBuy"

var acme = buy.Caller{Tenant: "acme", Principal: "arn:aws:iam::111122223333:user/alice"}

func TestSubmitPlacesEveryLegAsAMediaBuy(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	out, err := f.svc.Submit(ctx, acme, "campaign-key-1", buytest.Marshal(t, buytest.Example(t, "campaign.json")))
	if err != nil {
		t.Fatal(err)
	}
	if out.CampaignID != ID("acme", "campaign-key-1") || len(out.Legs) != 3 || out.Replayed || out.Status != string(Running) {
		t.Fatalf("submitted = %+v", out)
	}
	// One Campaign execution, named after the campaign, carries each leg's child execution:
	// the name and input a single buy's submit would start.
	if f.execs.count() != 0 || f.campaigns.count() != 1 {
		t.Fatalf("%d media-buy and %d campaign executions started", f.execs.count(), f.campaigns.count())
	}
	in, ok := f.campaigns.starts[out.CampaignID].(ExecutionInput)
	if !ok || in.Tenant != "acme" || in.MediaBuyStateMachineARN != mediaBuyARN || len(in.Legs) != 3 || !in.SyncPlan {
		t.Fatalf("campaign execution input = %+v", f.campaigns.starts)
	}
	// The plan's sync_plans request is frozen with the campaign, before anything calls it.
	rec, err := f.store.GetCampaign(ctx, "acme", out.CampaignID)
	if err != nil {
		t.Fatal(err)
	}
	var intent adcp.Intent
	if err := json.Unmarshal(rec.PlanIntent, &intent); err != nil || intent.Task != adcp.ToolSyncPlans ||
		intent.Key != "sync-plans-"+out.CampaignID || !strings.Contains(string(intent.Body), `"plan_id":"plan-spring-2027"`) ||
		!strings.Contains(string(intent.Body), `"idempotency_key":"sync-plans-`+out.CampaignID+`"`) {
		t.Fatalf("plan intent = %+v (%v): %s", intent, err, intent.Body)
	}
	for i, l := range out.Legs {
		op, err := f.store.GetOperation(ctx, "acme", l.OperationID)
		if err != nil {
			t.Fatalf("leg %d: %v", i, err)
		}
		if op.SellerID != []string{"sim-seller", "sim-seller-2", "sim-seller-3"}[i] || op.PlanID != "plan-spring-2027" || op.Requester != acme.Principal {
			t.Fatalf("leg %d operation = %+v", i, op)
		}
		leg := in.Legs[i]
		if leg.OperationID != op.ID || leg.ExecutionName != op.ExecutionName || leg.Input.OperationID != op.ID ||
			leg.Input.StateMachineARN != mediaBuyARN || leg.Input.Tenant != "acme" {
			t.Fatalf("leg %d child execution = %+v", i, leg)
		}
	}
	v, err := f.svc.Get(ctx, "acme", out.CampaignID)
	if err != nil {
		t.Fatal(err)
	}
	if v.Status != string(Running) || v.TotalBudget != "30000.00" || v.Planned != "22500.00" || v.Committed != "0.00" ||
		len(v.Legs) != 3 || v.Legs[0].Amount != "8500.25" || v.Legs[2].Status != "requested" || len(v.BySeller) != 3 {
		t.Fatalf("view = %+v", v)
	}

	// The same key and body replays the answer; another body under the key is refused.
	again, err := f.svc.Submit(ctx, acme, "campaign-key-1", buytest.Marshal(t, buytest.Example(t, "campaign.json")))
	if err != nil || !again.Replayed || again.CampaignID != out.CampaignID || f.campaigns.count() != 1 {
		t.Fatalf("replay = %+v, %v (%d executions)", again, err, f.campaigns.count())
	}
	other := buytest.Example(t, "campaign.json")
	other["name"] = "another"
	_, err = f.svc.Submit(ctx, acme, "campaign-key-1", buytest.Marshal(t, other))
	var re *buy.RequestError
	if !errors.As(err, &re) || re.Status != 422 || re.Code != "idempotency_key_reused" {
		t.Fatalf("same key, other body: err = %v", err)
	}

	// Another tenant does not see it.
	if _, err := f.svc.Get(ctx, "other", out.CampaignID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("other tenant's get: err = %v", err)
	}
	if _, err := f.svc.Events(ctx, "other", out.CampaignID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("other tenant's events: err = %v", err)
	}
	page, err := f.svc.List(ctx, "acme", 10, "")
	if err != nil || len(page.Items) != 1 || page.Items[0].CampaignID != out.CampaignID {
		t.Fatalf("list = %+v, %v", page, err)
	}
	evs, err := f.svc.Events(ctx, "acme", out.CampaignID)
	if err != nil || len(evs.Items) != 4 {
		t.Fatalf("events = %+v, %v", evs, err)
	}
	// The legs' events name their operation and seller; the campaign's own names neither.
	for _, e := range evs.Items {
		if (e.Type == "campaign_submitted") != (e.OperationID == "" && e.SellerID == "") {
			t.Errorf("event %+v", e)
		}
	}
}

// A refused campaign writes nothing: no claim (the key works for the corrected body), no
// operation, no campaign, no execution.
func TestRefusedCampaignLeavesNothing(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	over := buytest.Example(t, "campaign.json")
	over["total_budget"].(map[string]any)["amount"] = 22499.99
	_, err := f.svc.Submit(ctx, acme, "campaign-key-2", buytest.Marshal(t, over))
	var re *buy.RequestError
	if !errors.As(err, &re) || re.Code != "budget_over_total" {
		t.Fatalf("over the total: err = %v", err)
	}
	assertNothingStored(t, f)
	if _, err := f.svc.Submit(ctx, acme, "campaign-key-2", buytest.Marshal(t, buytest.Example(t, "campaign.json"))); err != nil {
		t.Fatalf("the corrected body under the same key: %v", err)
	}
}

// A leg at a disabled seller refuses the whole campaign, as a single buy there is refused: a
// disabled agent takes no new buys, whichever way they come.
func TestDisabledSellerLegRefusesTheCampaign(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	m := buytest.Example(t, "campaign.json")
	leg(m, 1)["seller_id"] = "paused-seller"
	_, err := f.svc.Submit(ctx, acme, "campaign-key-disabled", buytest.Marshal(t, m))
	var re *buy.RequestError
	if !errors.As(err, &re) || re.Status != 422 || re.Code != "seller_disabled" || re.Field != "/legs/1/seller_id" {
		t.Fatalf("disabled seller's leg: err = %v", err)
	}
	assertNothingStored(t, f)
}

// A leg whose PO number an active buy holds refuses the whole campaign, and the other legs'
// locks are released: nothing of the campaign stays behind.
func TestLockedLegRefusesTheCampaign(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	m := buytest.Example(t, "campaign.json")
	single := map[string]any{"seller_id": "sim-seller-3", "currency": "USD",
		"governance": m["governance"], "media_buy": legBuy(m, 2)}
	if _, err := f.buys.Submit(ctx, acme, "single-buy-key", buytest.Marshal(t, single)); err != nil {
		t.Fatal(err)
	}
	_, err := f.svc.Submit(ctx, acme, "campaign-key-3", buytest.Marshal(t, m))
	var re *buy.RequestError
	if !errors.As(err, &re) || re.Status != 409 || re.Code != "active_buy_exists" {
		t.Fatalf("locked leg: err = %v", err)
	}
	if f.execs.count() != 1 || f.campaigns.count() != 0 {
		t.Fatalf("%d media-buy and %d campaign executions started, want only the single buy's", f.execs.count(), f.campaigns.count())
	}
	for i := range 2 {
		if _, err := f.store.GetOperation(ctx, "acme", buy.OperationID("acme", legKey("campaign-key-3", i))); !errors.Is(err, record.ErrNotFound) {
			t.Fatalf("leg %d operation exists: %v", i, err)
		}
	}
	// The first two legs' PO numbers are free again.
	legBuy(m, 2)["po_number"] = "PO-2027-0199"
	if _, err := f.svc.Submit(ctx, acme, "campaign-key-4", buytest.Marshal(t, m)); err != nil {
		t.Fatalf("after the refusal: %v", err)
	}
}

func assertNothingStored(t *testing.T, f fixture) {
	t.Helper()
	ctx := context.Background()
	if n := f.execs.count() + f.campaigns.count(); n != 0 {
		t.Fatalf("%d executions started", n)
	}
	ops, err := f.store.ListOperations(ctx, "acme", record.ListOptions{})
	if err != nil || len(ops.Items) != 0 {
		t.Fatalf("operations = %+v, %v", ops.Items, err)
	}
	cps, err := f.store.ListCampaigns(ctx, "acme", 10, "")
	if err != nil || len(cps.Items) != 0 {
		t.Fatalf("campaigns = %+v, %v", cps.Items, err)
	}
}

// countingBuys counts the legs' reads a campaign use case makes.
type countingBuys struct {
	Legs
	mu    sync.Mutex
	reads int
}

func (c *countingBuys) Get(ctx context.Context, tenant, id string) (api.MediaBuy, error) {
	c.mu.Lock()
	c.reads++
	c.mu.Unlock()
	return c.Legs.Get(ctx, tenant, id)
}

// The list reads the campaign items only, whatever the number of legs: a running campaign is
// running with no committed amount yet, a settled one shows its recorded outcome and total.
func TestListReadsNoLeg(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	counted := &countingBuys{Legs: f.buys}
	svc := New(f.store, f.placer, counted, f.campaigns, buytest.Agents, buytest.Schemas(t), Config{Run: workflow.DefaultRunConfig(), MediaBuyStateMachineARN: mediaBuyARN})
	running, err := svc.Submit(ctx, acme, "list-key-1", buytest.Marshal(t, buytest.Example(t, "campaign.json")))
	if err != nil {
		t.Fatal(err)
	}
	second := buytest.Example(t, "campaign.json")
	for i := range 3 {
		legBuy(second, i)["po_number"] = "PO-LIST-" + string(rune('A'+i))
	}
	settled, err := svc.Submit(ctx, acme, "list-key-2", buytest.Marshal(t, second))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.store.SettleCampaign(ctx, "acme", settled.CampaignID, string(Failed), "0.00"); err != nil {
		t.Fatal(err)
	}
	page, err := svc.List(ctx, "acme", 10, "")
	if err != nil || len(page.Items) != 2 {
		t.Fatalf("list = %+v, %v", page, err)
	}
	if counted.reads != 0 {
		t.Errorf("the list read %d legs", counted.reads)
	}
	byID := map[string]api.Campaign{}
	for _, v := range page.Items {
		byID[v.CampaignID] = v
	}
	r, s := byID[running.CampaignID], byID[settled.CampaignID]
	if r.Status != string(Running) || r.Committed != "" || r.Planned != "22500.00" || len(r.Legs) != 3 || r.Legs[0].Status != "" || r.Legs[0].Amount != "8500.25" {
		t.Errorf("running campaign in the list: %+v", r)
	}
	if s.Status != string(Failed) || s.Committed != "0.00" {
		t.Errorf("settled campaign in the list: %+v", s)
	}
	// One campaign's GET reads its legs and derives their statuses.
	if v, err := svc.Get(ctx, "acme", running.CampaignID); err != nil || v.Committed != "0.00" || v.Legs[0].Status != "requested" || counted.reads != 3 {
		t.Errorf("get = %+v, %v, %d leg reads", v, err, counted.reads)
	}
}
