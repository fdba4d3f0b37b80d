// Package sweepqueue is the reconciliation sweep's fan-out over SQS (docs/ARCHITECTURE.md, "The
// sweep's fan-out"): the scheduled planner's Dispatcher sends one message per shard
// (SendMessageBatch, MaxBatch a call), the queue's event source mapping invokes the reconcile
// function with batches of them, and Handler runs such a batch with reconcile.Service.Shards,
// reporting each shard that failed as a batch item failure so that only its message comes
// back. Every other invocation of the function (the schedule's) goes to the planner.
package sweepqueue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/buyflow/buyflow/internal/reconcile"
	"github.com/buyflow/buyflow/internal/sqsjson"
)

// MaxBatch is SendMessageBatch's limit of entries per call.
const MaxBatch = 10

// sender calls SQS's JSON protocol; *sqsjson.Client satisfies it.
type sender interface {
	Call(ctx context.Context, queueURL, action string, in, out any) error
}

var _ sender = (*sqsjson.Client)(nil)

// The SendMessageBatch request and answer, as SQS's JSON protocol spells them.
type (
	batchEntry struct {
		ID          string `json:"Id"`
		MessageBody string `json:"MessageBody"`
	}
	batchRequest struct {
		QueueURL string       `json:"QueueUrl"`
		Entries  []batchEntry `json:"Entries"`
	}
	batchResult struct {
		Successful []struct {
			ID string `json:"Id"`
		} `json:"Successful"`
		Failed []struct {
			ID          string `json:"Id"`
			Code        string `json:"Code"`
			Message     string `json:"Message"`
			SenderFault bool   `json:"SenderFault"`
		} `json:"Failed"`
	}
)

// Dispatcher sends a plan's shards to the queue: one message each, MaxBatch a call.
type Dispatcher struct {
	API      sender
	QueueURL string
	// Attempts bounds the sends of an entry SendMessageBatch refused for a reason of its own
	// (throttling, an internal error), and of a whole call SQS refused so (sqsjson.Retryable);
	// default 3. An entry refused as the sender's fault is never sent again.
	Attempts int
	// Backoff is the wait before the first resend, doubled for each further one (default 100 ms).
	Backoff time.Duration
}

var _ reconcile.Dispatcher = (*Dispatcher)(nil)

