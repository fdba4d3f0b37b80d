package inform

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/slack"
	"github.com/buyflow/buyflow/internal/statusevent"
	"github.com/buyflow/buyflow/internal/workflow"
)

type fixture struct {
	store *ledger.Store
	sink  *slack.Sink
	n     *Service
}

func setup(t *testing.T) fixture {
	t.Helper()
	client, table := dynamotest.Start(t)
	store := ledger.New(client, table)
	sink := slack.NewSink(nil)
	srv := httptest.NewServer(sink)
	t.Cleanup(srv.Close)
	bot, err := slack.NewBotClient("xoxb-test", slack.WithBaseURL(srv.URL+"/api/"))
	if err != nil {
		t.Fatal(err)
	}
	return fixture{store: store, sink: sink, n: New(store, bot)}
}

// buy stores a buy that asked to be told in Slack user U024BE7LH.
func (f fixture) buy(t *testing.T, id string) *record.Operation {
	t.Helper()
	op, err := f.store.CreateOperation(context.Background(), record.Operation{
		ID: id, Tenant: "acme", SellerID: "seller-a", PONumber: "PO-" + id, BudgetTotal: "15000.00", Currency: "USD", NotifySlack: "U024BE7LH",
	})
	if err != nil {
		t.Fatal(err)
	}
	return op
}

// approval stores an approval of the buy, as the notify stage does, and its timeline event.
func (f fixture) approval(t *testing.T, opID, id string) {
	t.Helper()
	ctx := context.Background()
	if _, err := f.store.CreateApproval(ctx, record.Approval{
		ID: id, Tenant: "acme", OperationID: opID, TaskToken: "token", Approvers: []string{"U0APPROVER", "U0OTHER"},
		ExpiresAt: time.Now().Add(time.Hour),
	}); err != nil {
		t.Fatal(err)
	}
	if err := f.store.AppendEvent(ctx, "acme", opID, record.Event{Type: record.EventApprovalRequested, Detail: json.RawMessage(`{"approval_id":"` + id + `"}`)}); err != nil {
		t.Fatal(err)
	}
}

