package approve_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/approvalcore"
	"github.com/buyflow/buyflow/internal/approvaltest"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/sfn"
	"github.com/buyflow/buyflow/internal/workflow"
)

func TestGetChangesNothing(t *testing.T) {
	e := approvaltest.NewEnv(t, "")
	tok := approvaltest.Token(1)
	id := e.Request(tok)
	u := e.Link(id, approvaltest.Alice)
	before := e.Snapshot(id)
	for _, ua := range []string{approvaltest.SlackbotUA, "Mozilla/5.0"} {
		resp := e.Get(u, ua)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET = %d", resp.StatusCode)
		}
		for _, want := range []string{"Approve", "Reject", "PO-42", "USD 12,500.00", `name="sig"`} {
			if !strings.Contains(resp.Body, want) {
				t.Errorf("confirm page lacks %q", want)
			}
		}
		if strings.Contains(resp.Body, tok[:40]) {
			t.Error("confirm page carries the task token")
		}
	}
	// The only write is the audit trail: one approval_viewed event per GET, with who, from where
	// and with which user agent (the unfurler's included).
	after := e.Snapshot(id)
	if views := e.EventsOf(record.EventApprovalViewed); len(views) != 2 {
		t.Errorf("%d approval_viewed events, want 2", len(views))
	} else if !strings.Contains(string(views[0].Detail), approvaltest.SlackbotUA) || views[0].Actor != "approver:"+approvaltest.Alice {
		t.Errorf("view event = %+v %s", views[0], views[0].Detail)
	}
	after.Events -= 2
	if after != before {
		t.Errorf("GET changed something:\nbefore %+v\nafter  %+v", before, after)
	}
}

func TestApproveWritesLedgerFirstThenCompletesTaskOnce(t *testing.T) {
	e := approvaltest.NewEnv(t, "")
	tok := approvaltest.Token(1)
	id := e.Request(tok)
	e.Clock.Advance(10 * time.Minute)
	e.Tasks.OnCall = func(c approvaltest.TaskCall) error {
		if a := e.Approval(id); a.Status != record.ApprovalApproved {
			t.Errorf("task completed while the ledger says %s", a.Status)
		}
		return nil
	}
	resp := e.Post(e.Link(id, approvaltest.Alice), "approve", "fine by me")
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Body, "Approved by UALICE at 2026-11-30 05:10 UTC") {
		t.Fatalf("POST = %d %s", resp.StatusCode, resp.Body)
	}
	calls := e.Tasks.Calls()
	if len(calls) != 1 || calls[0].Kind != "success" || calls[0].Token != tok {
		t.Fatalf("task calls = %+v", calls)
	}
	var out workflow.ApprovalOutput
	if err := json.Unmarshal(calls[0].Output, &out); err != nil {
		t.Fatal(err)
	}
	if out != (workflow.ApprovalOutput{Decision: "approved", ApprovalID: id, DecidedBy: approvaltest.Alice}) {
		t.Errorf("task output = %+v", out)
	}
	a := e.Approval(id)
	if a.Status != record.ApprovalApproved || a.Decider != approvaltest.Alice || a.Comment != "fine by me" {
		t.Errorf("ledger = %+v", a)
	}
	evs := e.EventsOf(record.EventDecision)
	if len(evs) != 1 {
		t.Fatalf("decision events = %+v", evs)
	}
	var d map[string]any
	_ = json.Unmarshal(evs[0].Detail, &d)
	if evs[0].Actor != "approver:UALICE" || evs[0].Amount != "12500.00" || d["source_ip"] != "203.0.113.9" ||
		d["user_agent"] != "Mozilla/5.0 test" || d["comment"] != "fine by me" || d["task"] != "delivered" {
		t.Errorf("decision event = %+v %v", evs[0], d)
	}
	updates := 0
	for _, m := range e.Slack.Messages() {
		if m.Kind == "chat.update" {
			updates++
			if !strings.Contains(m.Text, "Approved by") {
				t.Errorf("update text = %q", m.Text)
			}
		}
	}
	if updates != 2 {
		t.Errorf("%d slack updates, want 2", updates)
	}
}

