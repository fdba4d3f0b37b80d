package adcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"
)

// toolGetMediaBuyDelivery reads what live media buys delivered. The AdCP 3.1.19 release ships
// no request or response schema for it (its compliance storyboards name
// media-buy/get-media-buy-delivery-request.json, which the release lacks), so its requests are
// not schema-checked; the per-buy rows follow media-buy-delivery-webhook-result.json's
// media_buy_deliveries, which the same report carries when it is pushed.
const toolGetMediaBuyDelivery = "get_media_buy_delivery"

// GetMediaBuyDeliveryRequest is the request the compliance storyboards send.
type GetMediaBuyDeliveryRequest struct {
	Account     *AccountRef     `json:"account,omitempty"`
	MediaBuyIDs []string        `json:"media_buy_ids,omitempty"`
	StartDate   string          `json:"start_date,omitempty"`
	EndDate     string          `json:"end_date,omitempty"`
	Context     json.RawMessage `json:"context,omitempty"`
}

// MediaBuyDelivery is one buy's row of a delivery report. Spend stays the seller's number
// literal: a seller may report fractions of a minor unit (CPM arithmetic), and buyflow keeps
// what it was told.
type MediaBuyDelivery struct {
	MediaBuyID string `json:"media_buy_id"`
	Status     string `json:"status"`
	Totals     struct {
		Impressions json.Number `json:"impressions"`
		Spend       json.Number `json:"spend"`
	} `json:"totals"`
	ByPackage []struct {
		PackageID   string      `json:"package_id"`
		Spend       json.Number `json:"spend"`
		PacingIndex json.Number `json:"pacing_index"`
	} `json:"by_package"`
}

// DeliveryReport is a decoded get_media_buy_delivery answer.
type DeliveryReport struct {
	Currency        string
	ReportingPeriod struct {
		Start string `json:"start"`
		End   string `json:"end"`
	}
	MediaBuys []MediaBuyDelivery
	Raw       json.RawMessage
}

// deliveryWire is a delivery report as it travels: get_media_buy_delivery's answer, and the
// result of a pushed media_buy_delivery webhook (media-buy-delivery-webhook-result.json).
type deliveryWire struct {
	Currency        string `json:"currency"`
	ReportingPeriod struct {
		Start string `json:"start"`
		End   string `json:"end"`
	} `json:"reporting_period"`
	MediaBuyDeliveries []MediaBuyDelivery `json:"media_buy_deliveries"`
}

func (w *deliveryWire) report(raw json.RawMessage) *DeliveryReport {
	out := &DeliveryReport{Currency: w.Currency, MediaBuys: w.MediaBuyDeliveries, Raw: raw}
	out.ReportingPeriod.Start, out.ReportingPeriod.End = w.ReportingPeriod.Start, w.ReportingPeriod.End
	return out
}

// GetMediaBuyDelivery reads delivery (fresh idempotency key).
func (c *Client) GetMediaBuyDelivery(ctx context.Context, agentID string, req GetMediaBuyDeliveryRequest) (*DeliveryReport, error) {
	resp, err := c.Call(ctx, agentID, toolGetMediaBuyDelivery, req)
	if err != nil {
		return nil, err
	}
	var w deliveryWire
	if err := resp.decode(&w, "get_media_buy_delivery", agentID, toolGetMediaBuyDelivery); err != nil {
		return nil, err
	}
	return w.report(resp.Body), nil
}

// ErrInvalidDeliveryReport reports a pushed delivery report that breaks
// media-buy-delivery-webhook-result.json's rules buyflow relies on.
var ErrInvalidDeliveryReport = errors.New("adcp: invalid delivery report")

// DecodeDeliveryReport decodes the result of a pushed delivery report (a reporting_webhook's
// media_buy_delivery webhook, media-buy-delivery-webhook-result.json) and checks what the
// schema requires of the fields buyflow reads: a notification type, the reporting period's
// start and end as date-times, an ISO 4217 currency, and each row's media_buy_id, status and
// totals.spend. A row may report for other buys; the reader picks its own.
func DecodeDeliveryReport(raw json.RawMessage) (*DeliveryReport, error) {
	var w struct {
		deliveryWire
		NotificationType string `json:"notification_type"`
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidDeliveryReport, fmt.Sprintf(format, a...))
	}
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, bad("not a JSON object of the report's shape")
	}
	switch w.NotificationType {
	case "scheduled", "final", "delayed", "adjusted", "window_update":
	default:
		return nil, bad("notification_type %q is none of scheduled, final, delayed, adjusted, window_update", clip(w.NotificationType, 64))
	}
	for _, t := range []string{w.ReportingPeriod.Start, w.ReportingPeriod.End} {
		if _, err := time.Parse(time.RFC3339, t); err != nil {
			return nil, bad("reporting_period needs start and end as date-times, not %q", clip(t, 64))
		}
	}
	if !currencyPattern.MatchString(w.Currency) {
		return nil, bad("currency %q is not an ISO 4217 code", clip(w.Currency, 64))
	}
	if w.MediaBuyDeliveries == nil {
		return nil, bad("media_buy_deliveries is missing")
	}
	for i, row := range w.MediaBuyDeliveries {
		if row.MediaBuyID == "" || row.Status == "" || row.Totals.Spend == "" {
			return nil, bad("media_buy_deliveries[%d] needs media_buy_id, status and totals.spend", i)
		}
	}
	return w.report(raw), nil
}

// currencyPattern is the schema's ISO 4217 pattern.
var currencyPattern = regexp.MustCompile(`^[A-Z]{3}$`)
