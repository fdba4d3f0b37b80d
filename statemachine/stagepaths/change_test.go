package stagepaths

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/apiclient"
)

// The paths of a change to a placed buy: its own execution of mediabuy.asl.json, named after
// the change, with the real modify, poll and webhook bootstraps behind it.

var (
	changePrelude = []string{"IsContinuation", "CheckChange", "ChangeDecision"}
	changeApplied = []string{"UpdateMediaBuy", "ChangeSellerAvailable", "AwaitChangeSeller", "ChangeSellerStatus", "ApplyChange", "ChangeOutcome", "ChangeApplied"}
)

// placed submits a one-package buy of 3,000 USD that the seller completes inline, and waits
// until it is placed.
func placed(t *testing.T, patch map[string]any) *buyRun {
	t.Helper()
	r := begin(t, patch)
	r.place()
	return r
}

// place submits r's buy as placed does and waits until it is placed.
func (r *buyRun) place() {
	r.t.Helper()
	r.submit(apiclient.Buy{Sim: "sync", Budgets: []float64{3000}})
	path(r.t, only(r.t, r.finish(60*time.Second)), "SUCCEEDED", "", seq(prelude, []string{"CreateMediaBuy", "SellerAvailable", "AwaitSeller"}, completes)...)
}

// change sends a change and returns its id; the 202 is required.
func (r *buyRun) change(body string, cancel bool) string {
	r.t.Helper()
	acc, err := r.try(body, cancel)
	if err != nil {
		r.t.Fatalf("change %s: %v", body, err)
	}
	r.changes = append(r.changes, acc.ChangeID)
	return acc.ChangeID
}

// changeSeq numbers the changes' idempotency keys; the change tests run in parallel.
var changeSeq atomic.Int64

func (r *buyRun) try(body string, cancel bool) (api.ChangeAccepted, error) {
	return r.client.Change(context.Background(), r.op, fmt.Sprintf("chg-%s-%d", r.po, changeSeq.Add(1)), []byte(body), cancel)
}

// current is the buy after its changes, as GET /v1/media-buys/{id} shows it.
func (r *buyRun) current() api.Current {
	r.t.Helper()
	op := r.operation()
	if op.Current == nil {
		r.t.Fatalf("buy %s shows no current state", r.op)
	}
	return *op.Current
}

func wantCurrent(t *testing.T, c api.Current, revision int, state, budget, outcome string) {
	t.Helper()
	if c.Revision != revision || c.State != state || c.Budget != budget || c.LastOutcome != outcome || c.ChangeInFlight != "" {
		t.Errorf("current = %+v, want revision %d, %s, budget %s, last outcome %s, nothing in flight", c, revision, state, budget, outcome)
	}
}

func TestChangeBudgetIncreaseApplied(t *testing.T) { budgetIncrease(placed(t, nil)) }

