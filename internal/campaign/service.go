package campaign

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/buy"
	"github.com/buyflow/buyflow/internal/money"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/workflow"
)

// Ledger is the part of the ledger the campaign use cases need.
type Ledger interface {
	buy.Claims
	CreateCampaign(ctx context.Context, c record.Campaign) (*record.Campaign, error)
	GetCampaign(ctx context.Context, tenant, id string) (*record.Campaign, error)
	GetApproval(ctx context.Context, id string) (*record.Approval, error)
	ListEvents(ctx context.Context, tenant, opID string, limit int, cursor string) (record.Page[record.Event], error)
	ListCampaigns(ctx context.Context, tenant string, limit int, cursor string) (record.Page[*record.Campaign], error)
}

// placer places a campaign's legs: a leg is a media buy (*buy.Placer).
type placer interface {
	PlaceAll(ctx context.Context, c buy.Caller, keys []string, reqs []*buy.ValidatedRequest) ([]buy.Placed, error)
}

var _ placer = (*buy.Placer)(nil)

// Legs reads a leg as the media-buy API shows it (the media-buy use case's reads).
type Legs interface {
	Get(ctx context.Context, tenant, id string) (api.MediaBuy, error)
	Events(ctx context.Context, tenant, id, cursor string, limit int) (api.Page[api.Event], error)
}

// Service implements the campaign use cases.
type Service struct {
	ledger Ledger
	placer placer
	legs   Legs
	execs  buy.Executions
	agents buy.AgentLookup
	schema buy.SchemaValidator
	cfg    Config
}

