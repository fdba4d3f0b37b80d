package slack

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/approvalcore"
)

// fakeClient is a Client made of functions, one per table case.
type fakeClient struct {
	post   func(Message) (Ref, error)
	update func(Ref, Message) (Ref, error)
}

func (f fakeClient) Post(_ context.Context, m Message) (Ref, error) { return f.post(m) }
func (f fakeClient) Update(_ context.Context, r Ref, m Message) (Ref, error) {
	return f.update(r, m)
}

func linkFor(approver string) string {
	return "https://api.example.com/v1/approvals/apr_01HZY?approver=" + approver + "&exp=1&kid=k1&sig=SIG" + approver
}

func TestPostRequestDirectSendsEachApproverOnlyTheirLink(t *testing.T) {
	t.Parallel()
	reviews := []Review{{Approver: "U0ALICE01", URL: linkFor("U0ALICE01")}, {Approver: "U0BOB0002", URL: linkFor("U0BOB0002")}}
	var sent []Message
	c := fakeClient{post: func(m Message) (Ref, error) {
		sent = append(sent, m)
		return Ref{Channel: "D" + m.Channel, TS: "1.1"}, nil
	}}
	refs, err := PostRequest(context.Background(), c, sampleApproval(), reviews, Direct)
	if err != nil {
		t.Fatal(err)
	}
	if len(refs) != 2 || refs[1] != (Ref{Channel: "DU0BOB0002", TS: "1.1"}) {
		t.Fatalf("refs = %+v", refs)
	}
	for i, m := range sent {
		b, _ := json.Marshal(m)
		own, other := reviews[i].Approver, reviews[1-i].Approver
		if m.Channel != own || !strings.Contains(string(b), "SIG"+own) || strings.Contains(string(b), "SIG"+other) {
			t.Errorf("message %d to %s: %s", i, m.Channel, b)
		}
	}
}

func TestPostRequestDirectPartialFailure(t *testing.T) {
	t.Parallel()
	reviews := []Review{
		{Approver: "alice@example.com", URL: linkFor("alice")},
		{Approver: "U0BOB0002", URL: linkFor("U0BOB0002")},
		{Approver: "U0CFO0003", URL: linkFor("U0CFO0003")},
	}
	c := fakeClient{post: func(m Message) (Ref, error) {
		if m.Channel == "U0BOB0002" {
			return Ref{}, &APIError{Op: "chat.postMessage", Code: "user_not_found", StatusCode: 200}
		}
		return Ref{Channel: m.Channel, TS: "1.1"}, nil
	}}
	refs, err := PostRequest(context.Background(), c, sampleApproval(), reviews, Direct)
	if len(refs) != 1 || refs[0].Channel != "U0CFO0003" {
		t.Fatalf("refs = %+v", refs)
	}
	var ae *APIError
	if !errors.As(err, &ae) || ae.Code != "user_not_found" || !strings.Contains(err.Error(), "approver 1 is not a Slack user id") {
		t.Fatalf("err = %v", err)
	}
	if strings.Contains(err.Error(), "SIG") || strings.Contains(err.Error(), "sig=") {
		t.Fatalf("error quotes a link: %v", err)
	}
}

func TestPostRequestSharedAndStatusThroughSink(t *testing.T) {
	t.Parallel()
	sink := NewSink(func() time.Time { return t0 })
	srv := httptest.NewServer(sink)
	defer srv.Close()
	hook, err := NewWebhookClient(srv.URL + "/hooks/x")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	reviews := []Review{{Approver: "U0ALICE01", URL: linkFor("U0ALICE01")}, {Approver: "U0BOB0002", URL: linkFor("U0BOB0002")}}
	refs, err := PostRequest(ctx, hook, sampleApproval(), reviews, Shared)
	if err != nil || len(refs) != 1 || refs[0] != (Ref{}) {
		t.Fatalf("PostRequest = %+v, %v", refs, err)
	}
	a := sampleApproval()
	a.Status, a.DecidedBy, a.DecidedAt = approvalcore.StatusApproved, "U0BOB0002", t0
	if err := PostStatus(ctx, hook, a, refs); err != nil {
		t.Fatal(err)
	}
	recs := sink.Messages()
	if len(recs) != 2 || !strings.Contains(string(recs[0].Body), "SIGU0ALICE01") || !strings.Contains(string(recs[0].Body), "SIGU0BOB0002") ||
		!strings.HasPrefix(recs[1].Text, "Approved by <@U0BOB0002>") {
		t.Fatalf("records = %+v", recs)
	}

	bot, err := NewBotClient(botToken, WithBaseURL(srv.URL+"/api/"))
	if err != nil {
		t.Fatal(err)
	}
	refs, err = PostRequest(ctx, bot, sampleApproval(), reviews, Direct)
	if err != nil || len(refs) != 2 {
		t.Fatalf("PostRequest = %+v, %v", refs, err)
	}
	if err := PostStatus(ctx, bot, a, refs); err != nil {
		t.Fatal(err)
	}
	recs = sink.Messages()[2:]
	kinds := []string{recs[0].Kind, recs[1].Kind, recs[2].Kind, recs[3].Kind}
	if strings.Join(kinds, ",") != "chat.postMessage,chat.postMessage,chat.update,chat.update" || recs[2].TS != refs[0].TS {
		t.Fatalf("records = %+v", recs)
	}
	if err := PostStatus(ctx, bot, sampleApproval(), refs); err == nil {
		t.Error("status of a pending approval posted")
	}
}
