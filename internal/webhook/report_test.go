package webhook_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/delivery"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/webhook"
)

// report is a pushed delivery report (media_buy_delivery, media-buy-delivery-webhook-result.json)
// for the operation id's buy mb, under the idempotency key, for the period up to hour.
func report(id, mb, key string, hour int, spend string, impressions int) map[string]any {
	end := fmt.Sprintf("2099-01-01T%02d:00:00Z", hour) // the end of the reported period
	return map[string]any{"idempotency_key": key, "operation_id": "rpt-stream-" + mb, "task_id": "rpt-" + mb, "task_type": "media_buy_delivery",
		"status": "completed", "timestamp": "2099-01-01T12:00:00Z", "token": token(id),
		"result": map[string]any{"notification_type": "scheduled", "sequence_number": 1, "currency": "USD",
			"reporting_period": map[string]any{"start": "2099-01-01T00:00:00Z", "end": end},
			"media_buy_deliveries": []any{map[string]any{"media_buy_id": mb, "status": "active",
				"totals":     map[string]any{"impressions": impressions, "spend": spend},
				"by_package": []any{map[string]any{"package_id": "pkg-1", "spend": spend, "pacing_index": 1}}}}}}
}

// TestPushedDeliveryReports posts the delivery reports a seller pushes to its buy's
// reporting_webhook through the task webhooks' route: verified (the seller's HMAC, the
// operation's token), deduplicated by its snapshot without a receipt of its own (a retry
// records nothing twice and is answered a duplicate), a snapshot only when the delivery moved,
// the buy marked pushed; a malformed report or a wrong token is refused with nothing stored.
func TestPushedDeliveryReports(t *testing.T) {
	e := newEnvWith(t, func(c *webhook.Config) {
		c.Reports = delivery.New(c.Ledger.(delivery.Store), nil, delivery.Config{Now: c.Now})
	})
	e.syncOp("op-r", sellerHMAC, "mb-r")
	snapshots := func() int {
		t.Helper()
		s, err := e.store.ListDeliverySnapshots(e.ctx, tenant, "op-r", 10)
		if err != nil {
			t.Fatal(err)
		}
		return len(s)
	}
	post := func(what string, p map[string]any, status int, want webhook.Outcome, snaps int) {
		t.Helper()
		resp := e.deliver("op-r", sellerHMAC, p, signOpts{})
		if resp.StatusCode != status || status == http.StatusOK && outcome(t, resp) != want {
			t.Fatalf("%s: %d %s; want %d %s", what, resp.StatusCode, resp.Body, status, want)
		}
		if n := snapshots(); n != snaps {
			t.Fatalf("%s: %d snapshots, want %d", what, n, snaps)
		}
	}
	post("the first report", report("op-r", "mb-r", key("r1"), 1, "50.5", 1000), http.StatusOK, webhook.OutcomeReported, 1)
	if !e.get("op-r").DeliveryPushed {
		t.Fatal("the buy is not marked pushed after its first report")
	}
	if e.hasReceipt(sellerHMAC, key("r1")) {
		t.Fatal("a report wrote a receipt: its snapshot is its receipt")
	}
	post("its retry", report("op-r", "mb-r", key("r1"), 1, "50.5", 1000), http.StatusOK, webhook.OutcomeDuplicate, 1)
	post("the next report, nothing moved", report("op-r", "mb-r", key("r2"), 2, "50.50", 1000), http.StatusOK, webhook.OutcomeReported, 1)
	post("a report that moved", report("op-r", "mb-r", key("r3"), 3, "75", 1500), http.StatusOK, webhook.OutcomeReported, 2)
	post("a report about another buy only", report("op-r", "mb-other", key("r4"), 4, "99", 9), http.StatusOK, webhook.OutcomeReported, 2)

	bad := report("op-r", "mb-r", key("r5"), 5, "80", 1600)
	bad["result"].(map[string]any)["currency"] = "usd"
	post("a malformed report", bad, http.StatusBadRequest, "", 2)
	if e.hasReceipt(sellerHMAC, key("r5")) {
		t.Fatal("a refused report left a receipt")
	}
	wrong := report("op-r", "mb-r", key("r6"), 6, "80", 1600)
	wrong["token"] = "tok-of-someone-else-0123"
	post("a wrong token", wrong, http.StatusForbidden, "", 2)

	// A canceled buy's reports are recorded still: what it delivered up to the cancellation is
	// what the seller bills, and its final report comes after it.
	if _, err := e.store.BeginChange(e.ctx, record.BuyState{Tenant: tenant, OperationID: "op-r", MediaBuyID: "mb-r", State: record.BuyStateActive,
		BudgetTotal: "100.00", Currency: "USD"}, "chg-cancel", "cancel", e.clock.Now().Add(time.Hour), record.Event{Type: record.EventModificationRequested}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.ApplyChange(e.ctx, record.BuyState{Tenant: tenant, OperationID: "op-r", MediaBuyID: "mb-r", Revision: 2,
		State: record.BuyStateCanceled, BudgetTotal: "100.00", Currency: "USD"}, "chg-cancel", record.Event{Type: record.EventModificationApplied}); err != nil {
		t.Fatal(err)
	}
	final := report("op-r", "mb-r", key("r7"), 7, "81", 1620)
	final["result"].(map[string]any)["media_buy_deliveries"].([]any)[0].(map[string]any)["status"] = "canceled"
	post("the canceled buy's final report", final, http.StatusOK, webhook.OutcomeReported, 3)
}

// A pushed report keeps AdCP 3.2's retry rules without a receipt: the same key with other
// figures is a 409 for a seller that speaks only 3.2 (nothing recorded), and a duplicate for
// one that also speaks 3.1, as a task update's redelivery is (TestDifferentPayloadUnderOneKey).
func TestPushedReportUnderAKeyWithOtherFigures(t *testing.T) {
	for _, tc := range []struct {
		name   string
		speaks []string
		status int
		want   webhook.Outcome
	}{
		{"a 3.2 seller gets 409", []string{"3.2"}, http.StatusConflict, ""},
		{"a seller that also speaks 3.1 is deduplicated by the key", []string{"3.1", "3.2"}, http.StatusOK, webhook.OutcomeDuplicate},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnvWith(t, func(c *webhook.Config) {
				c.Reports = delivery.New(c.Ledger.(delivery.Store), nil, delivery.Config{Now: c.Now})
				c.Registry = versions{sellerHMAC: tc.speaks}
			})
			e.syncOp("op-r", sellerHMAC, "mb-r")
			if resp := e.deliver("op-r", sellerHMAC, report("op-r", "mb-r", key("r1"), 1, "50.5", 1000), signOpts{}); outcome(t, resp) != webhook.OutcomeReported {
				t.Fatalf("first report = %d %s", resp.StatusCode, resp.Body)
			}
			resp := e.deliver("op-r", sellerHMAC, report("op-r", "mb-r", key("r1"), 1, "60", 1200), signOpts{})
			if resp.StatusCode != tc.status || strings.Contains(resp.Body, "idempotency_conflict") != (tc.status == http.StatusConflict) ||
				tc.want != "" && outcome(t, resp) != tc.want {
				t.Fatalf("same key, other figures = %d %s, want %d %s", resp.StatusCode, resp.Body, tc.status, tc.want)
			}
			snaps, err := e.store.ListDeliverySnapshots(e.ctx, tenant, "op-r", 10)
			if err != nil || len(snaps) != 1 || snaps[0].Spend != "50.5" {
				t.Fatalf("snapshots %+v %v: the second payload was recorded", snaps, err)
			}
		})
	}
}
