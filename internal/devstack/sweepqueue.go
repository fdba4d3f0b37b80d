package devstack

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/buyflow/buyflow/internal/topology"
)

// The sweep's shard queue, emulated. kumo v0.33.1 serves SQS itself (messages, visibility
// timeouts, the redrive policy and its dead-letter queue) and stores event source mappings, but
// never polls a queue for one. The stack creates the queue and its dead-letter queue as the CDK
// stack does (topology.App.SweepQueue) and runs the mapping itself, as Lambda's SQS poller does:
// it long-polls up to BatchSize messages, invokes the function with them as an SQS event, up to
// MaximumConcurrency batches at once, deletes the messages of a batch that succeeded but those
// its response lists in batchItemFailures, and leaves the others to come back after the
// visibility timeout: all of a batch whose invocation failed or whose response is not one
// Lambda accepts (not JSON, an itemIdentifier empty or not in the batch). kumo's redrive policy
// moves a message received MaxReceiveCount times to the dead-letter queue.

// queueAPI is the part of the SQS client the mapping uses.
type queueAPI interface {
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
}

// QueueStats counts what the sweep queue's emulated mapping did.
type QueueStats struct {
	// Batches are the invocations with a batch of messages; Messages the messages they
	// carried; Deleted those the mapping deleted (their shard done); Returned those left to
	// come back after the visibility timeout (a failed shard, or a failed invocation's).
	Batches, Messages, Deleted, Returned int
}

// queueMapping is the emulated event source mapping of the sweep queue to one function.
type queueMapping struct {
	api      queueAPI
	url, arn string
	src      topology.QueueSource
	invoke   func(ctx context.Context, payload []byte) (functionErr bool, out []byte, err error)
	logf     func(format string, args ...any)
	// wait is the pause after a failed receive and between the checks of a hold.
	wait time.Duration

	mu       sync.Mutex
	idle     *sync.Cond // signalled when inflight drops to 0
	held     int        // hold's holders: no receive while > 0
	inflight int        // receives and batches under way
	stats    QueueStats
}

func newQueueMapping(api queueAPI, url, arn string, src topology.QueueSource, invoke func(context.Context, []byte) (bool, []byte, error), logf func(string, ...any)) *queueMapping {
	m := &queueMapping{api: api, url: url, arn: arn, src: src, invoke: invoke, logf: logf, wait: 100 * time.Millisecond}
	m.idle = sync.NewCond(&m.mu)
	return m
}

// hold stops the mapping from taking messages, as disabling it does on AWS, once the batches
// under way have finished, until the returned func is called.
func (m *queueMapping) hold() (release func()) {
	m.mu.Lock()
	m.held++
	for m.inflight > 0 {
		m.idle.Wait()
	}
	m.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			m.mu.Lock()
			m.held--
			m.mu.Unlock()
		})
	}
}

// enter marks a receive under way unless the mapping is held.
func (m *queueMapping) enter() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.held > 0 {
		return false
	}
	m.inflight++
	return true
}

func (m *queueMapping) leave() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.inflight--; m.inflight == 0 {
		m.idle.Broadcast()
	}
}

// drain delivers the queue's visible messages itself, batch after batch, until a receive finds
// none, whether or not the mapping is held: a sweep run on demand (Stack.SweepNow) has run its
// shards when it returns.
func (m *queueMapping) drain(ctx context.Context) error {
	for {
		out, err := m.api.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(m.url), MaxNumberOfMessages: int32(m.src.BatchSize),
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		})
		if err != nil {
			return fmt.Errorf("devstack: sweep queue: receive: %w", err)
		}
		if len(out.Messages) == 0 {
			return nil
		}
		m.deliver(ctx, out.Messages)
	}
}

// Stats returns what the mapping did so far.
func (m *queueMapping) Stats() QueueStats {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stats
}

// run takes batches until ctx ends, MaximumConcurrency of them under way at once.
func (m *queueMapping) run(ctx context.Context) {
	slots := make(chan struct{}, max(1, m.src.MaximumConcurrency))
	var wg sync.WaitGroup
	defer wg.Wait()
	pause := func() bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(m.wait):
			return true
		}
	}
	for ctx.Err() == nil {
		if !m.enter() {
			if !pause() {
				return
			}
			continue
		}
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			m.leave()
			return
		}
		out, err := m.api.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
			QueueUrl: aws.String(m.url), MaxNumberOfMessages: int32(m.src.BatchSize), WaitTimeSeconds: 1,
			MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameAll},
		})
		if err != nil || len(out.Messages) == 0 {
			<-slots
			m.leave()
			if err != nil && ctx.Err() == nil {
				m.logf("sweep queue: receive: %v", err)
				pause()
			}
			continue
		}
		wg.Go(func() {
			defer func() { <-slots; m.leave() }()
			m.deliver(ctx, out.Messages)
		})
	}
}