// Dispatch sends every shard, a batch of MaxBatch at a time; a batch that fails does not stop
// the others. The error names each shard not sent (its plan then earns no heartbeat, and the
// next plan hands its seller out again).
func (d *Dispatcher) Dispatch(ctx context.Context, shards []reconcile.ShardMessage) error {
	var errs []error
	for start := 0; start < len(shards); start += MaxBatch {
		if err := d.send(ctx, shards[start:min(start+MaxBatch, len(shards))]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// send sends one batch, sending again the entries SQS refused for a reason not the sender's.
func (d *Dispatcher) send(ctx context.Context, batch []reconcile.ShardMessage) error {
	attempts, backoff := d.Attempts, d.Backoff
	if attempts <= 0 {
		attempts = 3
	}
	if backoff <= 0 {
		backoff = 100 * time.Millisecond
	}
	pending := map[string]reconcile.ShardMessage{} // by entry id: its index in the batch
	entries := make([]batchEntry, 0, len(batch))
	for i, m := range batch {
		body, err := json.Marshal(m)
		if err != nil {
			return fmt.Errorf("sweepqueue: encode the shard of %s: %w", m.Seller, err)
		}
		id := strconv.Itoa(i)
		pending[id] = m
		entries = append(entries, batchEntry{ID: id, MessageBody: string(body)})
	}
	var refused []string
	for attempt := 1; len(entries) > 0; attempt++ {
		var out batchResult
		err := d.API.Call(ctx, d.QueueURL, "SendMessageBatch", batchRequest{QueueURL: d.QueueURL, Entries: entries}, &out)
		switch {
		case sqsjson.Retryable(err) && attempt < attempts:
			out = batchResult{} // the whole call again
		case err != nil:
			return fmt.Errorf("sweepqueue: send the shards of %s: %w", sellers(pending), err)
		}
		for _, ok := range out.Successful {
			delete(pending, ok.ID)
		}
		for _, f := range out.Failed {
			m, known := pending[f.ID]
			if !known {
				continue
			}
			if f.SenderFault || attempt >= attempts {
				refused = append(refused, fmt.Sprintf("%s (%s: %s)", m.Seller, f.Code, f.Message))
				delete(pending, f.ID)
			}
		}
		// What is still pending was refused for a reason of its own, or not answered at all.
		var again []batchEntry
		for _, e := range entries {
			if _, left := pending[e.ID]; left {
				again = append(again, e)
			}
		}
		if entries = again; len(entries) == 0 {
			break
		}
		if attempt >= attempts {
			return fmt.Errorf("sweepqueue: the shards of %s not sent after %d attempts", sellers(pending), attempts)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("sweepqueue: the shards of %s not sent: %w", sellers(pending), ctx.Err())
		case <-time.After(backoff << (attempt - 1)):
		}
	}
	if len(refused) > 0 {
		return fmt.Errorf("sweepqueue: SQS refused the shards of %s", strings.Join(refused, ", "))
	}
	return nil
}

func sellers(ms map[string]reconcile.ShardMessage) string {
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.Seller)
	}
	return strings.Join(out, ", ")
}

// ParseShard decodes a queue message's body: a reconcile.ShardMessage with its plan and seller,
// and nothing else.
func ParseShard(body []byte) (reconcile.ShardMessage, error) {
	var m reconcile.ShardMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return reconcile.ShardMessage{}, fmt.Errorf("sweepqueue: not a shard message: %w", err)
	}
	if dec.More() {
		return reconcile.ShardMessage{}, errors.New("sweepqueue: not a shard message: data after the object")
	}
	if m.Plan == "" || m.Seller == "" {
		return reconcile.ShardMessage{}, errors.New("sweepqueue: a shard message needs its plan and its seller")
	}
	return m, nil
}

// Handler returns the reconcile function's handler. An SQS event (every record from aws:sqs)
// is a batch of shards: run with shards, its response lists the messages whose shard failed
// or that are no shard at all (events.SQSEventResponse; the mapping reports batch item
// failures), and it never fails as a whole, so one failing shard does not bring its batch
// back. Anything else is the schedule's invocation, handed to plan.
func Handler[S any](plan func(context.Context, json.RawMessage) (S, error),
	shards func(context.Context, []reconcile.ShardMessage) (reconcile.Summary, []error)) func(context.Context, json.RawMessage) (any, error) {
	return func(ctx context.Context, in json.RawMessage) (any, error) {
		ev, ok := sqsEvent(in)
		if !ok {
			return plan(ctx, in)
		}
		resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
		var batch []reconcile.ShardMessage
		var ids []string
		for _, rec := range ev.Records {
			m, err := ParseShard([]byte(rec.Body))
			if err != nil {
				// Sent again until the redrive policy moves it to the dead-letter queue, where
				// an operator sees it: never dropped silently.
				slog.ErrorContext(ctx, "queue message is no shard", "messageId", rec.MessageId, "err", err)
				resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
				continue
			}
			batch = append(batch, m)
			ids = append(ids, rec.MessageId)
		}
		if len(batch) > 0 {
			_, errs := shards(ctx, batch)
			for i, err := range errs {
				if err != nil {
					resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: ids[i]})
				}
			}
		}
		return resp, nil
	}
}

// sqsEvent decodes in as an SQS event: ok when it has records and every one comes from SQS.
func sqsEvent(in json.RawMessage) (events.SQSEvent, bool) {
	var ev events.SQSEvent
	if json.Unmarshal(in, &ev) != nil || len(ev.Records) == 0 {
		return events.SQSEvent{}, false
	}
	for _, r := range ev.Records {
		if r.EventSource != "aws:sqs" {
			return events.SQSEvent{}, false
		}
	}
	return ev, true
}