// event is the status event the bus delivers for opID's transition from → to at seq.
func event(t *testing.T, opID string, seq int64, from, to workflow.Status, mutate func(*statusevent.Detail)) json.RawMessage {
	t.Helper()
	d := statusevent.Detail{
		SchemaVersion: statusevent.SchemaVersion, EventID: statusevent.EventID(statusevent.KindMediaBuy, opID, seq), Kind: statusevent.KindMediaBuy,
		OperationID: opID, Tenant: "acme", Sequence: seq, From: string(from), To: string(to), SellerID: "seller-a",
		Amount: &statusevent.Amount{Value: "15000.00", Currency: "USD"}, OccurredAt: time.Now(),
		Links: statusevent.Links{Self: "https://api.example.com/v1/media-buys/" + opID}, Notify: &statusevent.Notify{Slack: "U024BE7LH"},
	}
	if mutate != nil {
		mutate(&d)
	}
	b, err := json.Marshal(statusevent.Event{ID: "eb-1", Source: statusevent.Source, DetailType: statusevent.DetailTypeMediaBuy, Time: time.Now(), Detail: d})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (f fixture) messages(t *testing.T) []slack.Record {
	t.Helper()
	return f.sink.Messages()
}

func TestRequesterHearsEachStepOfTheirBuy(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	f.buy(t, "op-1")
	f.approval(t, "op-1", "ap-1")
	decide := func() {
		if _, err := f.store.Decide(ctx, "ap-1", record.Decision{Outcome: record.ApprovalApproved, By: "U0APPROVER", Comment: "fine by me"}); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		raw  json.RawMessage
		want []string
	}{
		{event(t, "op-1", 2, workflow.StatusRequested, workflow.StatusCheckingGovernance, nil), nil},
		{event(t, "op-1", 3, workflow.StatusCheckingGovernance, workflow.StatusAwaitingApproval, nil), []string{"Waiting for approval", "<@U0APPROVER>", "<@U0OTHER>", "<!date^"}},
		{event(t, "op-1", 4, workflow.StatusAwaitingApproval, workflow.StatusCreating, nil), []string{"Approved", "by <@U0APPROVER>", "fine by me"}},
		// The seller took it as a long-running task: the requester hears who has it now.
		{event(t, "op-1", 5, workflow.StatusCreating, workflow.StatusSubmitted, nil), []string{"Waiting for the seller", "seller-a"}},
		{event(t, "op-1", 6, workflow.StatusSubmitted, workflow.StatusCompleted, func(d *statusevent.Detail) { d.MediaBuyID = "mb-77" }), []string{"Placed", "mb-77", "seller-a"}},
	}
	told := 0
	for i, s := range steps {
		if i == 2 {
			decide() // the approver decides after the request was told
		}
		if err := f.n.Handle(ctx, s.raw); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		msgs := f.messages(t)
		if s.want == nil {
			if len(msgs) != told {
				t.Fatalf("step %d posted a message nobody asked for: %s", i, msgs[len(msgs)-1].Body)
			}
			continue
		}
		told++
		if len(msgs) != told {
			t.Fatalf("step %d: %d messages, want %d", i, len(msgs), told)
		}
		m := msgs[told-1]
		if m.Channel != "U024BE7LH" || m.Kind != "chat.postMessage" {
			t.Errorf("step %d went to %s by %s", i, m.Channel, m.Kind)
		}
		for _, w := range append(s.want, "PO-op-1", "USD 15,000.00") {
			if !strings.Contains(string(m.Body), w) {
				t.Errorf("step %d: the message lacks %q: %s", i, w, m.Body)
			}
		}
	}
	// The bus delivers at least once: the same event again posts nothing.
	if err := f.n.Handle(ctx, steps[4].raw); err != nil || len(f.messages(t)) != told {
		t.Errorf("a redelivered event posted again (%v): %d messages", err, len(f.messages(t)))
	}
}

func TestRequesterHearsRejectionsAndFailures(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	f.buy(t, "op-r")
	f.approval(t, "op-r", "ap-r")
	if _, err := f.store.Decide(ctx, "ap-r", record.Decision{Outcome: record.ApprovalRejected, By: "U0OTHER", Comment: "too much"}); err != nil {
		t.Fatal(err)
	}
	f.buy(t, "op-d")
	f.buy(t, "op-f")
	for _, tc := range []struct {
		raw  json.RawMessage
		want []string
	}{
		{event(t, "op-r", 4, workflow.StatusAwaitingApproval, workflow.StatusRejected, func(d *statusevent.Detail) { d.Reason = "RejectedByApprover" }), []string{"Rejected", "by <@U0OTHER>", "too much"}},
		{event(t, "op-d", 3, workflow.StatusCheckingGovernance, workflow.StatusRejected, func(d *statusevent.Detail) { d.Reason = "Governance denied: <!channel> over the plan" }), []string{"Rejected", "Governance denied: &lt;!channel&gt; over the plan"}},
		{event(t, "op-f", 5, workflow.StatusWorking, workflow.StatusFailed, func(d *statusevent.Detail) { d.Reason = "The seller ended the task: inventory gone" }), []string{"Failed", "inventory gone"}},
	} {
		before := len(f.messages(t))
		if err := f.n.Handle(ctx, tc.raw); err != nil {
			t.Fatal(err)
		}
		msgs := f.messages(t)
		if len(msgs) != before+1 {
			t.Fatalf("%d messages, want %d", len(msgs), before+1)
		}
		for _, w := range tc.want {
			if !strings.Contains(string(msgs[before].Body), w) {
				t.Errorf("the message lacks %q: %s", w, msgs[before].Body)
			}
		}
		if strings.Contains(string(msgs[before].Body), "<!channel>") {
			t.Errorf("outside text reached Slack unescaped: %s", msgs[before].Body)
		}
	}
}

// The bus keeps no order: a request for approval that reaches the notifier after the decision
// is not told ("waiting for X" after "approved by X" would mislead); the decision is.
func TestStaleApprovalRequestIsNotTold(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	f.buy(t, "op-s")
	f.approval(t, "op-s", "ap-s")
	if _, err := f.store.Decide(ctx, "ap-s", record.Decision{Outcome: record.ApprovalApproved, By: "U0APPROVER"}); err != nil {
		t.Fatal(err)
	}
	if err := f.n.Handle(ctx, event(t, "op-s", 4, workflow.StatusAwaitingApproval, workflow.StatusCreating, nil)); err != nil {
		t.Fatal(err)
	}
	if err := f.n.Handle(ctx, event(t, "op-s", 3, workflow.StatusCheckingGovernance, workflow.StatusAwaitingApproval, nil)); err != nil {
		t.Fatal(err)
	}
	msgs := f.messages(t)
	if len(msgs) != 1 || !strings.Contains(msgs[0].Text, "Approved") {
		t.Fatalf("messages = %+v, want the approval only", msgs)
	}
}

// Quiet where nothing was asked for, and for input that is not a status event.
func TestQuietWhereNothingWasAsked(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	f.buy(t, "op-q")
	for _, raw := range []json.RawMessage{
		event(t, "op-q", 6, workflow.StatusSubmitted, workflow.StatusCompleted, func(d *statusevent.Detail) { d.Notify, d.MediaBuyID = nil, "mb-1" }),
		json.RawMessage(`{"source":"aws.s3","detail-type":"Object Created","detail":{}}`),
		json.RawMessage(`not json`),
	} {
		if err := f.n.Handle(ctx, raw); err != nil {
			t.Errorf("Handle(%s) = %v", raw, err)
		}
	}
	if n := len(f.messages(t)); n != 0 {
		t.Errorf("%d messages posted, want none", n)
	}
}

// A placed buy paused and resumed by its changes is not placed again: the changes' own
// messages tell it.
func TestPauseAndResumeOfTheBuyAreNotToldAsPlaced(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	f.buy(t, "op-p")
	for _, raw := range []json.RawMessage{
		event(t, "op-p", 8, workflow.StatusCompleted, workflow.StatusPaused, func(d *statusevent.Detail) { d.MediaBuyID = "mb-1" }),
		event(t, "op-p", 9, workflow.StatusPaused, workflow.StatusCompleted, func(d *statusevent.Detail) { d.MediaBuyID = "mb-1" }),
	} {
		if err := f.n.Handle(ctx, raw); err != nil {
			t.Errorf("Handle(%s) = %v", raw, err)
		}
	}
	if msgs := f.messages(t); len(msgs) != 0 {
		t.Errorf("messages = %+v, want none", msgs)
	}
}

// A post that fails is an error (Lambda retries) and leaves no receipt, so the retry posts.
func TestFailedPostIsRetried(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	f.buy(t, "op-x")
	raw := event(t, "op-x", 6, workflow.StatusSubmitted, workflow.StatusFailed, func(d *statusevent.Detail) { d.Reason = "seller down" })
	down := New(f.store, failingSlack{})
	if err := down.Handle(ctx, raw); err == nil {
		t.Fatal("a failed post was not reported")
	}
	if err := f.n.Handle(ctx, raw); err != nil || len(f.messages(t)) != 1 {
		t.Fatalf("the retry: %v, %d messages", err, len(f.messages(t)))
	}
}

type failingSlack struct{}

func (failingSlack) Post(context.Context, slack.Message) (slack.Ref, error) {
	return slack.Ref{}, errors.New("slack is down")
}

func (failingSlack) Update(context.Context, slack.Ref, slack.Message) (slack.Ref, error) {
	return slack.Ref{}, errors.New("slack is down")
}

// envelope is the status event the bus delivers with detail d.
func envelope(t *testing.T, d statusevent.Detail) json.RawMessage {
	t.Helper()
	d.SchemaVersion, d.Tenant, d.OccurredAt = statusevent.SchemaVersion, "acme", time.Now()
	d.EventID = statusevent.EventID(d.Kind, d.OperationID, d.Sequence)
	d.Notify = &statusevent.Notify{Slack: "U024BE7LH"}
	b, err := json.Marshal(statusevent.Event{ID: "eb-1", Source: statusevent.Source, DetailType: d.Kind.DetailType(), Time: time.Now(), Detail: d})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// handled hands raw to the notifier and returns the one message it posted.
func (f fixture) handled(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	before := len(f.messages(t))
	if err := f.n.Handle(context.Background(), raw); err != nil {
		t.Fatal(err)
	}
	msgs := f.messages(t)
	if len(msgs) != before+1 {
		t.Fatalf("%d messages, want %d", len(msgs), before+1)
	}
	if msgs[before].Channel != "U024BE7LH" {
		t.Errorf("the message went to %s", msgs[before].Channel)
	}
	return string(msgs[before].Body)
}

func wantAll(t *testing.T, body string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("the message lacks %q: %s", w, body)
		}
	}
}