// budgetIncrease is the path at r's agents, r's buy placed (versions_test.go runs it at 3.1
// too).
func budgetIncrease(r *buyRun) {
	t := r.t
	id := r.change(`{"budget":{"total":3500},"reason":"strong first week","context":{"sim":"sync"}}`, false)
	ex := only(t, r.finishNamed(id, 60*time.Second))
	path(t, ex, "SUCCEEDED", "", seq(changePrelude, changeApplied)...)

	checks := r.governanceCalls("check_governance")
	if len(checks) != 2 {
		t.Fatalf("governance heard %d checks, want the buy's and the change's", len(checks))
	}
	chk := checks[1].Arguments
	if arg(t, chk, "phase") != "modification" || arg(t, chk, "tool") != "update_media_buy" {
		t.Errorf("the change's check is %s: want phase modification, tool update_media_buy", chk)
	}
	// 3.2: the positive increment the change commits, not the new total; 3.1 has no such field.
	if pc, _ := arg(t, chk, "proposed_commitment").(map[string]any); r.version() == adcp.Version32 && (pc == nil || pc["amount"] != 500.0 || pc["currency"] != "USD") {
		t.Errorf("the change's 3.2 check %s: want proposed_commitment 500 USD", chk)
	} else if r.version() != adcp.Version32 && pc != nil {
		t.Errorf("the change's 3.1 check %s carries 3.2's proposed_commitment", chk)
	}
	updates := r.sellerCalls("update_media_buy")
	if len(updates) != 1 {
		t.Fatalf("seller heard %d update_media_buy, want 1", len(updates))
	}
	// Governance checked exactly what the seller received (beside the envelope fields).
	payload, _ := arg(t, chk, "payload").(map[string]any)
	sent := updates[0].Arguments
	if fmt.Sprint(payload["packages"]) != fmt.Sprint(arg(t, sent, "packages")) || payload["media_buy_id"] != arg(t, sent, "media_buy_id") ||
		fmt.Sprint(payload["revision"]) != fmt.Sprint(arg(t, sent, "revision")) {
		t.Errorf("governance checked %v, the seller received %s", payload, sent)
	}
	if arg(t, sent, "idempotency_key") == nil || arg(t, sent, "governance_context") == nil {
		t.Errorf("update_media_buy %s lacks the seller idempotency key or the governance context", sent)
	}
	c := r.current()
	wantCurrent(t, c, 2, "active", "3500.00", "applied")
	if len(c.Packages) != 1 || c.Packages[0].Budget != "3500.00" {
		t.Errorf("packages %+v, want one at 3500.00", c.Packages)
	}
	reports := r.governanceCalls("report_plan_outcome")
	if len(reports) != 2 || arg(t, reports[1].Arguments, "outcome") != "completed" {
		t.Errorf("governance heard %v, want the change reported completed", tools(reports))
	}
	tl := r.timeline()
	for _, want := range []string{"modification_requested", "modification_governance_check", "modification_seller_call", "modification_applied", "modification_outcome_report"} {
		if !slices.Contains(tl, want) {
			t.Errorf("the buy's timeline %v lacks %s", tl, want)
		}
	}
}

func TestChangeDeniedByGovernanceLeavesTheBuy(t *testing.T) {
	r := placed(t, nil)
	id := r.change(`{"budget":{"total":9000},"context":{"sim":"denied"}}`, false)
	ex := only(t, r.finishNamed(id, 60*time.Second))
	path(t, ex, "FAILED", "ChangeDeniedByGovernance", seq(changePrelude,
		[]string{"ChangeDenied", "RecordChangeFailure", "ChangeFailureKind", "ChangeDeniedByGovernance"})...)
	if n := len(r.sellerCalls("update_media_buy")); n != 0 {
		t.Errorf("the seller heard %d update_media_buy after a denial", n)
	}
	c := r.current()
	wantCurrent(t, c, 0, "active", "3000.00", "denied")
	if c.LastReason == "" {
		t.Error("the denial's reason is not on the buy")
	}
	if r.operation().Budget != "3000.00" {
		t.Error("the buy's budget changed after a denial")
	}
}

func TestChangeAsyncCompletesByWebhook(t *testing.T) {
	r := placed(t, map[string]any{"poll_initial_seconds": 30, "poll_max_seconds": 30})
	id := r.change(`{"paused":true,"context":{"sim":"async_complete"}}`, false)
	ex := only(t, r.finishNamed(id, 60*time.Second))
	path(t, ex, "SUCCEEDED", "", seq(changePrelude, changeApplied)...)
	wantCurrent(t, r.current(), 2, "paused", "3000.00", "applied")
	change, err := r.client.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if change.Kind != "modification" || change.BuyID != r.op || change.Status != "completed" || change.SellerTaskID == "" {
		t.Errorf("the change reads %+v", change)
	}
	if types := r.timelineOf(id); !slices.Contains(types, "webhook") || slices.Contains(types, "poll") {
		t.Errorf("the change's timeline %v: want the seller's webhook and no poll", types)
	}
}