func TestRejectSendsApprovalRejectedError(t *testing.T) {
	e := approvaltest.NewEnv(t, "")
	tok := approvaltest.Token(1)
	id := e.Request(tok)
	e.Tasks.OnCall = func(approvaltest.TaskCall) error {
		if a := e.Approval(id); a.Status != record.ApprovalRejected {
			t.Errorf("task failed while the ledger says %s", a.Status)
		}
		return nil
	}
	resp := e.Post(e.Link(id, approvaltest.Bob), "reject", "too expensive")
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Body, "Rejected by UBOB") {
		t.Fatalf("POST = %d %s", resp.StatusCode, resp.Body)
	}
	calls := e.Tasks.Calls()
	if len(calls) != 1 || calls[0].Kind != "failure" || calls[0].Error != "ApprovalRejectedError" {
		t.Fatalf("task calls = %+v", calls)
	}
	if c := calls[0].Cause; !strings.Contains(c, "rejected by UBOB") || !strings.Contains(c, "too expensive") || strings.Contains(c, tok[:40]) {
		t.Errorf("cause = %q", c)
	}
}

func TestDoubleClickCompletesTaskOnce(t *testing.T) {
	e := approvaltest.NewEnv(t, "")
	id := e.Request(approvaltest.Token(1))
	u := e.Link(id, approvaltest.Alice)
	if resp := e.Post(u, "approve", ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("first POST = %d", resp.StatusCode)
	}
	e.Clock.Advance(time.Minute)
	resp := e.Post(u, "approve", "")
	if resp.StatusCode != http.StatusConflict || !strings.Contains(resp.Body, "Already approved by UALICE at 2026-11-30 05:00 UTC") {
		t.Fatalf("second POST = %d %s", resp.StatusCode, resp.Body)
	}
	if n := len(e.Tasks.Calls()); n != 1 {
		t.Errorf("%d task calls, want 1", n)
	}
	if n := len(e.EventsOf(record.EventApprovalRefused)); n != 1 {
		t.Errorf("%d refused events, want 1 for the second click", n)
	}
}

func TestConcurrentApproversExactlyOneDecides(t *testing.T) {
	e := approvaltest.NewEnv(t, "")
	id := e.Request(approvaltest.Token(1))
	links := map[string]*url.URL{approvaltest.Alice: e.Link(id, approvaltest.Alice), approvaltest.Bob: e.Link(id, approvaltest.Bob)}
	decisions := map[string]string{approvaltest.Alice: "approve", approvaltest.Bob: "reject"}
	codes := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for who, u := range links {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp := e.Post(u, decisions[who], "")
			mu.Lock()
			codes[who] = resp.StatusCode
			mu.Unlock()
		}()
	}
	wg.Wait()
	if n := len(e.Tasks.Calls()); n != 1 {
		t.Fatalf("%d task calls, want exactly 1", n)
	}
	a := e.Approval(id)
	winner, loser := a.Decider, map[string]string{approvaltest.Alice: approvaltest.Bob, approvaltest.Bob: approvaltest.Alice}[a.Decider]
	if codes[winner] != http.StatusOK || codes[loser] != http.StatusConflict {
		t.Errorf("codes = %v, winner %s", codes, winner)
	}
	if n := len(e.EventsOf(record.EventDecision)); n != 1 {
		t.Errorf("%d decision events, want 1", n)
	}
}

func TestOtherApproverAfterDecisionSeesTheTruth(t *testing.T) {
	e := approvaltest.NewEnv(t, "")
	id := e.Request(approvaltest.Token(1))
	e.Post(e.Link(id, approvaltest.Alice), "approve", "")
	e.Clock.Advance(5 * time.Minute)
	resp := e.Get(e.Link(id, approvaltest.Bob), "Mozilla/5.0")
	if resp.StatusCode != http.StatusConflict || !strings.Contains(resp.Body, "Already approved by UALICE at 2026-11-30 05:00 UTC") {
		t.Fatalf("GET = %d %s", resp.StatusCode, resp.Body)
	}
	resp = e.Post(e.Link(id, approvaltest.Bob), "reject", "")
	if resp.StatusCode != http.StatusConflict || !strings.Contains(resp.Body, "Already approved by UALICE") {
		t.Fatalf("POST = %d %s", resp.StatusCode, resp.Body)
	}
	if n := len(e.Tasks.Calls()); n != 1 {
		t.Errorf("%d task calls, want 1", n)
	}
}

