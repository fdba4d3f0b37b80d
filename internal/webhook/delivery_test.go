package webhook_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/jsonnum"
	"github.com/buyflow/buyflow/internal/webhook"
)

// docExample is the example payload of adcp:docs/building/by-layer/L3/webhooks.mdx .
const docExample = `{"idempotency_key":"whk_01HW9D3H8FZP2N6R8T0V4X6Z9B","task_id":"task_456",
 "operation_id":"cd51e063-0000-4000-8000-000000000001","task_type":"create_media_buy","status":"completed",
 "timestamp":"2025-01-22T10:30:00Z","message":"Media buy created successfully",
 "result":{"media_buy_id":"mb_12345","packages":[{"package_id":"pkg_001","context":{"line_item":"li_ctv_sports"}}]}}`

func TestParseDelivery(t *testing.T) {
	d, err := webhook.ParseDelivery([]byte(docExample))
	if err != nil {
		t.Fatal(err)
	}
	if d.IdempotencyKey != "whk_01HW9D3H8FZP2N6R8T0V4X6Z9B" || d.TaskID != "task_456" || d.Status != "completed" ||
		!d.Timestamp.Equal(time.Date(2025, 1, 22, 10, 30, 0, 0, time.UTC)) || !strings.Contains(string(d.Result), "mb_12345") {
		t.Fatalf("parsed %+v", d)
	}
	valid := `{"idempotency_key":"k_0123456789abcdef","operation_id":"op-1","task_id":"t","task_type":"create_media_buy","status":"working","timestamp":"2025-01-22T10:30:00.5+02:00"`
	cases := []struct {
		name, body, field string
	}{
		{"short key", strings.Replace(valid, "k_0123456789abcdef", "short", 1) + "}", "idempotency_key"},
		{"key with space", strings.Replace(valid, "k_0123456789abcdef", "k 0123456789abcdef", 1) + "}", "idempotency_key"},
		{"operation id with #", strings.Replace(valid, `"op-1"`, `"op#1"`, 1) + "}", "operation_id"},
		{"no task id", strings.Replace(valid, `"task_id":"t",`, "", 1) + "}", "task_id"},
		{"no task type", strings.Replace(valid, `"task_type":"create_media_buy",`, "", 1) + "}", "task_type"},
		{"no status", strings.Replace(valid, `"status":"working",`, "", 1) + "}", "status"},
		{"no timestamp", strings.Replace(valid, `,"timestamp":"2025-01-22T10:30:00.5+02:00"`, "", 1) + "}", "timestamp"},
		{"date only", strings.Replace(valid, "2025-01-22T10:30:00.5+02:00", "2025-01-22", 1) + "}", "timestamp"},
		{"short token", valid + `,"token":"abc"}`, "token"},
		{"array", `[` + valid + `}]`, "body"},
		{"trailing data", valid + `} {}`, "body"},
		{"wrong type", strings.Replace(valid, `"status":"working"`, `"status":3`, 1) + "}", "body"},
		// encoding/json would keep the second status: a body two readers may read differently.
		{"duplicate key", valid + `,"status":"completed"}`, "body"},
		{"nested duplicate key", valid + `,"result":{"media_buy_id":"a","media_buy_id":"b"}}`, "body"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := webhook.ParseDelivery([]byte(c.body))
			var de *webhook.DeliveryError
			if !errors.As(err, &de) || de.Field != c.field || !errors.Is(err, webhook.ErrInvalidDelivery) {
				t.Fatalf("err = %v, want a DeliveryError on %s", err, c.field)
			}
		})
	}
	d, err = webhook.ParseDelivery([]byte(valid + `,"token":"0123456789abcdef","extra":{"x":1}}`))
	if err != nil || d.Token != "0123456789abcdef" || d.Timestamp.Location() != time.UTC {
		t.Fatalf("valid with token and unknown field: %+v, %v", d, err)
	}
}

// FuzzParseDelivery: ParseDelivery never panics, and what it accepts satisfies the schema's
// patterns the receiver relies on (keys that can go into ledger keys, a bounded token).
func FuzzParseDelivery(f *testing.F) {
	f.Add([]byte(docExample))
	f.Add([]byte(`{"idempotency_key":"k_0123456789abcdef","operation_id":"op-1","task_id":"t","task_type":"create_media_buy","status":"working","timestamp":"2025-01-22T10:30:00Z","token":"0123456789abcdef"}`))
	f.Add([]byte(`{"idempotency_key":"k_0123456789abcdef","operation_id":"op-1","task_id":"t","task_type":"x","status":"failed","timestamp":"2025-01-22T10:30:00Z","result":{"errors":[{"code":"X"}]},"message":"\u00ff"}`))
	// A 3.0 seller's delivery (the official SDK's): no operation_id.
	f.Add([]byte(`{"idempotency_key":"evt_f35b6e21b44749adbd410b3c","task_id":"sync-31aa505f","task_type":"create_media_buy","status":"completed","timestamp":"2026-12-01T08:06:09.354Z","token":"0123456789abcdef","result":{"media_buy_id":"mb_1","status":"pending_creatives"}}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"timestamp":null}`))
	f.Add([]byte(`{"idempotency_key":"` + strings.Repeat("a", 256) + `"}`))
	for _, n := range []string{"1e10000000", "-1e-10000000", "2E9999999"} {
		f.Add([]byte(`{"idempotency_key":"k_0123456789abcdef","operation_id":"op-1","task_id":"t","task_type":"create_media_buy","status":"completed","timestamp":"2025-01-22T10:30:00Z","result":{"packages":[{"budget":` + n + `}]}}`))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		d, err := webhook.ParseDelivery(body)
		if err != nil {
			if d != nil || !errors.Is(err, webhook.ErrInvalidDelivery) {
				t.Fatalf("error %v with delivery %v", err, d)
			}
			return
		}
		var ne *jsonnum.Error
		if errors.As(jsonnum.Check(body), &ne) {
			t.Fatalf("accepted a delivery with %v", ne)
		}
		if len(d.IdempotencyKey) < 16 || len(d.IdempotencyKey) > 255 || (d.OperationID != "" && !webhook.ValidOperationID(d.OperationID)) ||
			strings.Contains(d.IdempotencyKey, "#") || d.TaskID == "" || d.Status == "" || d.TaskType == "" ||
			(d.Token != "" && (len(d.Token) < 16 || len(d.Token) > 4096)) || len(d.Message) > 4096 || d.Timestamp.Location() != time.UTC {
			t.Fatalf("accepted an invalid delivery: %+v", d)
		}
	})
}

// TestParseDeliveryBoundsNumbers: a delivery whose result holds a number the schema library
// panics on is refused at that number, before anything decodes it.
func TestParseDeliveryBoundsNumbers(t *testing.T) {
	for _, n := range []string{"1e10000000", "-1e-10000000", "2E9999999"} {
		body := `{"idempotency_key":"k_0123456789abcdef","operation_id":"op-1","task_id":"t","task_type":"create_media_buy","status":"completed","timestamp":"2025-01-22T10:30:00Z","result":{"packages":[{"budget":` + n + `}]}}`
		_, err := webhook.ParseDelivery([]byte(body))
		var de *webhook.DeliveryError
		if !errors.As(err, &de) || de.Field != "/result/packages/0/budget" || !errors.Is(err, webhook.ErrInvalidDelivery) {
			t.Errorf("%s: err = %v", n, err)
		}
	}
}
