package sweepqueue_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/buyflow/buyflow/internal/awsjson"
	"github.com/buyflow/buyflow/internal/reconcile"
	"github.com/buyflow/buyflow/internal/sweepqueue"
)

// entry, result and failure are SendMessageBatch's JSON as SQS spells it.
type entry struct{ Id, MessageBody string }

type failure struct {
	Id, Code, Message string
	SenderFault       bool
}

type result struct {
	Successful []struct{ Id string }
	Failed     []failure
}

func succeed(r *result, id string) { r.Successful = append(r.Successful, struct{ Id string }{id}) }

// sendFunc is an SQS JSON-protocol client whose SendMessageBatch is the function itself.
type sendFunc func(queueURL string, entries []entry) (result, error)

func (f sendFunc) Call(_ context.Context, queueURL, action string, in, out any) error {
	if action != "SendMessageBatch" {
		return fmt.Errorf("unexpected action %s", action)
	}
	raw, err := json.Marshal(in)
	if err != nil {
		return err
	}
	var req struct {
		QueueUrl string
		Entries  []entry
	}
	if err := json.Unmarshal(raw, &req); err != nil || req.QueueUrl != queueURL {
		return fmt.Errorf("request %s for %s: %w", raw, queueURL, err)
	}
	res, err := f(queueURL, req.Entries)
	if err != nil {
		return err
	}
	if raw, err = json.Marshal(res); err != nil {
		return err
	}
	return json.Unmarshal(raw, out)
}

func shards(n int) []reconcile.ShardMessage {
	out := make([]reconcile.ShardMessage, n)
	for i := range out {
		out[i] = reconcile.ShardMessage{Plan: "p1", Seller: fmt.Sprintf("seller-%02d", i)}
	}
	return out
}

// sent decodes the bodies of a call's entries.
func sent(t *testing.T, entries []entry) []reconcile.ShardMessage {
	t.Helper()
	var out []reconcile.ShardMessage
	for _, e := range entries {
		m, err := sweepqueue.ParseShard([]byte(e.MessageBody))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// 23 shards go out in three calls of 10, 10 and 3, each one message per shard, to the queue.
func TestDispatchSendsTenShardsACall(t *testing.T) {
	var calls [][]reconcile.ShardMessage
	d := &sweepqueue.Dispatcher{QueueURL: "https://sqs.example/q", API: sendFunc(func(url string, entries []entry) (result, error) {
		if url != "https://sqs.example/q" {
			t.Errorf("sent to %q", url)
		}
		calls = append(calls, sent(t, entries))
		var out result
		for _, e := range entries {
			succeed(&out, e.Id)
		}
		return out, nil
	})}
	want := shards(23)
	if err := d.Dispatch(context.Background(), want); err != nil {
		t.Fatal(err)
	}
	if len(calls) != 3 || len(calls[0]) != 10 || len(calls[1]) != 10 || len(calls[2]) != 3 {
		t.Fatalf("calls %v; want 10, 10 and 3 entries", calls)
	}
	if got := slices.Concat(calls...); !slices.Equal(got, want) {
		t.Fatalf("sent %v, want %v", got, want)
	}
}

// An entry SQS refused for a reason of its own (throttled) is sent again, alone; one refused as
// the sender's fault is not, and the error names its seller; the other batches still go out.
func TestDispatchSendsAgainWhatSQSRefused(t *testing.T) {
	var calls [][]reconcile.ShardMessage
	d := &sweepqueue.Dispatcher{QueueURL: "q", Backoff: 1, API: sendFunc(func(_ string, entries []entry) (result, error) {
		calls = append(calls, sent(t, entries))
		var out result
		for i, e := range entries {
			m := calls[len(calls)-1][i]
			switch {
			case m.Seller == "seller-03" && len(calls) == 1:
				out.Failed = append(out.Failed, failure{Id: e.Id, Code: "RequestThrottled"})
			case m.Seller == "seller-05":
				out.Failed = append(out.Failed, failure{Id: e.Id, Code: "InvalidMessageContents", SenderFault: true})
			default:
				succeed(&out, e.Id)
			}
		}
		return out, nil
	})}
	err := d.Dispatch(context.Background(), shards(12))
	if err == nil || !strings.Contains(err.Error(), "seller-05") || strings.Contains(err.Error(), "seller-03") {
		t.Fatalf("error %v; want seller-05 named (sender's fault), seller-03 sent again", err)
	}
	if len(calls) != 3 || len(calls[1]) != 1 || calls[1][0].Seller != "seller-03" || len(calls[2]) != 2 {
		t.Fatalf("calls %v; want the first 10, seller-03 again alone, then the last 2", calls)
	}
}

// An entry throttled on every attempt is given up after Attempts, and named; a whole call SQS
// refused for its own reason is made again, one refused otherwise (access denied) is not.
func TestDispatchGivesUpAfterItsAttempts(t *testing.T) {
	n := 0
	d := &sweepqueue.Dispatcher{QueueURL: "q", Attempts: 2, Backoff: 1, API: sendFunc(func(_ string, entries []entry) (result, error) {
		n++
		return result{Failed: []failure{{Id: entries[0].Id, Code: "InternalError"}}}, nil
	})}
	if err := d.Dispatch(context.Background(), shards(1)); err == nil || !strings.Contains(err.Error(), "seller-00") || n != 2 {
		t.Fatalf("%d calls, error %v; want 2 and seller-00 named", n, err)
	}
	n = 0
	d.API = sendFunc(func(_ string, entries []entry) (result, error) {
		if n++; n == 1 {
			return result{}, &awsjson.Error{Service: "sqs", Action: "SendMessageBatch", Status: 500, Type: "InternalFailure"}
		}
		var out result
		for _, e := range entries {
			succeed(&out, e.Id)
		}
		return out, nil
	})
	if err := d.Dispatch(context.Background(), shards(3)); err != nil || n != 2 {
		t.Fatalf("%d calls, %v; want the refused call made again", n, err)
	}
	denied := &awsjson.Error{Service: "sqs", Action: "SendMessageBatch", Status: 400, Type: "AccessDeniedException"}
	n = 0
	d.API = sendFunc(func(string, []entry) (result, error) { n++; return result{}, denied })
	if err := d.Dispatch(context.Background(), shards(11)); !errors.Is(err, denied) || !strings.Contains(err.Error(), "seller-10") || n != 2 {
		t.Fatalf("%d calls (one per batch), %v", n, err)
	}
}

func sqsEvent(bodies ...string) json.RawMessage {
	ev := events.SQSEvent{}
	for i, b := range bodies {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: fmt.Sprintf("m%d", i), Body: b, EventSource: "aws:sqs"})
	}
	raw, _ := json.Marshal(ev)
	return raw
}