func TestChangeSellerFailsKeepsTheBuy(t *testing.T) {
	r := placed(t, map[string]any{"poll_initial_seconds": 30, "poll_max_seconds": 30})
	id := r.change(`{"budget":{"total":4000},"context":{"sim":"async_fail"}}`, false)
	ex := only(t, r.finishNamed(id, 60*time.Second))
	path(t, ex, "FAILED", "SellerDidNotApplyChange", seq(changePrelude,
		[]string{"UpdateMediaBuy", "ChangeSellerAvailable", "AwaitChangeSeller", "ChangeSellerStatus", "ApplyChange", "ChangeOutcome", "ChangeNotApplied"})...)
	c := r.current()
	wantCurrent(t, c, 0, "active", "3000.00", "failed")
	if c.LastReason == "" {
		t.Error("the seller's reason is not on the buy")
	}
	reports := r.governanceCalls("report_plan_outcome")
	if len(reports) != 2 || arg(t, reports[1].Arguments, "outcome") != "failed" {
		t.Errorf("governance heard %v, want the change reported failed", tools(reports))
	}
}

func TestPauseResumeCancelAndNothingAfter(t *testing.T) {
	r := placed(t, nil)
	steps := []struct {
		body   string
		cancel bool
		state  string
		status string // the buy's own status: what readers, filters and status events go by
	}{
		{`{"paused":true,"context":{"sim":"sync"}}`, false, "paused", "paused"},
		{`{"paused":false}`, false, "active", "completed"}, // the seller's default: async, completed by webhook
		{`{"reason":"campaign withdrawn","context":{"sim":"sync"}}`, true, "canceled", "canceled"},
	}
	for i, st := range steps {
		id := r.change(st.body, st.cancel)
		ex := only(t, r.finishNamed(id, 60*time.Second))
		ends(t, ex, "SUCCEEDED", "", "ApplyChange", "ChangeOutcome", "ChangeApplied")
		wantCurrent(t, r.current(), i+2, st.state, "3000.00", "applied")
		if op := r.operation(); op.Status != st.status {
			t.Errorf("after %s the buy's status is %s, want %s", st.body, op.Status, st.status)
		}
	}
	if got := r.sellerCalls("update_media_buy"); len(got) != 3 || arg(t, got[2].Arguments, "canceled") != true ||
		arg(t, got[2].Arguments, "cancellation_reason") != "campaign withdrawn" {
		t.Errorf("seller heard %d updates; the last: %s", len(got), got[len(got)-1].Arguments)
	}
	for _, body := range []string{`{"paused":false}`, `{"budget":{"total":1}}`} {
		_, err := r.try(body, false)
		if apiclient.StatusOf(err) != 409 || !containsCode(err, "buy_canceled") {
			t.Errorf("%s after the cancellation: %v, want 409 buy_canceled", body, err)
		}
	}
}

// A seller that answers a cancel with success and the buy still active (the official SDK's
// broadcast example) did not cancel it: the change ends contradicted with a finding, the buy
// keeps reading completed and active, and governance hears failed.
func TestChangeContradictedByTheSellersAnswerKeepsTheBuy(t *testing.T) {
	r := placed(t, nil)
	id := r.change(`{"reason":"campaign withdrawn","context":{"sim":"sync,unchanged"}}`, true)
	ex := only(t, r.finishNamed(id, 60*time.Second))
	path(t, ex, "FAILED", "SellerDidNotApplyChange", seq(changePrelude,
		[]string{"UpdateMediaBuy", "ChangeSellerAvailable", "AwaitChangeSeller", "ChangeSellerStatus", "ApplyChange", "ChangeOutcome", "ChangeNotApplied"})...)
	c := r.current()
	wantCurrent(t, c, 0, "active", "3000.00", "contradicted")
	if !strings.Contains(c.LastReason, "answered the cancel") || !strings.Contains(c.LastReason, "Check the buy at the seller") {
		t.Errorf("the finding on the buy: %q", c.LastReason)
	}
	if op := r.operation(); op.Status != "completed" {
		t.Errorf("the buy reads %s after a cancel the seller did not apply", op.Status)
	}
	change, err := r.client.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if change.Status != "failed" || !strings.Contains(change.Reason, "not recorded as applied") {
		t.Errorf("the change reads %s: %q", change.Status, change.Reason)
	}
	reports := r.governanceCalls("report_plan_outcome")
	if len(reports) != 2 || arg(t, reports[1].Arguments, "outcome") != "failed" {
		t.Errorf("governance heard %v, want the change reported failed", tools(reports))
	}
}

