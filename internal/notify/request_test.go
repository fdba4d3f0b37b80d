package notify_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/approval"
	"github.com/buyflow/buyflow/internal/approvalcore"
	"github.com/buyflow/buyflow/internal/approvaltest"
	"github.com/buyflow/buyflow/internal/notify"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/slack"
	"github.com/buyflow/buyflow/internal/workflow"
)

func TestRequestCreatesApprovalAndPostsPersonalLinks(t *testing.T) {
	e := approvaltest.NewEnv(t, "")
	tok := approvaltest.Token(1)
	if len(tok) < 1024 {
		t.Fatalf("token is %d characters, want 1,024+", len(tok))
	}
	id := e.Request(tok)

	a := e.Approval(id)
	if a.Status != record.ApprovalPending || a.TaskToken != tok || a.Tenant != approvaltest.Tenant || a.OperationID != approvaltest.OpID {
		t.Fatalf("approval = %+v", a)
	}
	if strings.Join(a.Approvers, ",") != "UALICE,UBOB" {
		t.Errorf("approvers = %v, want the policy's approvers without the requester", a.Approvers)
	}
	if a.Requester != approvaltest.Requester || a.Amount != "12500.00" || a.Currency != "USD" || a.Reason != string(approvalcore.ReasonPolicyThreshold) {
		t.Errorf("approval facts = requester %q amount %q %q reason %q", a.Requester, a.Amount, a.Currency, a.Reason)
	}
	if want := e.Clock.Now().Add(approvaltest.TimeoutSeconds * time.Second); !a.ExpiresAt.Equal(want) {
		t.Errorf("expires at %s, want %s", a.ExpiresAt, want)
	}
	if len(a.SlackMessages) != 2 {
		t.Errorf("slack messages stored = %v", a.SlackMessages)
	}
	op, err := e.Store.GetOperation(e.Ctx, approvaltest.Tenant, approvaltest.OpID)
	if err != nil {
		t.Fatal(err)
	}
	if op.Status != workflow.StatusAwaitingApproval {
		t.Errorf("operation status = %s", op.Status)
	}

	msgs := e.Slack.Messages()
	if len(msgs) != 2 {
		t.Fatalf("slack got %d messages, want one DM per approver", len(msgs))
	}
	for _, m := range msgs {
		if strings.Contains(string(m.Body), tok[:40]) {
			t.Errorf("slack message to %s carries the task token", m.Channel)
		}
		other := map[string]string{approvaltest.Alice: approvaltest.Bob, approvaltest.Bob: approvaltest.Alice}[m.Channel]
		if other == "" {
			t.Fatalf("message to unexpected channel %s", m.Channel)
		}
		if !strings.Contains(string(m.Body), "approver="+m.Channel) || strings.Contains(string(m.Body), "approver="+other) {
			t.Errorf("message to %s does not carry only its own link", m.Channel)
		}
	}
	u := e.Link(id, approvaltest.Alice)
	if got := u.Scheme + "://" + u.Host + u.Path; got != approvaltest.BaseURL+"/v1/approvals/"+id {
		t.Errorf("link = %s", got)
	}
	if _, err := e.Signer.Verify(id, u.Query()); err != nil {
		t.Errorf("posted link does not verify: %v", err)
	}
	if evs := e.EventsOf(record.EventApprovalRequested); len(evs) != 1 || evs[0].Amount != "12500.00" {
		t.Errorf("approval_requested events = %+v", evs)
	}
}

func TestRequestRetryIsIdempotent(t *testing.T) {
	e := approvaltest.NewEnv(t, "")
	tok := approvaltest.Token(1)
	id := e.Request(tok)
	before := e.Snapshot(id)
	if again := e.Request(tok); again != id {
		t.Fatalf("retry made approval %s, first was %s", again, id)
	}
	if after := e.Snapshot(id); after != before {
		t.Errorf("retry changed something:\nbefore %+v\nafter  %+v", before, after)
	}
}

func TestRequestRetryAfterSlackFailurePostsOnce(t *testing.T) {
	e := approvaltest.NewEnv(t, "")
	tok := approvaltest.Token(1)
	down := true
	failing := slackFunc(func(m slack.Message) error {
		if down {
			return errors.New("slack is down")
		}
		return nil
	})
	svc, err := notify.New(approval.Config{Ledger: e.Store, Slack: failing, Delivery: slack.Direct, Signer: e.Signer,
		Policy: e.Policy, BaseURL: approvaltest.BaseURL, Now: e.Clock.Now, Logger: e.Logger})
	if err != nil {
		t.Fatal(err)
	}
	in := workflow.CallbackInput{Action: workflow.ActionRequest, OperationID: approvaltest.OpID, Tenant: approvaltest.Tenant,
		Config: workflow.RunConfig{ApprovalTimeoutSeconds: approvaltest.TimeoutSeconds}, TaskToken: tok}
	if err := svc.Request(e.Ctx, in); err == nil {
		t.Fatal("request succeeded with Slack down")
	}
	if msg := workflow.TaskError(svc.Request(e.Ctx, in)).Error(); strings.Contains(msg, tok[:40]) {
		t.Errorf("error carries the task token: %s", msg)
	}
	down = false
	if err := svc.Request(e.Ctx, in); err != nil {
		t.Fatal(err)
	}
	if err := svc.Request(e.Ctx, in); err != nil {
		t.Fatal(err)
	}
	if n := len(e.EventsOf(record.EventApprovalRequested)); n != 1 {
		t.Errorf("%d approval_requested events after retries, want 1", n)
	}
	if a := e.Approval(approval.ApprovalID(tok)); len(a.SlackMessages) != 2 {
		t.Errorf("slack refs = %v", a.SlackMessages)
	}
}