func TestBadLinksGet403AndChangeNothing(t *testing.T) {
	e := approvaltest.NewEnv(t, `{"threshold":"10000.00","currency":"USD","approvers":["UALICE","UBOB"],"link_ttl_seconds":60}`)
	id := e.Request(approvaltest.Token(1))
	good := e.Link(id, approvaltest.Alice)
	otherKeys, _ := approvalcore.ParseKeys([]byte(`{"current":"k2","keys":{"k2":"` + strings.Repeat("C", 42) + "A" + `"}}`))
	otherSigner, _ := approvalcore.NewSigner(otherKeys, e.Clock.Now)
	forged, _ := otherSigner.Sign(approvaltest.BaseURL, id, approvaltest.Alice, e.Clock.Now().Add(time.Minute))
	mutate := func(f func(q url.Values)) *url.URL {
		u := *good
		q := u.Query()
		f(q)
		u.RawQuery = q.Encode()
		return &u
	}
	cases := []struct {
		name    string
		link    func() *url.URL
		advance time.Duration
		want    string
	}{
		{"other approver", func() *url.URL { return mutate(func(q url.Values) { q.Set("approver", approvaltest.Bob) }) }, 0, "not valid"},
		{"later expiry", func() *url.URL {
			return mutate(func(q url.Values) { q.Set("exp", "9999999999") })
		}, 0, "not valid"},
		{"flipped signature", func() *url.URL {
			return mutate(func(q url.Values) {
				s := q.Get("sig")
				q.Set("sig", map[bool]string{true: "B", false: "A"}[s[0] == 'A']+s[1:])
			})
		}, 0, "not valid"},
		{"unknown key", func() *url.URL { return mutate(func(q url.Values) { q.Set("kid", "k9") }) }, 0, "not valid"},
		{"missing signature", func() *url.URL { return mutate(func(q url.Values) { q.Del("sig") }) }, 0, "not valid"},
		{"other key", func() *url.URL { u, _ := url.Parse(forged); return u }, 0, "not valid"},
		{"expired link", func() *url.URL { return good }, 2 * time.Minute, "Expired at"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e.Clock.Advance(tc.advance)
			u := tc.link()
			before := e.Snapshot(id)
			g := e.Get(u, "Mozilla/5.0")
			p := e.Post(u, "approve", "")
			for _, resp := range []struct {
				code int
				body string
			}{{g.StatusCode, g.Body}, {p.StatusCode, p.Body}} {
				if resp.code != http.StatusForbidden || !strings.Contains(resp.body, tc.want) {
					t.Errorf("answer = %d, want 403 with %q: %.300s", resp.code, tc.want, resp.body)
				}
			}
			if after := e.Snapshot(id); after != before {
				t.Errorf("a bad link changed something:\nbefore %+v\nafter  %+v", before, after)
			}
		})
	}
}

func TestRequesterCannotApproveOwnBuy(t *testing.T) {
	e := approvaltest.NewEnv(t, "")
	id := e.Request(approvaltest.Token(1))
	u := e.SignedLink(id, approvaltest.Requester, e.Clock.Now().Add(time.Hour))
	before := e.Snapshot(id)
	g := e.Get(u, "Mozilla/5.0")
	if g.StatusCode != http.StatusForbidden || !strings.Contains(g.Body, "cannot approve your own") {
		t.Errorf("GET = %d %.300s", g.StatusCode, g.Body)
	}
	beforePost := e.Snapshot(id)
	p := e.Post(u, "approve", "")
	if p.StatusCode != http.StatusForbidden || !strings.Contains(p.Body, "cannot approve your own") {
		t.Errorf("POST = %d %.300s", p.StatusCode, p.Body)
	}
	// The GET only leaves its audit event, which says what the page said.
	views := e.EventsOf(record.EventApprovalViewed)
	if len(views) != 1 || !strings.Contains(string(views[0].Detail), "self_approval") {
		t.Errorf("view events = %+v", views)
	}
	beforePost.Events--
	if before != beforePost {
		t.Errorf("GET changed something")
	}
	if a := e.Approval(id); a.Status != record.ApprovalPending || len(e.Tasks.Calls()) != 0 {
		t.Errorf("self-approval changed the approval: %s, %d task calls", a.Status, len(e.Tasks.Calls()))
	}
	evs := e.EventsOf(record.EventApprovalRefused)
	if len(evs) != 1 || !strings.Contains(string(evs[0].Detail), "self_approval") {
		t.Errorf("refused events = %+v", evs)
	}
}

