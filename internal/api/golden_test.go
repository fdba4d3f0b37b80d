package api_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/record"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the views")

var (
	links    = api.Links{Self: "/v1/media-buys/mb-1", Events: "/v1/media-buys/mb-1/events"}
	approval = api.Approval{ApprovalID: "apr-1", CampaignID: "cp-1", Status: "approved", Approvers: []string{"U123"},
		RequestedAt: "2026-01-05T10:00:00Z", ExpiresAt: "2026-01-06T10:00:00Z", Reason: "policy_threshold",
		ReasonText: "over 20000.00 USD", Amount: "25000.00 USD", Legs: []string{"mb-1"}, Round: 1, Escalation: true,
		EscalatesTo: []string{"U456"}, DecidedBy: "U123", DecidedAt: "2026-01-05T11:00:00Z"}
	event = api.Event{At: "2026-01-05T10:00:00.5Z", Type: "status_changed", Actor: "seller", From: "submitted",
		To: "working", Amount: "5000.00 USD", Reason: "seller_async", Detail: json.RawMessage(`{"task_id":"t-1"}`)}
	packages = []record.PackageBudget{{PackageID: "pkg-1", Budget: "3000.00"}}
	mediaBuy = api.MediaBuy{OperationID: "mb-1", Status: "completed", SellerID: "seller-a", GovernanceID: "gov-a",
		PlanID: "plan-1", PONumber: "PO-1", Budget: "5000.00", Currency: "USD", Requester: "arn:aws:iam::1:user/a",
		SellerTaskID: "t-1", MediaBuyID: "smb-1", Reason: "done", CreatedAt: "2026-01-05T10:00:00Z",
		UpdatedAt: "2026-01-05T10:05:00Z", Version: 7, MediaBuy: json.RawMessage(`{"po_number":"PO-1"}`),
		Packages: packages, ExecutionName: "mb-1", Approval: &approval,
		Current: &api.Current{Revision: 2, State: "active", Budget: "6000.00", Currency: "USD", Packages: packages,
			EndTime: "2026-03-29T00:00:00Z", ChangeInFlight: "chg-2", LastChangeID: "chg-1", LastOutcome: "applied",
			LastReason: "seller accepted", UpdatedAt: "2026-01-07T10:00:00Z"},
		Waiting: &api.Waiting{Reason: "seller_unavailable", AgentID: "seller-a", Since: "2026-01-05T10:01:00Z", RetryAt: "2026-01-05T10:02:00Z"},
		Seller:  &api.SellerWords{Message: "IO review by our sales team", SellerStatus: "working", At: "2026-01-05T10:03:00Z"},
		Kind:    "modification", BuyID: "mb-0", Change: json.RawMessage(`{"budget":6000}`), Links: links}
	campaign = api.Campaign{CampaignID: "cp-1", Name: "spring", Status: "failed", Policy: "best_effort",
		Reason:       "The campaign stopped after its legs were handed to their own media buys: a step failed after its retries (Rate exceeded). 1 of its 1 leg placed, committing 13500.00 USD; each leg's status says how it ended.",
		GovernanceID: "gov-a", PlanID: "plan-1", Currency: "USD", TotalBudget: "30000.00", Planned: "22500.00",
		Committed: "13500.00", BySeller: []api.SellerCommitment{{SellerID: "seller-a", Committed: "13500.00"}},
		Legs: []api.CampaignLeg{{OperationID: "mb-1", SellerID: "seller-a", PONumber: "PO-1", Amount: "13500.00",
			Status: "completed", Reason: "done", MediaBuyID: "smb-1", Links: links}},
		Approval: &approval, Requester: "arn:aws:iam::1:user/a", CreatedAt: "2026-01-05T10:00:00Z",
		Links: api.Links{Self: "/v1/campaigns/cp-1", Events: "/v1/campaigns/cp-1/events"}}
	inboxItem = api.InboxItem{ApprovalID: "apr-1", OperationID: "mb-1", CampaignID: "cp-1", Summary: "ctv, 2 packages",
		Seller: "seller-a", Amount: "USD 25,000.00", Reason: "policy_threshold", ReasonText: "over 20000.00 USD",
		Requester: "a@example.com", ExpiresAt: "2026-01-06T10:00:00Z", Escalation: true,
		Legs: []api.InboxLeg{{OperationID: "mb-1", Seller: "seller-a", PONumber: "PO-1", Amount: "USD 13,500.00",
			Why: "over the threshold", Governance: "approved"}}}
)

