package adcp

import (
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// FuzzDecodeDeliveryReport feeds pushed delivery reports (a seller's bytes) to the decoder: it
// never panics, refuses with ErrInvalidDeliveryReport, and what it accepts has the fields the
// reader relies on.
func FuzzDecodeDeliveryReport(f *testing.F) {
	f.Add(`{"notification_type":"scheduled","reporting_period":{"start":"2099-03-01T00:00:00Z","end":"2099-03-02T00:00:00Z"},"currency":"USD",` +
		`"media_buy_deliveries":[{"media_buy_id":"mb_1","status":"active","totals":{"impressions":12000,"spend":2999.995},"by_package":[{"package_id":"p","spend":2999.995,"pacing_index":1}]}]}`)
	f.Add(`{"notification_type":"final","reporting_period":{"start":"x","end":"y"},"currency":"USD","media_buy_deliveries":[]}`)
	f.Add(`{"notification_type":"scheduled","reporting_period":{"start":"2099-03-01T00:00:00Z","end":"2099-03-02T00:00:00Z"},"currency":"usd","media_buy_deliveries":[]}`)
	f.Add(`[]`)
	f.Add(`{"media_buy_deliveries":[{"totals":{"spend":"1e99999"}}]}`)
	f.Fuzz(func(t *testing.T, raw string) {
		rep, err := DecodeDeliveryReport(json.RawMessage(raw))
		if err != nil {
			if !errors.Is(err, ErrInvalidDeliveryReport) {
				t.Fatalf("refused with %v, not ErrInvalidDeliveryReport", err)
			}
			return
		}
		if _, err := time.Parse(time.RFC3339, rep.ReportingPeriod.End); err != nil || len(rep.Currency) != 3 || rep.MediaBuys == nil {
			t.Fatalf("accepted %q as %+v", raw, rep)
		}
		for _, row := range rep.MediaBuys {
			if row.MediaBuyID == "" || row.Totals.Spend == "" {
				t.Fatalf("accepted a row without media_buy_id or spend: %+v", row)
			}
		}
	})
}
