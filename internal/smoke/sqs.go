package smoke

import (
	"context"
	"net/http"
	"sync"

	"github.com/buyflow/buyflow/internal/sqsjson"
	"github.com/buyflow/buyflow/internal/statusevent"
)

// SQSEvents reads status events from the sandbox's queue (infra's SandboxEventsQueueUrl
// output), where a rule on the bus sends the events of buys at the sandbox seller: a deployed
// stack's bus seen from a terminal. It speaks SQS's JSON protocol with SigV4 (Sign; internal/sqsjson),
// so the CLI needs no SQS SDK. Every message read is deleted: the queue is the smoke's alone, and one
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
	return (&sqsjson.Client{Sign: q.Sign, HTTP: q.Client}).Call(ctx, q.QueueURL, action, in, out)
}
