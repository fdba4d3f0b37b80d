package adcptest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
)

// PushDelivery posts mediaBuyID's delivery report (what SetDelivered set) to the
// reporting_webhook its create registered, as a seller with PushReporting does on its reporting
// schedule: a core/mcp-webhook-payload.json envelope of task_type media_buy_delivery whose
// result is media-buy-delivery-webhook-result.json (notificationType "scheduled", "final", ...),
// signed as the registration's authentication says (else by WebhookSigner), retried like task
// webhooks. It returns the receiver's last HTTP status; the attempt is in Deliveries.
func (s *Seller) PushDelivery(mediaBuyID, notificationType string) (int, error) {
	s.mu.Lock()
	mb, ok := s.buys[mediaBuyID]
	if !ok || mb.reporting == nil {
		s.mu.Unlock()
		return 0, fmt.Errorf("adcptest: media buy %s has no reporting_webhook", mediaBuyID)
	}
	mb.reports++
	rows, currency := s.deliveryRows(mb.owner, map[string]bool{mediaBuyID: true})
	pc, seq := *mb.reporting, mb.reports
	start, _ := mb.body["created_at"].(string)
	s.mu.Unlock()
	now := s.now().UTC()
	result := map[string]any{"notification_type": notificationType, "sequence_number": seq, "currency": currency,
		// Totals since the buy began: a report carries the flight so far, so a lost one is
		// repaired by the next.
		"reporting_period":     map[string]any{"start": start, "end": now.Format(time.RFC3339)},
		"media_buy_deliveries": rows}
	if notificationType != "final" {
		result["next_expected_at"] = now.Add(24 * time.Hour).Format(time.RFC3339)
	}
	stream := "rpt_" + strings.TrimPrefix(mediaBuyID, "mb_")
	payload := map[string]any{
		"idempotency_key": "whk_" + strings.ReplaceAll(uuid.NewString(), "-", ""),
		// The reporting stream stands for the task: a reporting_webhook registers no
		// operation_id for the seller to echo.
		"operation_id": stream, "task_id": stream, "task_type": "media_buy_delivery", "protocol": "media-buy",
		"status": "completed", "timestamp": now.Format(time.RFC3339Nano), "result": result,
	}
	if pc.Token != "" {
		payload["token"] = pc.Token
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(payload); err != nil {
		return 0, err
	}
	ev := webhookEvent{status: "completed", key: payload["idempotency_key"].(string), body: bytes.TrimSpace(buf.Bytes())}
	s.send(stream, pc, ev, nil, false)
	code := 0
	for _, d := range s.Deliveries() {
		if d.IdempotencyKey == ev.key {
			code = d.StatusCode
		}
	}
	return code, nil
}