// slackFunc is a function-typed fake Slack client: it answers every post and update with f's error.
type slackFunc func(slack.Message) error

func (f slackFunc) Post(_ context.Context, m slack.Message) (slack.Ref, error) {
	if err := f(m); err != nil {
		return slack.Ref{}, err
	}
	return slack.Ref{Channel: m.Channel, TS: "1.000001"}, nil
}

func (f slackFunc) Update(_ context.Context, ref slack.Ref, m slack.Message) (slack.Ref, error) {
	return ref, f(m)
}

func TestExpireEscalatesOnceThenRejects(t *testing.T) {
	e := approvaltest.NewEnv(t, `{"threshold":"10000.00","currency":"USD","approvers":["UALICE","UBOB"],"escalation_approvers":["UESC"],"on_timeout":"escalate","escalation_timeout_seconds":600}`)
	first := e.Request(approvaltest.Token(1))
	e.Clock.Advance(approvaltest.TimeoutSeconds * time.Second)
	exp := e.Expire()
	if !exp.Escalated {
		t.Fatalf("first expiry = %+v, want escalated", exp)
	}
	if a := e.Approval(first); a.Status != record.ApprovalExpired {
		t.Errorf("first approval = %s", a.Status)
	}
	if again := e.Expire(); again != exp {
		t.Errorf("retried expire = %+v, first said %+v", again, exp)
	}
	updates := 0
	for _, m := range e.Slack.Messages() {
		if m.Kind == "chat.update" && strings.Contains(m.Text, "Expired") {
			updates++
		}
	}
	if updates != 2 {
		t.Errorf("%d expired updates in slack, want 2", updates)
	}

	// The state machine loops back to RequestApproval with a new token.
	second := e.Request(approvaltest.Token(2))
	a := e.Approval(second)
	if strings.Join(a.Approvers, ",") != approvaltest.Escalator {
		t.Errorf("escalated approvers = %v", a.Approvers)
	}
	if want := e.Clock.Now().Add(600 * time.Second); !a.ExpiresAt.Equal(want) {
		t.Errorf("escalated expiry = %s, want %s", a.ExpiresAt, want)
	}
	e.Link(second, approvaltest.Escalator)
	e.Clock.Advance(approvaltest.TimeoutSeconds * time.Second)
	if exp := e.Expire(); exp.Escalated {
		t.Fatalf("second expiry = %+v, want give up", exp)
	}
	if a := e.Approval(second); a.Status != record.ApprovalExpired {
		t.Errorf("second approval = %s", a.Status)
	}
}

func TestExpireRejectsWhenConfigured(t *testing.T) {
	e := approvaltest.NewEnv(t, "")
	e.Request(approvaltest.Token(1))
	e.Clock.Advance(approvaltest.TimeoutSeconds * time.Second)
	if exp := e.Expire(); exp.Escalated || !strings.Contains(exp.Reason, "expired at") {
		t.Fatalf("expire = %+v", exp)
	}
}

func TestExpireAfterARaceReportsTheDecision(t *testing.T) {
	e := approvaltest.NewEnv(t, "")
	id := e.Request(approvaltest.Token(1))
	e.Post(e.Link(id, approvaltest.Alice), "approve", "")
	exp := e.Expire()
	if exp.Escalated || !strings.Contains(exp.Reason, "approved by UALICE") {
		t.Fatalf("expire = %+v", exp)
	}
	if a := e.Approval(id); a.Status != record.ApprovalApproved {
		t.Errorf("ledger = %s", a.Status)
	}
}

func TestNotifyErrorsAreBareTypes(t *testing.T) {
	e := approvaltest.NewEnv(t, "")
	cases := []struct {
		name    string
		payload string
		want    string
	}{
		{"not json", `[`, "InvalidInputError"},
		{"unknown action", `{"action":"dance"}`, "InvalidInputError"},
		{"no token", `{"action":"request","operation_id":"op-1","tenant":"111122223333","config":{"approval_timeout_seconds":60}}`, "InvalidInputError"},
		{"no timeout", `{"action":"request","operation_id":"op-1","tenant":"111122223333","task_token":"t"}`, "InvalidInputError"},
		{"unknown operation", `{"action":"request","operation_id":"op-9","tenant":"111122223333","task_token":"t","config":{"approval_timeout_seconds":60}}`, "NotFoundError"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.Notifier.Handle(e.Ctx, json.RawMessage(tc.payload))
			if err == nil {
				t.Fatal("no error")
			}
			if got := typeName(err); got != tc.want {
				t.Errorf("error type %s (%v), want %s", got, err, tc.want)
			}
		})
	}
}

