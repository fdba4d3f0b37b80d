package adcp

import (
	"context"
	"encoding/json"
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

// GetMediaBuyDelivery reads delivery (fresh idempotency key).
func (c *Client) GetMediaBuyDelivery(ctx context.Context, agentID string, req GetMediaBuyDeliveryRequest) (*DeliveryReport, error) {
	resp, err := c.Call(ctx, agentID, toolGetMediaBuyDelivery, req)
	if err != nil {
		return nil, err
	}
	var w struct {
		Currency        string `json:"currency"`
		ReportingPeriod struct {
			Start string `json:"start"`
			End   string `json:"end"`
		} `json:"reporting_period"`
		MediaBuyDeliveries []MediaBuyDelivery `json:"media_buy_deliveries"`
	}
	if err := resp.decode(&w, "get_media_buy_delivery", agentID, toolGetMediaBuyDelivery); err != nil {
		return nil, err
	}
	out := &DeliveryReport{Currency: w.Currency, MediaBuys: w.MediaBuyDeliveries, Raw: resp.Body}
	out.ReportingPeriod.Start, out.ReportingPeriod.End = w.ReportingPeriod.Start, w.ReportingPeriod.End
	return out, nil
}
