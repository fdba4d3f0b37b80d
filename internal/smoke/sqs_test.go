package smoke

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/buyflow/buyflow/internal/apiclient"
	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/statusevent"
)

// event is the status event of operation id into to, as EventBridge delivers it.
func event(t *testing.T, id string, seq int64, from, to string) string {
	t.Helper()
	ev := statusevent.Event{ID: fmt.Sprintf("e-%s-%d", id, seq), Source: statusevent.Source, DetailType: statusevent.KindMediaBuy.DetailType(),
		Time: time.Date(2026, 12, 2, 6, 0, int(seq), 0, time.UTC),
		Detail: statusevent.Detail{SchemaVersion: statusevent.SchemaVersion, EventID: statusevent.EventID(statusevent.KindMediaBuy, id, seq),
			Kind: statusevent.KindMediaBuy, OperationID: id, Tenant: "t1", Sequence: seq, From: from, To: to, SellerID: SandboxSellerID}}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The sandbox's events queue, read over SQS's JSON protocol from moto's SQS (a real SQS wire
// peer): the operation's events in sequence order, each once though delivered twice, others'
// events and malformed messages left out, and the queue drained.
func TestSQSEventsReadsTheSandboxQueue(t *testing.T) {
	moto := dynamotest.MotoServer(t)
	ctx := context.Background()
	// moto routes a request to SQS by its SigV4 scope, as the CLI signs it on AWS.
	sign := apiclient.SignV4(credentials.NewStaticCredentialsProvider("AKIDSMOKE", "secret", ""), "sqs", "us-east-1")
	q := &SQSEvents{QueueURL: moto + "/123456789012/smoke", Sign: sign}
	var created struct{ QueueUrl string }
	if err := q.call(ctx, "CreateQueue", map[string]any{"QueueName": "smoke"}, &created); err != nil {
		t.Fatal(err)
	}
	q.QueueURL = created.QueueUrl
	for _, body := range []string{
		event(t, "mb-1", 2, "requested", "checking_governance"), event(t, "mb-1", 1, "", "requested"),
		event(t, "mb-2", 1, "", "requested"), `{"not":"an event"}`, event(t, "mb-1", 2, "requested", "checking_governance"),
	} {
		if err := q.call(ctx, "SendMessage", map[string]any{"QueueUrl": q.QueueURL, "MessageBody": body}, nil); err != nil {
			t.Fatal(err)
		}
	}
	evs, err := q.Of(ctx, "mb-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].Detail.Sequence != 1 || evs[1].Detail.To != "checking_governance" {
		t.Fatalf("events of mb-1: %+v", evs)
	}
	if evs, _ := q.Of(ctx, "mb-2"); len(evs) != 1 {
		t.Errorf("events of mb-2: %+v", evs)
	}
	var left struct{ Messages []any }
	if err := q.call(ctx, "ReceiveMessage", map[string]any{"QueueUrl": q.QueueURL, "MaxNumberOfMessages": 10}, &left); err != nil || len(left.Messages) != 0 {
		t.Errorf("the queue still holds %d messages (%v)", len(left.Messages), err)
	}
	if _, err := (&SQSEvents{QueueURL: moto + "/123456789012/nope", Sign: sign}).Of(ctx, "mb-1"); err == nil {
		t.Error("a queue that does not exist read as empty")
	}
}
