package devstack

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"

	"github.com/buyflow/buyflow/internal/statusevent"
	"github.com/buyflow/buyflow/internal/topology"
)

// EventSink receives what the status event bus delivers to the local stack's own rule (every
// event whose source is buyflow), as a cloud team's rule target would. It keeps the last
// maxSinkEvents events and the last maxSinkMalformed malformed deliveries: a stack that runs for
// days must not keep every event it was ever sent (docs/local-stack.md#memory).
type EventSink struct {
	mu     sync.Mutex
	max    int
	events []statusevent.Event
	bad    [][]byte
	notify chan struct{}
}

// maxSinkEvents is how many status events the local stack's sink keeps, the newest: a buy
// publishes about five, so those of the last 2,000 buys or so.
const maxSinkEvents = 10000

// maxSinkMalformed is how many malformed deliveries the sink keeps (each up to 256 KB).
const maxSinkMalformed = 100

func newEventSink(max int) *EventSink { return &EventSink{max: max, notify: make(chan struct{}, 1)} }

// ServeHTTP takes one delivery (EventBridge's API destination POSTs the event envelope); a
// GET ?operation_id=<id> answers that operation's events (Of) as a JSON array, which is how
// `buyflow smoke --events` sees the bus from outside the stack's process.
func (s *EventSink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		id := r.URL.Query().Get("operation_id")
		if id == "" {
			http.Error(w, "operation_id is required", http.StatusBadRequest)
			return
		}
		evs := s.Of(id)
		if evs == nil {
			evs = []statusevent.Event{}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(evs) // a reader that went away
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, statusevent.MaxEventBytes+1))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ev, err := statusevent.Parse(body)
	s.mu.Lock()
	if err != nil {
		s.bad = appendBounded(s.bad, body, maxSinkMalformed)
	} else {
		s.events = appendBounded(s.events, ev, s.max)
	}
	s.mu.Unlock()
	select {
	case s.notify <- struct{}{}:
	default:
	}
	w.WriteHeader(http.StatusNoContent)
}

// Events returns the status events received (the last maxSinkEvents), in arrival order
// (EventBridge keeps none: order one operation's by Detail.Sequence).
func (s *EventSink) Events() []statusevent.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]statusevent.Event(nil), s.events...)
}

// Malformed returns the deliveries that were not status events (the last 100).
func (s *EventSink) Malformed() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.bad...)
}

// Of returns the events of one operation (or campaign), deduplicated on the event id (as a
// consumer does: delivery is at least once) and ordered by sequence.
func (s *EventSink) Of(id string) []statusevent.Event {
	seen := map[string]bool{}
	var out []statusevent.Event
	for _, ev := range s.Events() {
		if ev.Detail.OperationID == id && !seen[ev.Detail.EventID] {
			seen[ev.Detail.EventID] = true
			out = append(out, ev)
		}
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].Detail.Sequence < out[j-1].Detail.Sequence; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// WaitFor waits until done holds for what was received, or ctx ends.
func (s *EventSink) WaitFor(ctx context.Context, done func([]statusevent.Event) bool) error {
	for {
		if done(s.Events()) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("devstack: waiting for status events: %w", ctx.Err())
		case <-s.notify:
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// createEventBus creates the status event bus in kumo and the local stack's rule that sends
// every buyflow event to sinkURL (an API destination: kumo delivers it over HTTP).
func createEventBus(ctx context.Context, eb *eventbridge.Client, bus, sinkURL string) error {
	if _, err := eb.CreateEventBus(ctx, &eventbridge.CreateEventBusInput{Name: aws.String(bus)}); err != nil {
		return fmt.Errorf("devstack: create event bus: %w", err)
	}
	dest, err := eb.CreateApiDestination(ctx, &eventbridge.CreateApiDestinationInput{
		Name: aws.String(bus + "-sink"), InvocationEndpoint: aws.String(sinkURL), HttpMethod: ebtypes.ApiDestinationHttpMethodPost,
		// kumo checks no connection; AWS would need one for the endpoint's authorization.
		ConnectionArn: aws.String("arn:aws:events:" + region + ":000000000000:connection/" + bus + "-sink/local"),
	})
	if err != nil {
		return fmt.Errorf("devstack: create the event sink's destination: %w", err)
	}
	if _, err := eb.PutRule(ctx, &eventbridge.PutRuleInput{
		Name: aws.String("local-event-sink"), EventBusName: aws.String(bus),
		EventPattern: aws.String(`{"source":["` + statusevent.Source + `"]}`),
	}); err != nil {
		return fmt.Errorf("devstack: create the event sink's rule: %w", err)
	}
	if _, err := eb.PutTargets(ctx, &eventbridge.PutTargetsInput{
		Rule: aws.String("local-event-sink"), EventBusName: aws.String(bus),
		Targets: []ebtypes.Target{{Id: aws.String("sink"), Arn: dest.ApiDestinationArn}},
	}); err != nil {
		return fmt.Errorf("devstack: target the event sink: %w", err)
	}
	return nil
}

// invokeFunction calls a function synchronously through the proxy, as Lambda's pollers do,
// and reports a function error as Lambda's API does (a 200 with X-Amz-Function-Error).
func (st *Stack) invokeFunction(ctx context.Context, fn string, payload []byte) (bool, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, st.EmulatorURL+"/2015-03-31/functions/"+fn+"/invocations", bytes.NewReader(payload))
	if err != nil {
		return false, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(statesCallerHeader, "ledger-stream")
	resp, err := st.rest.http.Do(req)
	if err != nil {
		return false, nil, err
	}
	defer discard(resp)
	out, err := io.ReadAll(io.LimitReader(resp.Body, MaxInvokePayload))
	if err != nil {
		return false, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return false, nil, fmt.Errorf("invoke %s: %s: %s", fn, resp.Status, bytes.TrimSpace(out))
	}
	return resp.Header.Get("X-Amz-Function-Error") != "", out, nil
}

// createRequesterRule creates the status event bus's rule that invokes the requester notifier
// (topology's RequesterRule pattern), as the CDK stack does; kumo invokes it asynchronously.
func createRequesterRule(ctx context.Context, eb *eventbridge.Client, bus string, arns map[string]string) error {
	for _, f := range topology.App.Functions {
		if !f.ConsumesStatusEvents {
			continue
		}
		name := "requester-notifications"
		if _, err := eb.PutRule(ctx, &eventbridge.PutRuleInput{
			Name: aws.String(name), EventBusName: aws.String(bus), EventPattern: aws.String(topology.App.RequesterRule),
		}); err != nil {
			return fmt.Errorf("devstack: create the requester rule: %w", err)
		}
		if _, err := eb.PutTargets(ctx, &eventbridge.PutTargetsInput{
			Rule: aws.String(name), EventBusName: aws.String(bus),
			Targets: []ebtypes.Target{{Id: aws.String(f.Name), Arn: aws.String(arns[f.Name])}},
		}); err != nil {
			return fmt.Errorf("devstack: target the requester notifier: %w", err)
		}
	}
	return nil
}