func TestClickAfterExpiryIsTruthful(t *testing.T) {
	e := approvaltest.NewEnv(t, "")
	id := e.Request(approvaltest.Token(1))
	u := e.Link(id, approvaltest.Alice)
	e.Clock.Advance(approvaltest.TimeoutSeconds*time.Second + time.Second)

	// The SLA passed but the timeout has not run yet: the ledger refuses, nothing changes.
	resp := e.Post(u, "approve", "")
	if resp.StatusCode == http.StatusOK || !strings.Contains(resp.Body, "Expired") {
		t.Fatalf("POST before expire = %d %.300s", resp.StatusCode, resp.Body)
	}
	if a := e.Approval(id); a.Status != record.ApprovalPending {
		t.Errorf("ledger = %s", a.Status)
	}

	if exp := e.Expire(); exp.Escalated {
		t.Fatalf("expire = %+v, want give up", exp)
	}
	if a := e.Approval(id); a.Status != record.ApprovalExpired {
		t.Fatalf("ledger = %s after expire", a.Status)
	}
	fresh := e.SignedLink(id, approvaltest.Alice, e.Clock.Now().Add(time.Hour))
	resp = e.Post(fresh, "approve", "")
	if resp.StatusCode != http.StatusGone || !strings.Contains(resp.Body, "Expired at 2026-11-30 06:00 UTC") {
		t.Fatalf("POST after expire = %d %.300s", resp.StatusCode, resp.Body)
	}
	if n := len(e.Tasks.Calls()); n != 0 {
		t.Errorf("%d task calls after expiry", n)
	}
}

func TestTokenGoneIsReportedFromTheLedger(t *testing.T) {
	e := approvaltest.NewEnv(t, "")
	id := e.Request(approvaltest.Token(1))
	e.Tasks.OnCall = func(approvaltest.TaskCall) error { return errors.Join(sfn.ErrTaskGone, errors.New("TaskTimedOut")) }
	resp := e.Post(e.Link(id, approvaltest.Alice), "approve", "")
	if resp.StatusCode != http.StatusGone || !strings.Contains(resp.Body, "approved by UALICE") || !strings.Contains(resp.Body, "too late") {
		t.Fatalf("POST = %d %.400s", resp.StatusCode, resp.Body)
	}
	if a := e.Approval(id); a.Status != record.ApprovalApproved {
		t.Errorf("ledger = %s, want approved", a.Status)
	}
	if n := len(e.Tasks.Calls()); n != 1 {
		t.Errorf("%d task calls, want 1 (a gone token is not retried)", n)
	}
	evs := e.EventsOf(record.EventDecision)
	if len(evs) != 1 || !strings.Contains(string(evs[0].Detail), `"task":"gone"`) {
		t.Errorf("decision events = %+v", evs)
	}
}

// A token that answers gone because an earlier send of this very decision went through (the
// SDK retried a send whose response was lost): the workflow has moved on as the decision says,
// so the approver sees the decision, not "too late".
func TestTokenGoneAfterTheWorkflowTookTheDecision(t *testing.T) {
	e := approvaltest.NewEnv(t, "")
	id := e.Request(approvaltest.Token(1))
	e.Tasks.OnCall = func(approvaltest.TaskCall) error {
		// The first send was delivered: the workflow moved the buy on to the create.
		if _, err := e.Store.Transition(e.Ctx, approvaltest.Tenant, approvaltest.OpID, workflow.StatusCreating, record.AnyVersion, record.Patch{Actor: "system"}); err != nil {
			t.Error(err)
		}
		return errors.Join(sfn.ErrTaskGone, errors.New("TaskTimedOut"))
	}
	resp := e.Post(e.Link(id, approvaltest.Alice), "approve", "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Body, "Approved by UALICE") {
		t.Fatalf("POST = %d %.400s", resp.StatusCode, resp.Body)
	}
	evs := e.EventsOf(record.EventDecision)
	if len(evs) != 1 || !strings.Contains(string(evs[0].Detail), `"task":"delivered"`) {
		t.Errorf("decision events = %+v", evs)
	}
}

func TestApprovalAfterGovernanceLapsedAsksForARecheck(t *testing.T) {
	e := approvaltest.NewEnv(t, "")
	lapse := e.Clock.Now().Add(30 * time.Minute)
	if _, err := e.Store.Transition(e.Ctx, approvaltest.Tenant, approvaltest.OpID, workflow.StatusAwaitingApproval, record.AnyVersion,
		record.Patch{GovernanceExpiresAt: &lapse}); err != nil {
		t.Fatal(err)
	}
	id := e.Request(approvaltest.Token(1))
	e.Clock.Advance(45 * time.Minute)
	e.Post(e.Link(id, approvaltest.Alice), "approve", "")
	calls := e.Tasks.Calls()
	if len(calls) != 1 || !strings.Contains(string(calls[0].Output), `"recheck_governance":true`) {
		t.Fatalf("task calls = %+v", calls)
	}
}