func typeName(err error) string {
	return strings.TrimPrefix(fmt.Sprintf("%T", err), "*workflow.")
}

func TestRequestForAnEndedOperationIsTerminal(t *testing.T) {
	e := approvaltest.NewEnv(t, "")
	if _, err := e.Store.Transition(e.Ctx, approvaltest.Tenant, approvaltest.OpID, workflow.StatusCanceled, record.AnyVersion, record.Patch{}); err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(map[string]any{
		"action": "request", "operation_id": approvaltest.OpID, "tenant": approvaltest.Tenant,
		"config": map[string]any{"approval_timeout_seconds": approvaltest.TimeoutSeconds}, "task_token": approvaltest.Token(1),
	})
	_, err := e.Notifier.Handle(e.Ctx, payload)
	if got := typeName(err); got != "TerminalError" {
		t.Fatalf("error %T %v, want TerminalError", err, err)
	}
	if len(e.Slack.Messages()) != 0 {
		t.Error("slack was told about an ended operation")
	}
}

func TestRequestReasons(t *testing.T) {
	const said = "buyer approval required: confirm the budget" // the operation's recorded reason
	cases := []struct {
		name, budget, reason string
		requireApproval      bool
		want                 string
		wantText             string // what the approvers read under the reason
	}{
		{"over threshold", "12500.00", "governance_needs_approval", false, "policy_threshold", ""},
		{"governance conditions", "500.00", "governance_needs_approval", false, "governance_conditions", said},
		{"buyer asked", "500.00", "governance_needs_approval", true, "buyer_requested", ""},
		{"seller input", "500.00", "seller_input_required", false, "seller_input_required", said},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := approvaltest.NewEnv(t, "")
			op, err := e.Store.CreateOperation(e.Ctx, record.Operation{ID: "op-2", Tenant: approvaltest.Tenant, SellerID: "s", BudgetTotal: tc.budget,
				Currency: "USD", Requester: approvaltest.Requester, RequireApproval: tc.requireApproval, Reason: said,
				Request: []byte(`{"media_buy":{"proposal_id":"prop-1","total_budget":{"amount":` + tc.budget + `,"currency":"USD"}}}`)})
			if err != nil {
				t.Fatal(err)
			}
			tok := approvaltest.Token(3)
			err = e.Notifier.Request(e.Ctx, workflow.CallbackInput{Action: workflow.ActionRequest, OperationID: op.ID, Tenant: approvaltest.Tenant,
				Config: workflow.RunConfig{ApprovalTimeoutSeconds: approvaltest.TimeoutSeconds}, TaskToken: tok, Reason: tc.reason})
			if err != nil {
				t.Fatal(err)
			}
			a := e.Approval(approval.ApprovalID(tok))
			if a.Reason != tc.want || a.ReasonText != tc.wantText {
				t.Errorf("reason = %q, %q; want %q, %q", a.Reason, a.ReasonText, tc.want, tc.wantText)
			}
			// The approvers read the seller's (or governance's) words in Slack.
			msgs := e.Slack.Messages()
			if n := len(msgs); n == 0 {
				t.Fatal("nothing posted to Slack")
			}
			if got := strings.Contains(string(msgs[len(msgs)-1].Body), said); got != (tc.wantText != "") {
				t.Errorf("Slack message carries the recorded reason: %v, want %v", got, tc.wantText != "")
			}
		})
	}
}

// An amount the page cannot show exactly (more decimals than its currency has: stored before
// the submit checked it, or written by hand) is never put before an approver: the request is
// terminal, nothing is posted and no approval is created.
func TestRequestRefusesAnInexactAmount(t *testing.T) {
	e := approvaltest.NewEnv(t, "")
	const id = "op-inexact"
	if _, err := e.Store.CreateOperation(e.Ctx, record.Operation{
		ID: id, Tenant: approvaltest.Tenant, Status: workflow.StatusAwaitingApproval, SellerID: "sports-network", PONumber: "PO-43",
		BudgetTotal: "1000.50", Currency: "JPY", Requester: approvaltest.Requester,
	}); err != nil {
		t.Fatal(err)
	}
	payload, _ := json.Marshal(map[string]any{
		"action": "request", "operation_id": id, "tenant": approvaltest.Tenant,
		"config": map[string]any{"approval_timeout_seconds": approvaltest.TimeoutSeconds}, "task_token": approvaltest.Token(7),
	})
	_, err := e.Notifier.Handle(e.Ctx, payload)
	if got := typeName(err); got != "TerminalError" || !strings.Contains(err.Error(), "1000.50") {
		t.Fatalf("error %T %v, want a TerminalError naming the amount", err, err)
	}
	if len(e.Slack.Messages()) != 0 {
		t.Error("slack was shown an inexact amount")
	}
	if _, err := e.Store.GetApproval(e.Ctx, approval.ApprovalID(approvaltest.Token(7))); !errors.Is(err, record.ErrNotFound) {
		t.Errorf("an approval was created: %v", err)
	}
}
