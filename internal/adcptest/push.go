package adcptest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/buyflow/buyflow/internal/webhookauth"
)

// RequestSigner signs an outgoing webhook request over its exact body bytes.
// *webhookauth.RFC9421Signer and *webhookauth.HMACSigner satisfy it.
type RequestSigner interface {
	Sign(req *http.Request, body []byte) error
}

// WebhookFault is a scripted misbehaviour of push-notification delivery.
type WebhookFault string

// Webhook faults; the per-request tokens are the same strings.
const (
	// faultDrop drops the terminal notification (intermediate ones go out).
	faultDrop WebhookFault = "wh_drop"
	// FaultDropAll drops every notification.
	FaultDropAll WebhookFault = "wh_drop_all"
	// faultDuplicate delivers every notification twice with the same
	// idempotency_key.
	faultDuplicate WebhookFault = "wh_duplicate"
	// faultOutOfOrder holds intermediate notifications and delivers them
	// after the terminal one (an older status after a newer one).
	faultOutOfOrder WebhookFault = "wh_out_of_order"
	// faultDelay waits WebhookDelay before each delivery.
	faultDelay WebhookFault = "wh_delay"
	// FaultBadSignature corrupts the signature (or bearer credential).
	FaultBadSignature WebhookFault = "wh_bad_signature"
)

var allFaults = []WebhookFault{faultDrop, FaultDropAll, faultDuplicate, faultOutOfOrder, faultDelay, FaultBadSignature}

// delivery is one recorded webhook POST attempt (or a dropped one).
type delivery struct {
	// TaskID and Status are the task and status the notification reports.
	TaskID, Status string
	// IdempotencyKey is the payload's idempotency_key (stable across retries
	// and duplicates of one notification).
	IdempotencyKey string
	// URL is the push_notification_config.url posted to.
	URL string
	// Attempt counts from 1 for each distinct notification.
	Attempt int
	// StatusCode is the receiver's HTTP status (0 when the request failed or
	// was dropped).
	StatusCode int
	// Err is the transport error, "" otherwise.
	Err string
	// Dropped reports a notification the fault script swallowed.
	Dropped bool
	// Faults lists the faults applied to this delivery.
	Faults []WebhookFault
	// Body is the exact payload bytes sent.
	Body json.RawMessage
	// Header is the request header as sent (signature headers included).
	Header http.Header
	// Time is when the attempt was made (agent clock).
	Time time.Time
}

type webhookEvent struct {
	status  string
	key     string
	notifID string
	body    []byte
}

type pushOptions struct {
	client      *http.Client
	signer      RequestSigner
	faults      []WebhookFault
	delay       time.Duration
	maxAttempts int
	backoff     time.Duration
}

// parsePush reads push_notification_config from the arguments.
func parsePush(args map[string]any) (*PushConfig, *AdcpError) {
	m, ok := args["push_notification_config"].(map[string]any)
	if !ok {
		return nil, nil
	}
	pc := &PushConfig{}
	pc.URL, _ = m["url"].(string)
	pc.OperationID, _ = m["operation_id"].(string)
	pc.Token, _ = m["token"].(string)
	if au, ok := m["authentication"].(map[string]any); ok {
		if l, ok := au["schemes"].([]any); ok && len(l) > 0 {
			pc.Scheme, _ = l[0].(string)
		}
		pc.Credentials, _ = au["credentials"].(string)
	}
	return pc, nil
}

// notifySync posts the completed notification the SDK's sellers send after a synchronous
// success that carried push_notification_config: a task of its own (task_id "sync-<uuid>")
// that no poll knows, with the success body as result.
func (s *Seller) notifySync(c *call, taskType string, pc *PushConfig, body map[string]any) {
	now := s.now()
	t := &Task{ID: "sync-" + uuid.NewString(), Type: taskType, Protocol: "media-buy", Status: "completed",
		CreatedAt: now, UpdatedAt: now, CompletedAt: now, Result: body, Message: "task completed",
		Context: c.fields["context"], Push: pc, owner: c.owner, script: c.script}
	s.notify(t)
}