// A batch runs its shards together; the response lists the message of each shard that failed
// and each message that is no shard, and nothing fails as a whole. Any other event is the
// schedule's and goes to the planner.
func TestHandlerReportsEachFailedShard(t *testing.T) {
	planned := 0
	var ran []reconcile.ShardMessage
	h := sweepqueue.Handler(func(context.Context, json.RawMessage) (string, error) { planned++; return "plan", nil },
		func(_ context.Context, b []reconcile.ShardMessage) (reconcile.Summary, []error) {
			ran = append(ran, b...)
			errs := make([]error, len(b))
			for i, m := range b {
				if m.Seller == "down" {
					errs[i] = errors.New("index unreadable")
				}
			}
			return reconcile.Summary{}, errs
		})
	out, err := h(context.Background(), sqsEvent(`{"plan":"p","seller":"a"}`, `{"plan":"p","seller":"down"}`, `not json`, `{"plan":"p","seller":"b"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, ok := out.(events.SQSEventResponse)
	var failed []string
	for _, f := range resp.BatchItemFailures {
		failed = append(failed, f.ItemIdentifier)
	}
	slices.Sort(failed)
	if !ok || !slices.Equal(failed, []string{"m1", "m2"}) || len(ran) != 3 || planned != 0 {
		t.Fatalf("response %+v (failed %v), shards run %v, plans %d; want m1 (failed) and m2 (no shard) reported, 3 shards run", out, failed, ran, planned)
	}
	raw, _ := json.Marshal(out)
	if !strings.Contains(string(raw), `"batchItemFailures":[{"itemIdentifier":"m2"},{"itemIdentifier":"m1"}]`) {
		t.Errorf("the response as Lambda reads it: %s", raw)
	}
	if out, err := h(context.Background(), json.RawMessage(`{}`)); err != nil || out != "plan" || planned != 1 {
		t.Fatalf("the schedule's event: %v, %v", out, err)
	}
	if _, err := h(context.Background(), json.RawMessage(`{"Records":[{"eventSource":"aws:dynamodb"}]}`)); err != nil || planned != 2 {
		t.Fatalf("an event from elsewhere went to the shards: %v", err)
	}
	out, _ = h(context.Background(), sqsEvent(`{"plan":"p","seller":"a"}`))
	if raw, _ := json.Marshal(out); string(raw) != `{"batchItemFailures":[]}` {
		t.Errorf("a batch that succeeded answers %s", raw)
	}
}

func TestParseShard(t *testing.T) {
	for _, body := range []string{``, `{}`, `{"plan":"p"}`, `{"seller":"s"}`, `{"plan":"p","seller":"s","x":1}`, `{"plan":"p","seller":"s"}{}`, `[]`} {
		if _, err := sweepqueue.ParseShard([]byte(body)); err == nil {
			t.Errorf("%q parsed", body)
		}
	}
	if m, err := sweepqueue.ParseShard([]byte(`{"plan":"p","seller":"s"}`)); err != nil || m != (reconcile.ShardMessage{Plan: "p", Seller: "s"}) {
		t.Fatalf("%+v, %v", m, err)
	}
}

func FuzzParseShard(f *testing.F) {
	f.Add([]byte(`{"plan":"p","seller":"s"}`))
	f.Add([]byte(`{"plan":"","seller":"s"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		m, err := sweepqueue.ParseShard(body)
		if err != nil {
			return
		}
		if m.Plan == "" || m.Seller == "" {
			t.Fatalf("%q parsed to %+v", body, m)
		}
		again, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if back, err := sweepqueue.ParseShard(again); err != nil || back != m {
			t.Fatalf("%+v does not round-trip: %+v, %v", m, back, err)
		}
	})
}