// views are representative values of every view the API answers with; "full" ones set every
// field (TestGoldenViewsSetEveryField), so a field added without its golden fails a test.
var views = []struct {
	name string
	v    any
	full bool
}{
	{"submitted", api.Submitted{OperationID: "mb-1", Status: "requested", Replayed: true, Links: links}, true},
	{"media_buy", mediaBuy, true},
	{"media_buy_minimal", api.MediaBuy{OperationID: "mb-1", Status: "requested", Links: links}, false},
	{"media_buy_page", api.Page[api.MediaBuy]{Items: []api.MediaBuy{mediaBuy}, NextCursor: "c2"}, true},
	{"event_page", api.Page[api.Event]{Items: []api.Event{event}, NextCursor: "c2"}, true},
	{"campaign_submitted", api.CampaignSubmitted{CampaignID: "cp-1", Status: "running", Replayed: true,
		Legs: []api.SubmittedLeg{{OperationID: "mb-1", SellerID: "seller-a", Links: links}}, Links: campaign.Links}, true},
	{"campaign", campaign, true},
	{"campaign_page", api.Page[api.Campaign]{Items: []api.Campaign{campaign}, NextCursor: "c2"}, true},
	{"campaign_event_page", api.Page[api.CampaignEvent]{Items: []api.CampaignEvent{{OperationID: "mb-1", SellerID: "seller-a", Event: event}}}, false},
	{"problem", api.Problem{Error: api.ProblemDetail{Code: "invalid_limit", Message: "limit must be an integer from 1 to 100", Field: "limit"}}, true},
	{"change_accepted", api.ChangeAccepted{ChangeID: "chg-1", BuyID: "mb-1", Kind: "budget", Status: "requested", Replayed: true,
		Links: api.ChangeLinks{Change: "/v1/media-buys/chg-1", Events: "/v1/media-buys/mb-1/events"}}, true},
	{"delivery", api.Delivery{OperationID: "mb-1", Currency: "USD", Approved: "6000.00", Spend: "6100.00", OverBudget: true,
		Snapshots: []record.DeliverySnapshot{{Tenant: "acme", OperationID: "mb-1", MediaBuyID: "smb-1",
			AsOf: time.Date(2026, 1, 6, 0, 0, 0, 0, time.UTC), Impressions: 120000, Spend: "6100.00", Currency: "USD",
			Pacing: "1.02", Approved: "6000.00", ReadAt: time.Date(2026, 1, 6, 1, 0, 0, 0, time.UTC), Pushed: true}}}, true},
	{"inbox", api.Inbox{Approver: "U123", Items: []api.InboxItem{inboxItem}}, true},
	{"inbox_approval", api.InboxApproval{InboxItem: inboxItem, Flight: "2026-01-05 → 2026-03-29", ProposalID: "prop-1",
		Packages:   []api.InboxPackage{{Product: "ctv_premium", Flight: "2026-01-05 → 2026-03-29", Budget: "USD 6,000.00"}},
		Governance: &api.InboxGovernance{Verdict: "approved_with_conditions", Label: "Approved with conditions", Conditions: []api.InboxCondition{{Field: "budget", Reason: "over plan", NeedsPerson: true}}},
		ReviewURL:  "https://api.example/v1/approvals/apr-1?sig=x",
		Changes:    []api.InboxChangeLine{{What: "budget", Before: "USD 5,000.00", After: "USD 6,000.00"}}}, true},
}

// TestGoldenJSON pins the JSON of every view: renaming a field, or its omitempty, changes the
// API and fails here until the golden file is rewritten (go test ./internal/api -update).
func TestGoldenJSON(t *testing.T) {
	for _, tc := range views {
		t.Run(tc.name, func(t *testing.T) {
			got, err := json.MarshalIndent(tc.v, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			path := filepath.Join("testdata", tc.name+".golden")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test ./internal/api -update writes it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("the JSON of %T changed; if the API is to change, rewrite %s with -update\n got: %s\nwant: %s", tc.v, path, got, want)
			}
			// The views decode from their own JSON as the client reads it.
			back := reflect.New(reflect.TypeOf(tc.v))
			if err := json.Unmarshal(want, back.Interface()); err != nil {
				t.Fatalf("decode %s: %v", path, err)
			}
			again, _ := json.MarshalIndent(back.Elem().Interface(), "", "  ")
			if !bytes.Equal(append(again, '\n'), want) {
				t.Errorf("%s does not survive a decode into %T:\n%s", path, tc.v, again)
			}
		})
	}
}

// TestGoldenViewsSetEveryField keeps the goldens whole: every field of a full view (and of the
// structs, pointers and slices in it) is set, so a new field shows in its golden file.
func TestGoldenViewsSetEveryField(t *testing.T) {
	for _, tc := range views {
		if tc.full {
			unset(t, tc.name, reflect.ValueOf(tc.v))
		}
	}
}

func unset(t *testing.T, path string, v reflect.Value) {
	t.Helper()
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			t.Errorf("%s is nil: set it in the golden view", path)
			return
		}
		unset(t, path, v.Elem())
	case reflect.Slice:
		if v.Len() == 0 {
			t.Errorf("%s is empty: set it in the golden view", path)
			return
		}
		if v.Type().Elem().Kind() == reflect.Struct {
			unset(t, path+"[0]", v.Index(0))
		}
	case reflect.Struct:
		if v.Type().Implements(reflect.TypeFor[json.Marshaler]()) { // a time: set as a whole
			if v.IsZero() {
				t.Errorf("%s is zero: set it in the golden view", path)
			}
			return
		}
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.Tag.Get("json") != "-" {
				unset(t, path+"."+f.Name, v.Field(i))
			}
		}
	default:
		if v.IsZero() {
			t.Errorf("%s is zero: set it in the golden view", path)
		}
	}
}