// deliver invokes the function with one batch and deletes what it took.
func (m *queueMapping) deliver(ctx context.Context, msgs []sqstypes.Message) {
	ev := events.SQSEvent{Records: make([]events.SQSMessage, 0, len(msgs))}
	for _, msg := range msgs {
		ev.Records = append(ev.Records, events.SQSMessage{
			MessageId: aws.ToString(msg.MessageId), ReceiptHandle: aws.ToString(msg.ReceiptHandle), Body: aws.ToString(msg.Body),
			Md5OfBody: aws.ToString(msg.MD5OfBody), Attributes: msg.Attributes, EventSource: "aws:sqs", EventSourceARN: m.arn, AWSRegion: region,
		})
	}
	keep := m.outcome(ctx, ev)
	var del []sqstypes.DeleteMessageBatchRequestEntry
	for i, msg := range msgs {
		if !keep[aws.ToString(msg.MessageId)] {
			del = append(del, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: msg.ReceiptHandle})
		}
	}
	deleted := 0
	if len(del) > 0 {
		out, err := m.api.DeleteMessageBatch(context.WithoutCancel(ctx), &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(m.url), Entries: del})
		switch {
		case err != nil:
			m.logf("sweep queue: delete %d messages: %v (they come back)", len(del), err)
		default:
			deleted = len(out.Successful)
			for _, f := range out.Failed {
				m.logf("sweep queue: delete message %s: %s %s (it comes back)", aws.ToString(f.Id), aws.ToString(f.Code), aws.ToString(f.Message))
			}
		}
	}
	m.mu.Lock()
	m.stats.Batches++
	m.stats.Messages += len(msgs)
	m.stats.Deleted += deleted
	m.stats.Returned += len(msgs) - deleted
	m.mu.Unlock()
}

// outcome invokes the function with ev and returns the ids of the messages to leave in the
// queue, as Lambda reads a response with ReportBatchItemFailures.
func (m *queueMapping) outcome(ctx context.Context, ev events.SQSEvent) map[string]bool {
	all := map[string]bool{}
	for _, r := range ev.Records {
		all[r.MessageId] = true
	}
	payload, err := json.Marshal(ev)
	if err != nil {
		m.logf("sweep queue: encode a batch: %v", err)
		return all
	}
	fnErr, out, err := m.invoke(ctx, payload)
	if err != nil || fnErr {
		m.logf("sweep queue: the batch of %d failed (function error %v, %v): it comes back after the visibility timeout", len(ev.Records), fnErr, err)
		return all
	}
	var resp *struct {
		BatchItemFailures []struct {
			ItemIdentifier *string `json:"itemIdentifier"`
		} `json:"batchItemFailures"`
	}
	if len(out) == 0 || string(out) == "null" {
		return nil // an empty or null response: the whole batch succeeded
	}
	if err := json.Unmarshal(out, &resp); err != nil {
		m.logf("sweep queue: the response %q is not JSON: the whole batch comes back", out)
		return all
	}
	keep := map[string]bool{}
	if resp == nil {
		return keep
	}
	for _, f := range resp.BatchItemFailures {
		id := aws.ToString(f.ItemIdentifier)
		if !all[id] {
			m.logf("sweep queue: the response names %q, no message of the batch: the whole batch comes back", id)
			return all
		}
		keep[id] = true
	}
	return keep
}

// createSweepQueue creates the sweep queue and its dead-letter queue in kumo with topology's
// settings, as the CDK stack does, and returns the queue's URL and ARN.
func createSweepQueue(ctx context.Context, api *sqs.Client, name string, src topology.QueueSource) (url, arn string, err error) {
	dlq, err := api.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name + "-failures"),
		Attributes: map[string]string{"MessageRetentionPeriod": "1209600"}})
	if err != nil {
		return "", "", fmt.Errorf("devstack: create the sweep's dead-letter queue: %w", err)
	}
	dlqArn, err := queueArn(ctx, api, aws.ToString(dlq.QueueUrl))
	if err != nil {
		return "", "", err
	}
	redrive, err := json.Marshal(map[string]any{"deadLetterTargetArn": dlqArn, "maxReceiveCount": src.MaxReceiveCount})
	if err != nil {
		return "", "", err
	}
	q, err := api.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: map[string]string{
		"VisibilityTimeout":      strconv.Itoa(src.VisibilityTimeoutSeconds),
		"MessageRetentionPeriod": strconv.Itoa(src.RetentionSeconds),
		"RedrivePolicy":          string(redrive),
	}})
	if err != nil {
		return "", "", fmt.Errorf("devstack: create the sweep queue: %w", err)
	}
	url = aws.ToString(q.QueueUrl)
	if arn, err = queueArn(ctx, api, url); err != nil {
		return "", "", err
	}
	return url, arn, nil
}

func queueArn(ctx context.Context, api *sqs.Client, url string) (string, error) {
	out, err := api.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		return "", fmt.Errorf("devstack: the ARN of queue %s: %w", url, err)
	}
	return out.Attributes[string(sqstypes.QueueAttributeNameQueueArn)], nil
}
