package smoke

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/buyflow/buyflow/internal/statusevent"
)

// SQSEvents reads status events from the sandbox's queue (infra's SandboxEventsQueueUrl
// output), where a rule on the bus sends the events of buys at the sandbox seller: a deployed
// stack's bus seen from a terminal. It speaks SQS's JSON protocol with SigV4 (Sign), so the CLI
// needs no SQS SDK. Every message read is deleted: the queue is the smoke's alone, and one
// smoke runs at a time.
type SQSEvents struct {
	QueueURL string
	// Sign signs a request for service sqs in the queue's region.
	Sign   func(*http.Request, []byte) error
	Client *http.Client

	mu   sync.Mutex
	seen map[string][]statusevent.Event // by operation id, deduplicated on the event id
}

// Of implements Events: it drains what the queue holds now and returns id's events.
func (q *SQSEvents) Of(ctx context.Context, id string) ([]statusevent.Event, error) {
	for range 20 { // bounded: a busy queue still answers within one call's worth
		var out struct {
			Messages []struct {
				Body          string `json:"Body"`
				ReceiptHandle string `json:"ReceiptHandle"`
			} `json:"Messages"`
		}
		if err := q.call(ctx, "ReceiveMessage", map[string]any{"QueueUrl": q.QueueURL, "MaxNumberOfMessages": 10, "WaitTimeSeconds": 1}, &out); err != nil {
			return nil, err
		}
		if len(out.Messages) == 0 {
			break
		}
		for _, m := range out.Messages {
			if ev, err := statusevent.Parse([]byte(m.Body)); err == nil {
				q.add(ev)
			}
			if err := q.call(ctx, "DeleteMessage", map[string]any{"QueueUrl": q.QueueURL, "ReceiptHandle": m.ReceiptHandle}, nil); err != nil {
				return nil, err
			}
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]statusevent.Event(nil), q.seen[id]...), nil
}

func (q *SQSEvents) add(ev statusevent.Event) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.seen == nil {
		q.seen = map[string][]statusevent.Event{}
	}
	evs := q.seen[ev.Detail.OperationID]
	for _, e := range evs {
		if e.Detail.EventID == ev.Detail.EventID {
			return
		}
	}
	evs = append(evs, ev)
	// In sequence order, as a consumer reads them (the queue keeps none).
	for j := len(evs) - 1; j > 0 && evs[j].Detail.Sequence < evs[j-1].Detail.Sequence; j-- {
		evs[j], evs[j-1] = evs[j-1], evs[j]
	}
	q.seen[ev.Detail.OperationID] = evs
}

// call sends one SQS JSON-protocol action to the queue's endpoint.
func (q *SQSEvents) call(ctx context.Context, action string, in map[string]any, out any) error {
	u, err := url.Parse(q.QueueURL)
	if err != nil || u.Host == "" {
		return fmt.Errorf("the events queue URL %q is not a URL", q.QueueURL)
	}
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.Scheme+"://"+u.Host+"/", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", "AmazonSQS."+action)
	if q.Sign != nil {
		if err := q.Sign(req, body); err != nil {
			return fmt.Errorf("sqs %s: %w", action, err)
		}
	}
	hc := q.Client
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("sqs %s: %w", action, err)
	}
	defer func() { _ = resp.Body.Close() }() // read below
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return fmt.Errorf("sqs %s: %w", action, err)
	}
	if resp.StatusCode != http.StatusOK {
		// AWS's error document names the refusal (AccessDenied names the permission).
		return fmt.Errorf("sqs %s: HTTP %d: %s", action, resp.StatusCode, bytes.TrimSpace(b))
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("sqs %s: %w", action, err)
	}
	return nil
}