func TestSecondChangeWhileOneIsInFlightRefused(t *testing.T) {
	r := placed(t, map[string]any{"deadline_seconds": 4, "poll_initial_seconds": 1, "poll_max_seconds": 2})
	id := r.change(`{"budget":{"total":3200},"context":{"sim":"async_complete,hold"}}`, false)
	eventually(t, 30*time.Second, "update_media_buy at the seller", func() bool { return len(r.sellerCalls("update_media_buy")) > 0 })
	_, err := r.try(`{"paused":true}`, false)
	if apiclient.StatusOf(err) != 409 || !containsCode(err, "change_in_flight") {
		t.Errorf("a second change while one is in flight: %v, want 409 change_in_flight", err)
	}
	// The held seller never answers: the change's deadline (shortened from 12 h) ends it and
	// the buy is free again, as it was.
	ex := only(t, r.finishNamed(id, 60*time.Second))
	ends(t, ex, "FAILED", "ChangeDeadlinePassed", "ChangeSellerStatus", "ChangeDeadlineExceeded", "RecordChangeFailure", "ChangeFailureKind", "ChangeDeadlinePassed")
	wantCurrent(t, r.current(), 0, "active", "3000.00", "expired")
	if _, err := r.try(`{"paused":true}`, false); err != nil {
		t.Errorf("a change after the expired one: %v", err)
	}
}

func TestChangeToABuyNotPlacedRefused(t *testing.T) {
	r := begin(t, map[string]any{"deadline_seconds": 3, "poll_initial_seconds": 1, "poll_max_seconds": 1})
	r.submit(apiclient.Buy{Sim: "async_complete,hold", Budgets: []float64{3000}})
	defer r.finish(60 * time.Second)
	_, err := r.try(`{"paused":true}`, false)
	if apiclient.StatusOf(err) != 409 || !containsCode(err, "not_placed") {
		t.Errorf("a change before the buy is placed: %v, want 409 not_placed", err)
	}
	for body, code := range map[string]string{`{"paused":"yes"}`: "invalid_type", `{}`: "no_change", `{"paused":true,"budget":{"total":1}}`: "several_changes"} {
		_, err := r.try(body, false)
		if s := apiclient.StatusOf(err); s < 400 || s > 422 || !containsCode(err, code) {
			t.Errorf("%s: %v, want a 4xx %s", body, err, code)
		}
	}
}

func containsCode(err error, code string) bool {
	var se *apiclient.StatusError
	return errors.As(err, &se) && se.Code == code
}

// A change that needs a person asks through the buy's approval machinery before anything is
// sent: the same notify function, Slack message, signed link and approve page.
var changeAsked = []string{"ChangeNeedsApproval", "RequestChangeApproval"}

// reviewPage opens the change's review link from Slack as an approver's browser would (a GET,
// which decides nothing) and returns the page.
func (r *buyRun) reviewPage(link string) string {
	r.t.Helper()
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Get(link)
	if err != nil {
		r.t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		r.t.Fatalf("the review page answers HTTP %d: %s", resp.StatusCode, b)
	}
	return string(b)
}