// A change to a placed buy is told where the buy's submit asked: waiting for approval with the
// budget before and the one asked for, applied with the budget before and after (exact, as
// the seller applied it), and not applied with the buy left as it was.
func TestRequesterHearsAboutTheirChange(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	f.buy(t, "op-1")
	change := func(id string) {
		if _, err := f.store.CreateOperation(ctx, record.Operation{ID: id, Tenant: "acme", SellerID: "seller-a", Kind: record.KindModification,
			ParentID: "op-1", BudgetTotal: "3000.00", Currency: "USD", NotifySlack: "U024BE7LH"}); err != nil {
			t.Fatal(err)
		}
	}
	change("chg-1")
	if _, err := f.store.CreateApproval(ctx, record.Approval{ID: "ap-c", Tenant: "acme", OperationID: "chg-1", TaskToken: "token",
		Approvers: []string{"U0APPROVER"}, Amount: "14000.25", Currency: "USD", ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := f.store.AppendEvent(ctx, "acme", "chg-1", record.Event{Type: record.EventApprovalRequested, Detail: json.RawMessage(`{"approval_id":"ap-c"}`)}); err != nil {
		t.Fatal(err)
	}
	ev := func(id string, seq int64, from, to workflow.Status, reason string) json.RawMessage {
		return envelope(t, statusevent.Detail{Kind: statusevent.KindChange, OperationID: id, ParentID: "op-1", Sequence: seq,
			From: string(from), To: string(to), SellerID: "seller-a", Reason: reason, Amount: &statusevent.Amount{Value: "3000.00", Currency: "USD"},
			Links: statusevent.Links{Self: "https://api.example.com/v1/media-buys/op-1"}})
	}
	wantAll(t, f.handled(t, ev("chg-1", 3, workflow.StatusCheckingGovernance, workflow.StatusAwaitingApproval, "")),
		"Waiting for approval: your change", "USD 3,000.00 → USD 14,000.25", "<@U0APPROVER>", "PO-op-1", "Reference: chg-1")
	if err := f.store.AppendEvent(ctx, "acme", "chg-1", record.Event{Type: record.EventModificationApplied, Amount: "14000.25", Currency: "USD"}); err != nil {
		t.Fatal(err)
	}
	wantAll(t, f.handled(t, ev("chg-1", 6, workflow.StatusWorking, workflow.StatusCompleted, "")),
		"Applied: your change", "the budget is now USD 3,000.00 → USD 14,000.25")
	change("chg-2")
	wantAll(t, f.handled(t, ev("chg-2", 4, workflow.StatusWorking, workflow.StatusFailed, "the seller refused the update")),
		"Not applied", "the seller refused the update", "stays as it was, at USD 3,000.00")
	// Steps between are not news.
	if err := f.n.Handle(ctx, ev("chg-2", 2, workflow.StatusRequested, workflow.StatusCheckingGovernance, "")); err != nil || len(f.messages(t)) != 3 {
		t.Errorf("a step between was told (%v)", err)
	}
}

// A campaign is told when submitted (its legs and budget), while it waits for its one
// approval (the approval's total of the legs it covers, who decides until when) and when it
// ends (how many legs were placed, what they committed).
func TestRequesterHearsAboutTheirCampaign(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	var legs []record.CampaignLeg
	placed, denied := []workflow.Status{workflow.StatusCreating, workflow.StatusCompleted}, []workflow.Status{workflow.StatusRejected}
	for i, path := range [][]workflow.Status{placed, denied, placed} {
		id := "leg-" + string(rune('a'+i))
		f.buy(t, id)
		for v, st := range path {
			if _, err := f.store.Transition(ctx, "acme", id, st, int64(v+1), record.Patch{}); err != nil {
				t.Fatal(err)
			}
		}
		legs = append(legs, record.CampaignLeg{OperationID: id, SellerID: "seller-a", PONumber: "PO-" + id, Amount: "5000.00"})
	}
	if _, err := f.store.CreateCampaign(ctx, record.Campaign{ID: "cp-1", Tenant: "acme", Name: "Spring", GovernanceAgentID: "gov", PlanID: "plan-1",
		Policy: "best_effort", BudgetTotal: "20000.00", Currency: "USD", NotifySlack: "U024BE7LH", Legs: legs}); err != nil {
		t.Fatal(err)
	}
	ev := func(seq int64, from, to string) json.RawMessage {
		return envelope(t, statusevent.Detail{Kind: statusevent.KindCampaign, OperationID: "cp-1", Sequence: seq, From: from, To: to,
			Amount: &statusevent.Amount{Value: "20000.00", Currency: "USD"}, Links: statusevent.Links{Self: "https://api.example.com/v1/campaigns/cp-1"}})
	}
	wantAll(t, f.handled(t, ev(1, "", "running")), "Submitted: your campaign", "3 legs (USD 20,000.00)", "Spring")

	if _, err := f.store.CreateApproval(ctx, record.Approval{ID: "ap-cp", Tenant: "acme", CampaignID: "cp-1", TaskToken: "token", Legs: []string{"leg-a", "leg-c"},
		Approvers: []string{"U0APPROVER"}, Amount: "10000.00", Currency: "USD", ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := f.store.SetCampaignApproval(ctx, "acme", "cp-1", "ap-cp"); err != nil {
		t.Fatal(err)
	}
	wantAll(t, f.handled(t, ev(2, "running", "awaiting_approval")),
		"Waiting for approval: your campaign", "approve 2 legs (USD 10,000.00) in one decision", "<@U0APPROVER>")

	if err := f.store.SettleCampaign(ctx, "acme", "cp-1", "partially_completed", "10000.00"); err != nil {
		t.Fatal(err)
	}
	wantAll(t, f.handled(t, ev(3, "running", "partially_completed")), "Partially completed", "2 of 3 legs placed", "committing USD 10,000.00")

	// A campaign that failed in its own steps: the requester reads its reason.
	why := "The campaign stopped before any leg was placed: a step failed after its retries (the ledger did not answer)."
	if _, err := f.store.CreateCampaign(ctx, record.Campaign{ID: "cp-2", Tenant: "acme", Name: "Summer", GovernanceAgentID: "gov", PlanID: "plan-1",
		Policy: "best_effort", BudgetTotal: "20000.00", Currency: "USD", NotifySlack: "U024BE7LH", Legs: legs}); err != nil {
		t.Fatal(err)
	}
	if err := f.store.FailCampaign(ctx, "acme", "cp-2", "0.00", why); err != nil {
		t.Fatal(err)
	}
	failed := envelope(t, statusevent.Detail{Kind: statusevent.KindCampaign, OperationID: "cp-2", Sequence: 2, From: "running", To: "failed",
		Amount: &statusevent.Amount{Value: "20000.00", Currency: "USD"}, Links: statusevent.Links{Self: "https://api.example.com/v1/campaigns/cp-2"}})
	wantAll(t, f.handled(t, failed), "Failed: your campaign", why)
}

// Governance moves a buy to awaiting_approval and the notify stage records the approval after
// it: a "waiting for approval" event that overtook the notify stage waits for the approval and
// tells it; one whose approval never comes is an error (Lambda invokes the notifier again),
// unless the buy has moved on, which its next event tells.
func TestApprovalRequestThatOvertookTheNotifyStage(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	awaiting := func(id string) json.RawMessage {
		return event(t, id, 3, workflow.StatusCheckingGovernance, workflow.StatusAwaitingApproval, nil)
	}
	looks, slept := 0, time.Duration(0)
	f.n.requestWait = time.Second
	f.n.sleep = func(_ context.Context, d time.Duration) error {
		looks, slept = looks+1, slept+d
		if looks == 3 {
			f.approval(t, "op-late", "ap-late") // the notify stage catches up
		}
		return nil
	}
	f.buy(t, "op-late")
	if err := f.n.Handle(ctx, awaiting("op-late")); err != nil {
		t.Fatal(err)
	}
	if msgs := f.messages(t); len(msgs) != 1 || !strings.Contains(string(msgs[0].Body), "<@U0APPROVER>") || looks != 3 {
		t.Fatalf("after %d looks: %d messages %v; want the request told with its approvers", looks, len(msgs), msgs)
	}

	// Never recorded, the buy still waiting: an error, nothing posted, no receipt kept.
	f.buy(t, "op-never")
	if _, err := f.store.Transition(ctx, "acme", "op-never", workflow.StatusAwaitingApproval, record.AnyVersion, record.Patch{}); err != nil {
		t.Fatal(err)
	}
	slept = 0
	err := f.n.Handle(ctx, awaiting("op-never"))
	if !errors.Is(err, errNotRequested) || len(f.messages(t)) != 1 || slept != f.n.requestWait {
		t.Fatalf("an approval never recorded: %v, %d messages after waiting %v; want errNotRequested after %v and nothing posted",
			err, len(f.messages(t)), slept, f.n.requestWait)
	}
	f.approval(t, "op-never", "ap-never")
	if err := f.n.Handle(ctx, awaiting("op-never")); err != nil || len(f.messages(t)) != 2 {
		t.Fatalf("the retry after the approval was recorded: %v, %d messages", err, len(f.messages(t)))
	}

	// Never recorded, the buy moved on: nothing to tell, no error.
	f.buy(t, "op-gone")
	if err := f.n.Handle(ctx, awaiting("op-gone")); err != nil || len(f.messages(t)) != 2 {
		t.Fatalf("a buy that moved on: %v, %d messages", err, len(f.messages(t)))
	}
}