// Config holds the campaign use case's settings.
type Config struct {
	// Run is the timing of every leg's execution (tests shrink it); it travels in the campaign
	// execution's input for the cancels of compensation.
	Run workflow.RunConfig
	// MediaBuyStateMachineARN is the state machine every leg runs as a child execution of.
	MediaBuyStateMachineARN string
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// New returns the campaign service. placer places the legs, legs reads them, execs starts
// Campaign executions; agents is the seller lookup a single buy's submit uses.
func New(l Ledger, placer placer, legs Legs, execs buy.Executions, agents buy.AgentLookup, schema buy.SchemaValidator, cfg Config) *Service {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Service{ledger: l, placer: placer, legs: legs, execs: execs, agents: agents, schema: schema, cfg: cfg}
}

// ExecutionInput is the input of a Campaign execution (statemachine/campaign.asl.json).
type ExecutionInput struct {
	CampaignID              string             `json:"campaign_id"`
	Tenant                  string             `json:"tenant"`
	Config                  workflow.RunConfig `json:"config"`
	MediaBuyStateMachineARN string             `json:"media_buy_state_machine_arn"`
	// SyncPlan is true when the campaign pushes its plan (sync_plans) before the legs start.
	SyncPlan bool       `json:"sync_plan"`
	Legs     []LegInput `json:"legs"`
}

// legExecution is one leg's child execution: its operation, its name and its input.
type legExecution[In any] struct {
	OperationID   string `json:"operation_id"`
	ExecutionName string `json:"execution_name"`
	Input         In     `json:"input"`
}

// LegInput is a leg's child execution as a single buy's submit would start it.
type LegInput = legExecution[workflow.ExecutionInput]

// ErrNotFound reports a campaign that does not exist for the caller's tenant (including one of
// another tenant: the answer is the same).
var ErrNotFound = errors.New("campaign not found")

// Submit accepts a campaign: validate every leg (nothing is written for a refused campaign),
// claim the Idempotency-Key, place every leg as a media buy, record the campaign, and complete
// the claim with the answer replayed to every retry.
func (s *Service) Submit(ctx context.Context, c buy.Caller, key string, body []byte) (api.CampaignSubmitted, error) {
	v, err := Parse(ctx, body, s.agents, s.schema)
	if err != nil {
		return api.CampaignSubmitted{}, err
	}
	return buy.Once(ctx, s.ledger, c.Tenant, key, v.PayloadHash, "campaign",
		func(out *api.CampaignSubmitted) { out.Replayed = true },
		func() (api.CampaignSubmitted, error) { return s.place(ctx, c, key, v) })
}

func (s *Service) place(ctx context.Context, c buy.Caller, key string, v *Validated) (api.CampaignSubmitted, error) {
	id := ID(c.Tenant, key)
	keys := make([]string, len(v.Buys))
	for i := range v.Buys {
		keys[i] = legKey(key, i)
	}
	for i, b := range v.Buys {
		if re := b.Refusal(); re != nil {
			return api.CampaignSubmitted{}, legError(re, "/legs/"+strconv.Itoa(i), i)
		}
	}
	placed, err := s.placer.PlaceAll(ctx, c, keys, v.Buys)
	if err != nil {
		return api.CampaignSubmitted{}, err
	}
	rec := record.Campaign{
		ID: id, Tenant: c.Tenant, Name: v.Name, GovernanceAgentID: v.Governance.AgentID, PlanID: v.Governance.PlanID,
		Policy: string(v.Policy), BudgetTotal: v.Total.Decimal(), Currency: v.Total.Currency, Requester: c.Principal,
	}
	if v.Notify != nil {
		rec.NotifySlack = v.Notify.Slack
	}
	if v.SyncPlans != nil {
		intent, err := planIntent(id, v.SyncPlans, s.cfg.Now())
		if err != nil {
			return api.CampaignSubmitted{}, err
		}
		rec.PlanIntent = intent
	}
	in := ExecutionInput{CampaignID: id, Tenant: c.Tenant, Config: s.cfg.Run, MediaBuyStateMachineARN: s.cfg.MediaBuyStateMachineARN,
		SyncPlan: rec.PlanIntent != nil}
	out := api.CampaignSubmitted{CampaignID: id, Status: string(Running), Links: LinksFor(id)}
	for i, b := range v.Buys {
		p := placed[i]
		rec.Legs = append(rec.Legs, record.CampaignLeg{
			OperationID: p.OperationID, SellerID: b.SellerID, PONumber: b.PONumber, Amount: b.Amount.Decimal(),
		})
		in.Legs = append(in.Legs, LegInput{OperationID: p.OperationID, ExecutionName: p.ExecutionName, Input: p.Input})
		out.Legs = append(out.Legs, api.SubmittedLeg{OperationID: p.OperationID, SellerID: b.SellerID, Links: p.Links})
	}
	if _, err := s.ledger.CreateCampaign(ctx, rec); err != nil && !errors.Is(err, record.ErrConflict) {
		return api.CampaignSubmitted{}, fmt.Errorf("campaign: record %s: %w", id, err)
	}
	// Named after the campaign: a retry of this submit starts the same execution.
	if _, err := s.execs.Start(ctx, id, in); err != nil {
		return api.CampaignSubmitted{}, fmt.Errorf("campaign: start execution: %w", err)
	}
	return out, nil
}

// planIntent fixes the campaign's sync_plans request. Its idempotency key derives from the
// campaign id, so a submit retried before the campaign was stored fixes the same request.
func planIntent(id string, req map[string]json.RawMessage, now time.Time) ([]byte, error) {
	body := make(map[string]json.RawMessage, len(req)+1)
	for k, v := range req {
		body[k] = v
	}
	body["idempotency_key"], _ = json.Marshal("sync-plans-" + id)
	intent, err := adcp.NewIntent(adcp.ToolSyncPlans, body, now)
	if err != nil {
		return nil, fmt.Errorf("campaign: sync_plans intent: %w", err)
	}
	b, err := json.Marshal(intent)
	if err != nil {
		return nil, fmt.Errorf("campaign: encode sync_plans intent: %w", err)
	}
	return b, nil
}

func (s *Service) campaign(ctx context.Context, tenant, id string) (*record.Campaign, error) {
	rec, err := s.ledger.GetCampaign(ctx, tenant, id)
	if errors.Is(err, record.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("campaign: get %s: %w", id, err)
	}
	return rec, nil
}

// Get returns the tenant's campaign id with every leg's current status.
func (s *Service) Get(ctx context.Context, tenant, id string) (api.Campaign, error) {
	rec, err := s.campaign(ctx, tenant, id)
	if err != nil {
		return api.Campaign{}, err
	}
	return s.view(ctx, rec)
}

// summary is what the campaign item alone says of rec: everything but the legs' statuses and
// what they committed; planned is the sum of the legs' amounts.
func summary(rec *record.Campaign) (api.Campaign, money.Amount, error) {
	out := api.Campaign{
		CampaignID: rec.ID, Name: rec.Name, Reason: rec.Reason, Policy: rec.Policy, GovernanceID: rec.GovernanceAgentID,
		PlanID: rec.PlanID, Currency: rec.Currency, TotalBudget: rec.BudgetTotal, Requester: rec.Requester,
		CreatedAt: rec.CreatedAt.UTC().Format(time.RFC3339Nano), Links: LinksFor(rec.ID), Legs: make([]api.CampaignLeg, 0, len(rec.Legs)),
	}
	planned := money.Amount{Currency: rec.Currency}
	for _, leg := range rec.Legs {
		amount, err := money.ParseDecimal(leg.Amount, rec.Currency)
		if err != nil {
			return api.Campaign{}, money.Amount{}, fmt.Errorf("campaign: %s leg %s amount: %w", rec.ID, leg.OperationID, err)
		}
		planned = planned.Add(amount)
		out.Legs = append(out.Legs, api.CampaignLeg{OperationID: leg.OperationID, SellerID: leg.SellerID, PONumber: leg.PONumber, Amount: amount.Decimal(),
			Links: buy.LinksFor(leg.OperationID)})
	}
	return out, planned, nil
}

func (s *Service) view(ctx context.Context, rec *record.Campaign) (api.Campaign, error) {
	out, planned, err := summary(rec)
	if err != nil {
		return api.Campaign{}, err
	}
	states := make([]LegState, 0, len(rec.Legs))
	for i, leg := range rec.Legs {
		amount, _ := money.ParseDecimal(leg.Amount, rec.Currency) // summary read it
		lv := &out.Legs[i]
		st := workflow.StatusRequested
		got, err := s.legs.Get(ctx, rec.Tenant, leg.OperationID)
		switch {
		case err == nil:
			st = workflow.Status(got.Status)
			lv.Reason, lv.MediaBuyID = got.Reason, got.MediaBuyID
		case !errors.Is(err, buy.ErrNotFound):
			return api.Campaign{}, fmt.Errorf("campaign: %s leg %s: %w", rec.ID, leg.OperationID, err)
		}
		lv.Status = string(st)
		states = append(states, LegState{SellerID: leg.SellerID, Status: st, Amount: amount})
	}
	o := Decide(rec.Currency, states)
	if rec.ApprovalID != "" {
		a, err := s.ledger.GetApproval(ctx, rec.ApprovalID)
		if err != nil {
			return api.Campaign{}, fmt.Errorf("campaign: %s approval %s: %w", rec.ID, rec.ApprovalID, err)
		}
		if a.Tenant == rec.Tenant && a.CampaignID == rec.ID { // keyed by id alone: only the campaign's own
			out.Approval = buy.ApprovalOf(a)
			o.Status = approvalOutcome(a, o.Status)
		}
	}
	out.Status, out.Planned, out.Committed = string(o.Status), planned.Decimal(), o.Committed.Decimal()
	switch {
	case rec.Outcome != "":
		out.Status = rec.Outcome
	case Policy(rec.Policy) == AllOrNothing && o.Status == PartiallyCompleted:
		// The Campaign execution is canceling the placed legs: not final yet.
		out.Status = string(Running)
	}
	for _, sa := range o.BySeller {
		out.BySeller = append(out.BySeller, api.SellerCommitment{SellerID: sa.SellerID, Committed: sa.Amount.Decimal()})
	}
	return out, nil
}

// List returns one page of the tenant's campaigns, newest first, from the campaign items
// alone (one query, whatever the number of legs): each campaign's status is its recorded
// outcome (running until it is settled), what it committed once settled, and its legs without
// their statuses, which GET of one campaign reads.
func (s *Service) List(ctx context.Context, tenant string, limit int, cursor string) (api.Page[api.Campaign], error) {
	page, err := s.ledger.ListCampaigns(ctx, tenant, limit, cursor)
	if errors.Is(err, record.ErrInvalidCursor) {
		return api.Page[api.Campaign]{}, &buy.RequestError{Status: 400, Code: "invalid_cursor", Field: "cursor", Message: "the cursor is not one this listing returned"}
	}
	if err != nil {
		return api.Page[api.Campaign]{}, fmt.Errorf("campaign: list: %w", err)
	}
	out := api.Page[api.Campaign]{Items: make([]api.Campaign, 0, len(page.Items)), NextCursor: page.Cursor}
	for _, rec := range page.Items {
		v, planned, err := summary(rec)
		if err != nil {
			return api.Page[api.Campaign]{}, err
		}
		v.Status, v.Planned, v.Committed = string(Running), planned.Decimal(), ""
		if rec.Outcome != "" {
			v.Status, v.Committed = rec.Outcome, rec.Committed
		}
		out.Items = append(out.Items, v)
	}
	return out, nil
}

// maxLegEvents bounds the events read of one leg for a campaign's timeline; a leg's own
// timeline (its events link) pages through the rest.
const maxLegEvents = 500

// Events returns the campaign's timeline, oldest first: the campaign's submission and its own
// events (its approval's), then every leg's events, each named by its operation and seller.
func (s *Service) Events(ctx context.Context, tenant, id string) (api.Page[api.CampaignEvent], error) {
	rec, err := s.campaign(ctx, tenant, id)
	if err != nil {
		return api.Page[api.CampaignEvent]{}, err
	}
	detail, err := json.Marshal(map[string]any{"policy": rec.Policy, "legs": len(rec.Legs), "plan_id": rec.PlanID})
	if err != nil {
		return api.Page[api.CampaignEvent]{}, fmt.Errorf("campaign: encode event detail: %w", err)
	}
	out := api.Page[api.CampaignEvent]{Items: []api.CampaignEvent{{Event: api.Event{
		At: rec.CreatedAt.UTC().Format(time.RFC3339Nano), Type: record.EventCampaignSubmitted, Actor: rec.Requester,
		Amount: rec.BudgetTotal + " " + rec.Currency, Detail: detail,
	}}}}
	// The campaign's own timeline: its one approval's request, views and decision.
	for cursor, n := "", 0; n < maxLegEvents; {
		page, err := s.ledger.ListEvents(ctx, tenant, rec.ID, 100, cursor)
		if err != nil {
			return api.Page[api.CampaignEvent]{}, fmt.Errorf("campaign: events of %s: %w", rec.ID, err)
		}
		for _, e := range page.Items {
			out.Items = append(out.Items, api.CampaignEvent{Event: buy.EventOf(e)})
		}
		n += len(page.Items)
		if cursor = page.Cursor; cursor == "" {
			break
		}
	}
	for _, leg := range rec.Legs {
		cursor := ""
		for n := 0; n < maxLegEvents; {
			page, err := s.legs.Events(ctx, tenant, leg.OperationID, cursor, 100)
			if errors.Is(err, buy.ErrNotFound) {
				break
			}
			if err != nil {
				return api.Page[api.CampaignEvent]{}, fmt.Errorf("campaign: events of leg %s: %w", leg.OperationID, err)
			}
			for _, e := range page.Items {
				out.Items = append(out.Items, api.CampaignEvent{OperationID: leg.OperationID, SellerID: leg.SellerID, Event: e})
			}
			n += len(page.Items)
			if cursor = page.NextCursor; cursor == "" {
				break
			}
		}
	}
	slices.SortStableFunc(out.Items, func(a, b api.CampaignEvent) int { return cmp.Compare(at(a.At), at(b.At)) })
	return out, nil
}

func at(s string) int64 {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0
	}
	return t.UnixNano()
}