func TestBadFormAsksAgainAndChangesNothing(t *testing.T) {
	e := approvaltest.NewEnv(t, "")
	id := e.Request(approvaltest.Token(1))
	u := e.Link(id, approvaltest.Alice)
	before := e.Snapshot(id)
	resp := e.Post(u, "maybe", "")
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(resp.Body, "Choose Approve or Reject") || !strings.Contains(resp.Body, `name="sig"`) {
		t.Fatalf("POST = %d %.400s", resp.StatusCode, resp.Body)
	}
	resp = e.Post(u, "approve", strings.Repeat("é", approvalcore.MaxCommentRunes+1))
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(resp.Body, "too long") {
		t.Fatalf("POST = %d %.400s", resp.StatusCode, resp.Body)
	}
	if after := e.Snapshot(id); after != before {
		t.Errorf("a bad form changed something:\nbefore %+v\nafter  %+v", before, after)
	}
}

func TestDeciderRetriesAHandOverThatFailed(t *testing.T) {
	e := approvaltest.NewEnv(t, "")
	tok := approvaltest.Token(1)
	id := e.Request(tok)
	u := e.Link(id, approvaltest.Alice)
	down := true
	e.Tasks.OnCall = func(approvaltest.TaskCall) error {
		if down {
			return errors.New("states: throttled")
		}
		return nil
	}
	resp := e.Post(u, "approve", "")
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(resp.Body, "recorded") {
		t.Fatalf("POST while Step Functions fails = %d %.400s", resp.StatusCode, resp.Body)
	}
	if a := e.Approval(id); a.Status != record.ApprovalApproved {
		t.Fatalf("ledger = %s", a.Status)
	}
	failed := len(e.Tasks.Calls())
	if failed != 3 {
		t.Errorf("%d attempts, want 3", failed)
	}

	// Another approver learns the truth and cannot retry it for them.
	e.Clock.Advance(time.Minute)
	if resp := e.Post(e.Link(id, approvaltest.Bob), "approve", ""); resp.StatusCode != http.StatusConflict {
		t.Errorf("other approver = %d", resp.StatusCode)
	}
	if n := len(e.Tasks.Calls()); n != failed {
		t.Errorf("another approver's click called Step Functions")
	}

	down = false
	e.Clock.Advance(time.Minute)
	resp = e.Post(u, "approve", "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Body, "Approved by UALICE at 2026-11-30 05:00 UTC") {
		t.Fatalf("retry = %d %.400s", resp.StatusCode, resp.Body)
	}
	calls := e.Tasks.Calls()
	if len(calls) != failed+1 || calls[len(calls)-1].Kind != "success" || calls[len(calls)-1].Token != tok {
		t.Fatalf("task calls = %d", len(calls))
	}
	// Delivered now: a further click is only the truth.
	e.Clock.Advance(time.Minute)
	if resp := e.Post(u, "approve", ""); resp.StatusCode != http.StatusConflict {
		t.Errorf("click after delivery = %d", resp.StatusCode)
	}
	if n := len(e.Tasks.Calls()); n != failed+1 {
		t.Errorf("%d task calls after a delivered decision, want %d", n, failed+1)
	}
}

// The approve process died after the decision was written and before it was handed over (no
// decision event yet): the decider's next click hands the recorded decision over, once.
func TestDeciderRetriesAHandOverLostInACrash(t *testing.T) {
	e := approvaltest.NewEnv(t, "")
	tok := approvaltest.Token(1)
	id := e.Request(tok)
	if _, err := e.Store.Decide(e.Ctx, id, record.Decision{Outcome: record.ApprovalApproved, By: approvaltest.Alice}); err != nil {
		t.Fatal(err)
	}
	if n := len(e.EventsOf(record.EventDecision)); n != 0 {
		t.Fatalf("%d decision events before the hand-over, want 0", n)
	}
	e.Clock.Advance(time.Minute)
	resp := e.Post(e.Link(id, approvaltest.Alice), "approve", "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Body, "Approved by UALICE") {
		t.Fatalf("click after the crash = %d %.400s", resp.StatusCode, resp.Body)
	}
	calls := e.Tasks.Calls()
	if len(calls) != 1 || calls[0].Kind != "success" || calls[0].Token != tok {
		t.Fatalf("task calls = %+v, want one success for the token", calls)
	}
	if n := len(e.EventsOf(record.EventDecision)); n != 1 {
		t.Errorf("%d decision events, want 1", n)
	}
	e.Clock.Advance(time.Minute)
	if resp := e.Post(e.Link(id, approvaltest.Alice), "approve", ""); resp.StatusCode != http.StatusConflict {
		t.Errorf("click after delivery = %d", resp.StatusCode)
	}
	if n := len(e.Tasks.Calls()); n != 1 {
		t.Errorf("%d task calls after a delivered decision, want 1", n)
	}
}
