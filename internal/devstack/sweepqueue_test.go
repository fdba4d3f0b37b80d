package devstack

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/sivchari/kumo"

	"github.com/buyflow/buyflow/internal/topology"
)

// fakeWorker answers the emulated mapping's invocations: it reports the messages whose body is
// "fail" as batch item failures and fails a whole invocation whose batch holds "crash" (the
// first time only), and records every batch.
type fakeWorker struct {
	mu      sync.Mutex
	batches [][]string
	seen    map[string]int // receives by body
	crashed bool
}

func (w *fakeWorker) invoke(_ context.Context, payload []byte) (bool, []byte, error) {
	var ev events.SQSEvent
	if err := json.Unmarshal(payload, &ev); err != nil {
		return true, nil, nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var bodies []string
	resp := events.SQSEventResponse{}
	crash := false
	for _, r := range ev.Records {
		if r.EventSource != "aws:sqs" || r.EventSourceARN == "" || r.ReceiptHandle == "" {
			return true, nil, fmt.Errorf("record %+v is not an SQS record", r)
		}
		bodies = append(bodies, r.Body)
		w.seen[r.Body]++
		switch r.Body {
		case "fail":
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: r.MessageId})
		case "crash":
			crash = !w.crashed
		}
	}
	w.batches = append(w.batches, bodies)
	if crash {
		w.crashed = true
		return true, []byte(`{"errorType":"Runtime.ExitError"}`), nil
	}
	out, err := json.Marshal(resp)
	return false, out, err
}

func (w *fakeWorker) count(body string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen[body]
}

// The emulated mapping of the sweep queue against kumo's SQS: batches of at most BatchSize,
// every message that succeeded deleted once, a message reported failed (and a whole batch
// whose invocation failed) back after the visibility timeout, and one that keeps failing moved
// to the dead-letter queue by the redrive policy after MaxReceiveCount receives. A hold waits
// for the batches under way and takes nothing until released.
func TestSweepQueueMappingDeliversAsLambdaDoes(t *testing.T) {
	emu := kumo.NewServer()
	defer emu.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, _, _, api := (&Stack{}).newClients(emu.URL)
	src := topology.QueueSource{BatchSize: 10, MaximumConcurrency: 2, VisibilityTimeoutSeconds: 1, MaxReceiveCount: 2, RetentionSeconds: 60}
	url, arn, err := createSweepQueue(ctx, api, "sweep-test", src)
	if err != nil {
		t.Fatal(err)
	}
	send := func(bodies ...string) {
		t.Helper()
		for _, b := range bodies {
			if _, err := api.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(b)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	var bodies []string
	for i := range 22 {
		bodies = append(bodies, fmt.Sprintf("ok-%02d", i))
	}
	send(append(bodies, "fail", "crash")...)

	w := &fakeWorker{seen: map[string]int{}}
	m := newQueueMapping(api, url, arn, src, w.invoke, t.Logf)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); m.run(runCtx) }()
	defer func() { stop(); <-done }()

	until := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(20 * time.Second); !ok(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: stats %+v, batches %v", what, m.Stats(), w.batches)
			}
		}
	}
	// "crash" fails its batch once: it and its batch's others come back and are then done.
	until("every ok message and crash deleted, fail received twice", func() bool {
		st := m.Stats()
		return st.Deleted == 23 && w.count("fail") >= 2
	})
	for _, b := range append(bodies, "crash") {
		if n := w.count(b); n < 1 || n > 2 {
			t.Errorf("%s received %d times", b, n)
		}
	}
	w.mu.Lock()
	for _, b := range w.batches {
		if len(b) > src.BatchSize {
			t.Errorf("a batch of %d: %v", len(b), b)
		}
	}
	w.mu.Unlock()

	// Received MaxReceiveCount times, "fail" is in the dead-letter queue, not back.
	dlq, err := api.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String("sweep-test-failures")})
	if err != nil {
		t.Fatal(err)
	}
	var dead []string
	for deadline := time.Now().Add(10 * time.Second); len(dead) == 0 && time.Now().Before(deadline); {
		out, err := api.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: dlq.QueueUrl, WaitTimeSeconds: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, msg := range out.Messages {
			dead = append(dead, aws.ToString(msg.Body))
		}
	}
	if !slices.Equal(dead, []string{"fail"}) || w.count("fail") != src.MaxReceiveCount {
		t.Fatalf("dead-letter queue %v, fail received %d times; want [fail] after %d", dead, w.count("fail"), src.MaxReceiveCount)
	}

	// Held, the mapping takes nothing; released, it takes what waited.
	release := m.hold()
	send("later")
	time.Sleep(1500 * time.Millisecond)
	if n := w.count("later"); n != 0 {
		t.Fatalf("a held mapping delivered %d times", n)
	}
	release()
	until("the message sent during the hold delivered after it", func() bool { return w.count("later") == 1 })
}