func (s *Seller) faultsFor(t *Task) map[WebhookFault]bool {
	m := map[WebhookFault]bool{}
	for _, f := range s.push.faults {
		m[f] = true
	}
	for _, f := range allFaults {
		if t.script.has(string(f)) {
			m[f] = true
		}
	}
	return m
}

// notify queues the task's current status as a push notification. Called
// after every status change; tasks without push config are ignored.
func (s *Seller) notify(t *Task) {
	s.mu.Lock()
	if t.Push == nil || t.Status == "submitted" || s.opts.TerminalWebhooks && !terminal(t.Status) {
		s.mu.Unlock()
		return
	}
	t.seq++
	payload := map[string]any{
		"idempotency_key": "whk_" + strings.ReplaceAll(uuid.NewString(), "-", ""),
		"notification_id": fmt.Sprintf("%s.%d", t.ID, t.seq),
		"task_id":         t.ID,
		"task_type":       t.Type,
		"protocol":        t.Protocol,
		"status":          t.Status,
		"timestamp":       s.now().Format(time.RFC3339Nano),
	}
	if t.Push.OperationID != "" {
		payload["operation_id"] = t.Push.OperationID
	}
	if t.Push.Token != "" {
		payload["token"] = t.Push.Token
	}
	if t.Message != "" {
		payload["message"] = t.Message
	}
	switch {
	case t.Result != nil && (terminal(t.Status) || t.Status == "input-required"):
		payload["result"] = t.Result
	case t.Status == "working":
		payload["result"] = map[string]any{"percentage": 50, "current_step": "processing", "total_steps": 2, "step_number": 1}
	}
	if len(t.Context) > 0 {
		payload["context"] = t.Context
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(payload)
	ev := webhookEvent{status: t.Status, key: payload["idempotency_key"].(string), notifID: payload["notification_id"].(string), body: bytes.TrimSpace(buf.Bytes())}
	faults := s.faultsFor(t)
	if faults[faultOutOfOrder] && !terminal(t.Status) {
		t.held = append(t.held, ev)
		s.mu.Unlock()
		return
	}
	t.outbox = append(t.outbox, ev)
	if terminal(t.Status) && len(t.held) > 0 {
		t.outbox = append(t.outbox, t.held...)
		t.held = nil
	}
	start := !t.sending
	t.sending = true
	s.mu.Unlock()
	if start {
		s.wg.Add(1)
		go s.drain(t, faults)
	}
}

// drain delivers the task's outbox in order, one notification at a time.
func (s *Seller) drain(t *Task, faults map[WebhookFault]bool) {
	defer s.wg.Done()
	for {
		s.mu.Lock()
		if len(t.outbox) == 0 {
			t.sending = false
			s.mu.Unlock()
			return
		}
		ev := t.outbox[0]
		t.outbox = t.outbox[1:]
		pc := *t.Push
		s.mu.Unlock()
		s.deliver(t.ID, pc, ev, faults)
	}
}

func (s *Seller) deliver(taskID string, pc PushConfig, ev webhookEvent, faults map[WebhookFault]bool) {
	var applied []WebhookFault
	if faults[FaultDropAll] || faults[faultDrop] && terminal(ev.status) {
		f := faultDrop
		if faults[FaultDropAll] {
			f = FaultDropAll
		}
		s.recordDelivery(delivery{TaskID: taskID, Status: ev.status, IdempotencyKey: ev.key, URL: pc.URL, Dropped: true, Faults: []WebhookFault{f}, Body: ev.body, Time: s.now()})
		return
	}
	if faults[faultDelay] {
		applied = append(applied, faultDelay)
		select {
		case <-time.After(s.push.delay):
		case <-s.closing:
		}
	}
	if faults[FaultBadSignature] {
		applied = append(applied, FaultBadSignature)
	}
	if faults[faultOutOfOrder] && !terminal(ev.status) {
		applied = append(applied, faultOutOfOrder)
	}
	times := 1
	if faults[faultDuplicate] {
		applied = append(applied, faultDuplicate)
		times = 2
	}
	for range times {
		s.send(taskID, pc, ev, applied, faults[FaultBadSignature])
	}
}

// send POSTs one notification, retrying non-2xx (other than 4xx, which
// is terminal except 408 and 429) with doubling backoff up to maxAttempts.
func (s *Seller) send(taskID string, pc PushConfig, ev webhookEvent, applied []WebhookFault, corrupt bool) {
	backoff := s.push.backoff
	for attempt := 1; attempt <= s.push.maxAttempts; attempt++ {
		d := delivery{TaskID: taskID, Status: ev.status, IdempotencyKey: ev.key, URL: pc.URL, Attempt: attempt, Faults: applied, Body: ev.body, Time: s.now()}
		code, hdr, err := s.post(pc, ev.body, corrupt)
		d.StatusCode, d.Header = code, hdr
		if err != nil {
			d.Err = err.Error()
		}
		s.recordDelivery(d)
		if err == nil && code >= 200 && code < 300 {
			return
		}
		if err == nil && code >= 400 && code < 500 && code != http.StatusRequestTimeout && code != http.StatusTooManyRequests {
			return // terminal (a 401 means the receiver refused the signature)
		}
		if attempt == s.push.maxAttempts {
			return
		}
		select {
		case <-time.After(backoff):
		case <-s.closing:
			return
		}
		backoff *= 2
	}
}

func (s *Seller) post(pc PushConfig, body []byte, corrupt bool) (int, http.Header, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() {
		select {
		case <-s.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, pc.URL, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "buyflow-adcptest-seller")
	switch strings.ToUpper(pc.Scheme) {
	case "HMAC-SHA256":
		hs := &webhookauth.HMACSigner{Secret: []byte(pc.Credentials), Now: s.now}
		if err := hs.Sign(req, body); err != nil {
			return 0, nil, fmt.Errorf("sign webhook: %w", err)
		}
	case "BEARER":
		req.Header.Set("Authorization", "Bearer "+pc.Credentials)
	default:
		if s.push.signer != nil {
			if err := s.push.signer.Sign(req, body); err != nil {
				return 0, nil, fmt.Errorf("sign webhook: %w", err)
			}
		}
	}
	if corrupt {
		corruptSignature(req.Header)
	}
	sent := req.Header.Clone()
	resp, err := s.push.client.Do(req)
	if err != nil {
		return 0, sent, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
	return resp.StatusCode, sent, nil
}

// corruptSignature flips one character of whichever credential header is
// present, so the request still looks well formed but fails verification.
func corruptSignature(h http.Header) {
	flip := func(v string, at int) string {
		if at < 0 || at >= len(v) {
			return v
		}
		b := []byte(v)
		if b[at] == 'A' {
			b[at] = 'B'
		} else {
			b[at] = 'A'
		}
		return string(b)
	}
	if v := h.Get("X-ADCP-Signature"); v != "" {
		h.Set("X-ADCP-Signature", flip(v, len(v)-1))
	}
	if v := h.Get("Signature"); v != "" {
		h.Set("Signature", flip(v, len(v)-3)) // inside sig1=:...:
	}
	if v := h.Get("Authorization"); v != "" {
		h.Set("Authorization", flip(v, len(v)-1))
	}
}

// Deliveries returns every recorded webhook delivery attempt in order.
func (s *Seller) Deliveries() []delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]delivery(nil), s.deliveries...)
}

// WaitDeliveries blocks until at least n deliveries are recorded or
// timeout passes, and returns them.
func (s *Seller) WaitDeliveries(n int, timeout time.Duration) []delivery {
	deadline := time.Now().Add(timeout)
	for {
		d := s.Deliveries()
		if len(d) >= n || time.Now().After(deadline) {
			return d
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (s *Seller) recordDelivery(d delivery) {
	s.mu.Lock()
	s.deliveries = append(s.deliveries, d)
	s.mu.Unlock()
}

// Settle waits until the webhooks queued so far are delivered (or given up). The sandbox's
// Lambda handler calls it before it answers: Lambda freezes the environment after a response,
// and a delivery left running would stall until the next invocation. Not for concurrent use
// with calls that queue webhooks.
func (s *Seller) Settle() { s.wg.Wait() }