func TestChangeBudgetIncreaseApprovedAndApplied(t *testing.T) {
	r := placed(t, nil)
	// +11,000.25 USD: over the policy's 10,000.00 USD increase threshold.
	id := r.change(`{"budget":{"total":14000.25},"reason":"strong first week","context":{"sim":"sync"}}`, false)
	page := r.reviewPage(r.approvalLink())
	for _, want := range []string{"Approve a change to a media buy?", "USD 3,000.00", "USD 14,000.25", "USD 11,000.25",
		"is over the approval threshold of 10000.00 USD", "What governance said", r.op} {
		if !strings.Contains(page, want) {
			t.Errorf("the review page lacks %q", want)
		}
	}
	if n := len(r.sellerCalls("update_media_buy")); n != 0 {
		t.Fatalf("the seller heard %d update_media_buy before the approval", n)
	}
	r.decide("approve")
	ex := only(t, r.finishNamed(id, 60*time.Second))
	path(t, ex, "SUCCEEDED", "", seq(changePrelude, changeAsked, []string{"RouteChangeApproval"}, changeApplied)...)
	if n := len(r.sellerCalls("update_media_buy")); n != 1 {
		t.Errorf("the seller heard %d update_media_buy, want 1", n)
	}
	wantCurrent(t, r.current(), 2, "active", "14000.25", "applied")
	for _, e := range r.events(id) {
		if e.Type == "approval_requested" && e.Amount != "14000.25 USD" {
			t.Errorf("the approval asks about %s, want the budget after the change, 14000.25 USD", e.Amount)
		}
	}
	types := r.timelineOf(id)
	ai, di, si := slices.Index(types, "approval_requested"), slices.Index(types, "decision"), slices.Index(types, "modification_seller_call")
	if ai < 0 || di < ai || si < di {
		t.Errorf("the change's timeline %v: want approval_requested, then decision, then the seller call", types)
	}
}

func TestChangeRejectedByTheApproverLeavesTheBuy(t *testing.T) {
	r := placed(t, nil)
	id := r.change(`{"budget":{"total":14000},"context":{"sim":"sync"}}`, false)
	r.decide("reject")
	ex := only(t, r.finishNamed(id, 60*time.Second))
	path(t, ex, "FAILED", "ChangeRejectedByApprover", seq(changePrelude, changeAsked,
		[]string{"RecordChangeFailure", "ChangeFailureKind", "ChangeRejectedByApprover"})...)
	if n := len(r.sellerCalls("update_media_buy")); n != 0 {
		t.Errorf("the seller heard %d update_media_buy after a rejection", n)
	}
	c := r.current()
	wantCurrent(t, c, 0, "active", "3000.00", "rejected")
	if !strings.Contains(c.LastReason, "rejected by "+approver) || !strings.Contains(c.LastReason, "stagepaths: reject") {
		t.Errorf("the buy's last reason %q does not say who rejected the change and why", c.LastReason)
	}
	if r.operation().Budget != "3000.00" {
		t.Error("the buy's budget changed after a rejection")
	}
	reports := r.governanceCalls("report_plan_outcome")
	if len(reports) != 2 || arg(t, reports[1].Arguments, "outcome") != "failed" {
		t.Errorf("governance heard %v, want the change reported failed", tools(reports))
	}
}

func TestChangeApprovalExpiresLeavesTheBuy(t *testing.T) {
	r := placed(t, map[string]any{"approval_timeout_seconds": 2})
	id := r.change(`{"budget":{"total":14000},"context":{"sim":"sync"}}`, false)
	ex := only(t, r.finishNamed(id, 60*time.Second))
	path(t, ex, "FAILED", "ChangeApprovalExpired", seq(changePrelude, changeAsked,
		[]string{"ExpireChangeApproval", "EscalateChangeOrGiveUp", "ChangeApprovalTimedOut", "RecordChangeFailure", "ChangeFailureKind", "ChangeApprovalExpired"})...)
	if n := len(r.sellerCalls("update_media_buy")); n != 0 {
		t.Errorf("the seller heard %d update_media_buy after the approval expired", n)
	}
	c := r.current()
	wantCurrent(t, c, 0, "active", "3000.00", "approval_expired")
	if !strings.Contains(c.LastReason, "approval expired") {
		t.Errorf("the buy's last reason %q does not say the approval expired", c.LastReason)
	}
}
