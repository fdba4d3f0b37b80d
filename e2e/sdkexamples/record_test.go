package sdkexamples

import (
	"encoding/json"
	"net/http"
	"testing"
)

// sellerUpdate is one update_media_buy an example seller's platform ran (deploy.cjs records
// it): what it was asked and what it answered.
type sellerUpdate struct {
	MediaBuyID string `json:"media_buy_id"`
	Canceled   bool   `json:"canceled"`
	Status     string `json:"status"`
	ErrorCode  string `json:"error_code"`
}

// recordedUpdates reads an example seller's record (GET /recorded).
func recordedUpdates(t testing.TB, base string) []sellerUpdate {
	t.Helper()
	resp, err := http.Get(base + "/recorded")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }() // read fully below
	var r struct {
		Updates []sellerUpdate `json:"updates"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	return r.Updates
}
