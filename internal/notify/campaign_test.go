package notify_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/approvaltest"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/workflow"
)

const campaignID = approvaltest.CampaignID

// campaign stores a campaign of two legs: one a person must approve (awaiting_approval), one
// governance let through (creating), USD 12,500.00 each.
func campaign(e *approvaltest.Env) {
	e.T.Helper()
	e.CreateCampaign(workflow.StatusAwaitingApproval, workflow.StatusCreating)
}

func requestCampaign(e *approvaltest.Env, tok string, legs ...string) string {
	e.T.Helper()
	return e.RequestCampaign(tok, legs...)
}

func count(evs []record.Event, typ string) int {
	n := 0
	for _, ev := range evs {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

// One request for the campaign: one approval of the legs' total, every leg waiting for it (the
// one governance let through too), the request on the campaign's timeline and every leg's, one
// Slack request per approver listing both legs. A retry with the same token changes nothing.
func TestRequestForACampaign(t *testing.T) {
	e := approvaltest.NewEnv(t, "")
	campaign(e)
	tok := approvaltest.Token(7)
	id := requestCampaign(e, tok)
	a := e.Approval(id)
	if a.CampaignID != campaignID || a.OperationID != "" || a.Amount != "25000.00" || a.Currency != "USD" || a.Status != record.ApprovalPending {
		t.Fatalf("approval = %+v", a)
	}
	if c, err := e.Store.GetCampaign(e.Ctx, approvaltest.Tenant, campaignID); err != nil || c.ApprovalID != id {
		t.Fatalf("campaign names approval %q (%v), want %s", c.ApprovalID, err, id)
	}
	for _, leg := range []string{"leg-a", "leg-b"} {
		op, err := e.Store.GetOperation(e.Ctx, approvaltest.Tenant, leg)
		if err != nil || op.Status != workflow.StatusAwaitingApproval {
			t.Errorf("%s is %s (%v), want awaiting_approval", leg, op.Status, err)
		}
		if n := count(e.Timeline(leg), record.EventApprovalRequested); n != 1 {
			t.Errorf("%s's timeline has %d approval requests", leg, n)
		}
	}
	if n := count(e.Timeline(campaignID), record.EventApprovalRequested); n != 1 {
		t.Errorf("the campaign's timeline has %d approval requests", n)
	}
	msgs := e.Slack.Messages()
	if len(msgs) != 2 {
		t.Fatalf("%d Slack messages, want one per approver", len(msgs))
	}
	for _, m := range msgs {
		body := string(m.Body)
		for _, want := range []string{"Approval needed: campaign", "2 legs", "USD 25,000.00", "USD 12,500.00"} {
			if !strings.Contains(body, want) {
				t.Errorf("message to %s lacks %q", m.Channel, want)
			}
		}
		if strings.Contains(body, tok[:40]) {
			t.Errorf("message to %s carries the task token", m.Channel)
		}
	}

	requestCampaign(e, tok) // a retry of the same task
	if len(e.Slack.Messages()) != 2 || count(e.Timeline(campaignID), record.EventApprovalRequested) != 1 ||
		count(e.Timeline("leg-b"), record.EventApprovalRequested) != 1 {
		t.Errorf("the retry posted or recorded again")
	}
}

// The approver's page lists both legs; the one decision is handed to the campaign's task and
// recorded on the campaign's timeline and on each leg's.
func TestDecisionOnACampaign(t *testing.T) {
	e := approvaltest.NewEnv(t, "")
	campaign(e)
	tok := approvaltest.Token(8)
	id := requestCampaign(e, tok)
	link := e.Link(id, approvaltest.Alice)
	page := e.Get(link, approvaltest.BrowserUA)
	if page.StatusCode != 200 || !strings.Contains(page.Body, "Approve a campaign?") || strings.Count(page.Body, "PO-<wbr>42") != 2 {
		t.Fatalf("page HTTP %d:\n%s", page.StatusCode, page.Body)
	}
	if resp := e.Post(link, "approve", "fine"); resp.StatusCode != 200 {
		t.Fatalf("approve: HTTP %d", resp.StatusCode)
	}
	calls := e.Tasks.Calls()
	if len(calls) != 1 || calls[0].Kind != "success" || calls[0].Token != tok {
		t.Fatalf("task calls = %+v", calls)
	}
	for _, tl := range []string{campaignID, "leg-a", "leg-b"} {
		evs := e.Timeline(tl)
		decided := false
		for _, ev := range evs {
			decided = decided || (ev.Type == record.EventDecision && ev.Actor == "approver:"+approvaltest.Alice)
		}
		if !decided {
			t.Errorf("%s's timeline has no decision by %s", tl, approvaltest.Alice)
		}
	}
	if n := count(e.Timeline(campaignID), record.EventApprovalViewed); n != 1 {
		t.Errorf("the campaign's timeline has %d views", n)
	}
	if n := count(e.Timeline("leg-a"), record.EventApprovalViewed); n != 0 {
		t.Errorf("a leg's timeline has %d views: they belong to the campaign", n)
	}
}

// The campaign's approval expires on its own timeline; a leg's later input-required approval
// is a round of its own.
func TestExpireACampaignApproval(t *testing.T) {
	e := approvaltest.NewEnv(t, "")
	campaign(e)
	id := requestCampaign(e, approvaltest.Token(9))
	e.Clock.Advance(approvaltest.TimeoutSeconds*time.Second + time.Second)
	payload, _ := json.Marshal(map[string]any{"action": "expire", "campaign_id": campaignID, "tenant": approvaltest.Tenant,
		"config": map[string]any{"approval_timeout_seconds": approvaltest.TimeoutSeconds}})
	out, err := e.Notifier.Handle(e.Ctx, payload)
	if err != nil {
		t.Fatal(err)
	}
	if exp := out.(workflow.ApprovalExpiry); exp.Escalated || !strings.Contains(exp.Reason, "expired") {
		t.Errorf("expiry = %+v", exp)
	}
	if a := e.Approval(id); a.Status != record.ApprovalExpired {
		t.Errorf("approval is %s", a.Status)
	}
	if n := count(e.Timeline(campaignID), record.EventApprovalExpired); n != 1 {
		t.Errorf("the campaign's timeline has %d expiries", n)
	}
}

// threeLegCampaign stores a best_effort campaign of three legs of USD 12,500.00: one a person
// must approve, one governance let through, and one whose check failed after its retries
// (still checking_governance, not ended): the release gate leaves the last one out.
func threeLegCampaign(e *approvaltest.Env) {
	e.T.Helper()
	e.CreateCampaign(workflow.StatusAwaitingApproval, workflow.StatusCreating, workflow.StatusCheckingGovernance)
}

// The approval is of the legs the release gate covers and of their total, the one the gate
// compared: a leg whose check failed is not in the amount (USD 25,000.00, not 37,500.00), the
// sentence, the page, Slack or any timeline, and it is not moved. The old request summed every
// leg that had not ended and quoted USD 37,500.00 for a gate that compared 25,000.00.
func TestRequestForACampaignShowsTheTotalTheGateUsed(t *testing.T) {
	const why = "the campaign's total 25000.00 USD is at or over the approval threshold 20000.00 USD"
	e := approvaltest.NewEnv(t, `{"threshold":"20000.00","currency":"USD","approvers":["UALICE"],"on_timeout":"reject"}`)
	threeLegCampaign(e)
	id := requestCampaign(e, approvaltest.Token(7), "leg-a", "leg-b")
	a := e.Approval(id)
	if a.Amount != "25000.00" || a.Currency != "USD" || a.ReasonText != why || strings.Join(a.Legs, ",") != "leg-a,leg-b" {
		t.Fatalf("approval of %s %s covering %v because %q; want USD 25000.00 of leg-a and leg-b because %q", a.Amount, a.Currency, a.Legs, a.ReasonText, why)
	}
	for _, ev := range e.Timeline(campaignID) {
		if ev.Type == record.EventApprovalRequested && (ev.Amount != "25000.00" || ev.Reason != why) {
			t.Errorf("the campaign's timeline reads the request as %s %s, %q", ev.Amount, ev.Currency, ev.Reason)
		}
	}
	if op, _ := e.Store.GetOperation(e.Ctx, approvaltest.Tenant, "leg-c"); op.Status != workflow.StatusCheckingGovernance {
		t.Errorf("the leg left out was moved to %s", op.Status)
	}
	if n := count(e.Timeline("leg-c"), record.EventApprovalRequested); n != 0 {
		t.Errorf("the leg left out has %d approval requests on its timeline", n)
	}
	msgs := e.Slack.Messages()
	if len(msgs) != 1 {
		t.Fatalf("%d Slack messages", len(msgs))
	}
	body := string(msgs[0].Body)
	for _, want := range []string{"USD 25,000.00", "2 of 3 legs", why} {
		if !strings.Contains(body, want) {
			t.Errorf("the Slack request lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "37,500") {
		t.Errorf("the Slack request quotes every leg's total:\n%s", body)
	}
	page := e.Get(e.Link(id, approvaltest.Alice), approvaltest.BrowserUA)
	if page.StatusCode != 200 || !strings.Contains(page.Body, "USD 25,000.00") || strings.Contains(page.Body, "37,500") ||
		strings.Count(page.Body, "PO-<wbr>42") != 2 {
		t.Fatalf("page HTTP %d:\n%s", page.StatusCode, page.Body)
	}
	if resp := e.Post(e.Link(id, approvaltest.Alice), "approve", "fine"); resp.StatusCode != 200 {
		t.Fatalf("approve: HTTP %d", resp.StatusCode)
	}
	if n := count(e.Timeline("leg-c"), record.EventDecision); n != 0 {
		t.Errorf("the decision is on the timeline of the leg it does not cover")
	}
	if n := count(e.Timeline("leg-b"), record.EventDecision); n != 1 {
		t.Errorf("leg-b's timeline has %d decisions", n)
	}
}

// A request naming a leg that is not the campaign's is refused, with nothing stored or sent.
func TestRequestForACampaignRefusesAnotherLeg(t *testing.T) {
	e := approvaltest.NewEnv(t, "")
	threeLegCampaign(e)
	payload, _ := json.Marshal(map[string]any{
		"action": "request", "campaign_id": campaignID, "tenant": approvaltest.Tenant, "legs": []string{"leg-a", "leg-x"},
		"config": map[string]any{"approval_timeout_seconds": approvaltest.TimeoutSeconds}, "task_token": approvaltest.Token(3),
	})
	if _, err := e.Notifier.Handle(e.Ctx, payload); err == nil || !strings.Contains(err.Error(), "leg-x") {
		t.Fatalf("request naming leg-x: %v", err)
	}
	if len(e.Slack.Messages()) != 0 || count(e.Timeline(campaignID), record.EventApprovalRequested) != 0 {
		t.Error("a refused request posted or recorded")
	}
}

// Both subjects at once, or none, are refused.
func TestRequestNeedsOneSubject(t *testing.T) {
	e := approvaltest.NewEnv(t, "")
	campaign(e)
	for _, p := range []map[string]any{
		{"action": "request", "campaign_id": campaignID, "operation_id": approvaltest.OpID, "tenant": approvaltest.Tenant, "task_token": approvaltest.Token(1), "config": map[string]any{"approval_timeout_seconds": approvaltest.TimeoutSeconds}},
		{"action": "request", "tenant": approvaltest.Tenant, "task_token": approvaltest.Token(1), "config": map[string]any{"approval_timeout_seconds": approvaltest.TimeoutSeconds}},
		{"action": "request", "campaign_id": "cp-other", "tenant": approvaltest.Tenant, "task_token": approvaltest.Token(1), "config": map[string]any{"approval_timeout_seconds": approvaltest.TimeoutSeconds}},
	} {
		payload, _ := json.Marshal(p)
		if _, err := e.Notifier.Handle(e.Ctx, payload); err == nil {
			t.Errorf("request %v: no error", p)
		}
	}
	if len(e.Slack.Messages()) != 0 {
		t.Error("a refused request posted to Slack")
	}
}

// Legs each under the threshold whose total is at or over it: the approval says why in the
// policy's sentence, Slack shows it, and the request on the campaign's timeline and on every
// leg's reads it. Under a threshold over the total, no such sentence is made up.
func TestRequestForACampaignSaysItsTotalIsOverTheThreshold(t *testing.T) {
	const why = "the campaign's total 25000.00 USD is at or over the approval threshold 20000.00 USD"
	e := approvaltest.NewEnv(t, `{"threshold":"20000.00","currency":"USD","approvers":["UALICE"],"on_timeout":"reject"}`)
	campaign(e)
	id := requestCampaign(e, approvaltest.Token(7))
	if a := e.Approval(id); a.ReasonText != why || a.Reason != "campaign_legs" {
		t.Fatalf("approval's reason %q, text %q; want %q", a.Reason, a.ReasonText, why)
	}
	msgs := e.Slack.Messages()
	if len(msgs) != 1 || !strings.Contains(string(msgs[0].Body), why) {
		t.Errorf("Slack messages %v lack %q", msgs, why)
	}
	for _, tl := range []string{campaignID, "leg-a", "leg-b"} {
		found := false
		for _, ev := range e.Timeline(tl) {
			found = found || (ev.Type == record.EventApprovalRequested && ev.Reason == why)
		}
		if !found {
			t.Errorf("%s's timeline has no approval request saying %q", tl, why)
		}
	}

	under := approvaltest.NewEnv(t, `{"threshold":"30000.00","currency":"USD","approvers":["UALICE"],"on_timeout":"reject"}`)
	campaign(under)
	id = requestCampaign(under, approvaltest.Token(8))
	if a := under.Approval(id); a.ReasonText != "" {
		t.Errorf("under a threshold over the total, the approval says %q", a.ReasonText)
	}
	for _, ev := range under.Timeline(campaignID) {
		if ev.Type == record.EventApprovalRequested && ev.Reason != "campaign_legs" {
			t.Errorf("the request reads %q", ev.Reason)
		}
	}
}
