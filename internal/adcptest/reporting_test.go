package adcptest

import (
	"encoding/json"
	"net/http"
	"testing"
)

// TestPushDeliveryReport: a seller with PushReporting declares webhook reporting, keeps the
// reporting_webhook a create registers, and posts the buy's delivery there, HMAC-signed with
// the registration's credentials, the envelope and its result valid against the schemas.
func TestPushDeliveryReport(t *testing.T) {
	rcv := newReceiver(t, nil)
	s, cs := startSeller(t, SellerOptions{PushReporting: true})
	caps := callT(t, cs, "get_adcp_capabilities", map[string]any{})
	var c struct {
		MediaBuy struct {
			Methods []string `json:"reporting_delivery_methods"`
		} `json:"media_buy"`
	}
	if err := json.Unmarshal(caps.Raw, &c); err != nil || len(c.MediaBuy.Methods) != 1 || c.MediaBuy.Methods[0] != "webhook" {
		t.Fatalf("capabilities: %s %v", caps.Raw, err)
	}
	args := createArgs("")
	args["reporting_webhook"] = map[string]any{"url": rcv.srv.URL + "/v1/webhooks/adcp/op-r", "token": "tok-0123456789abcdef",
		"authentication": hmacAuth, "reporting_frequency": "daily"}
	id := callT(t, cs, "create_media_buy", args).str("media_buy_id")
	if id == "" {
		t.Fatal("no media buy")
	}
	s.SetDelivered(id, 12000, "2999.995")
	for i, kind := range []string{"scheduled", "final"} {
		if code, err := s.PushDelivery(id, kind); err != nil || code != http.StatusOK {
			t.Fatalf("push %s: %d %v", kind, code, err)
		}
		got := rcv.all()
		if len(got) != i+1 || !verifyHMAC(got[i].header, got[i].body, hmacSecret) {
			t.Fatalf("push %s: %d received, HMAC valid: %v", kind, len(got), len(got) > i && verifyHMAC(got[i].header, got[i].body, hmacSecret))
		}
		mustValidate(t, "core/mcp-webhook-payload.json", got[i].body)
		var p struct {
			TaskType string          `json:"task_type"`
			Token    string          `json:"token"`
			Result   json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal(got[i].body, &p); err != nil || p.TaskType != "media_buy_delivery" || p.Token != "tok-0123456789abcdef" {
			t.Fatalf("push %s: %s", kind, got[i].body)
		}
		mustValidate(t, "media-buy/media-buy-delivery-webhook-result.json", p.Result)
		var r struct {
			Type string `json:"notification_type"`
			Seq  int    `json:"sequence_number"`
			Rows []struct {
				ID     string `json:"media_buy_id"`
				Totals struct {
					Spend json.Number `json:"spend"`
				} `json:"totals"`
			} `json:"media_buy_deliveries"`
		}
		if err := json.Unmarshal(p.Result, &r); err != nil || r.Type != kind || r.Seq != i+1 || len(r.Rows) != 1 || r.Rows[0].ID != id || r.Rows[0].Totals.Spend != "2999.995" {
			t.Fatalf("push %s: result %s", kind, p.Result)
		}
	}
	other := callT(t, cs, "create_media_buy", createArgs("")).str("media_buy_id")
	if _, err := s.PushDelivery(other, "scheduled"); err == nil {
		t.Fatal("pushed for a buy that registered no reporting_webhook")
	}
}
