// Package e2etest holds the helpers the end-to-end suites (e2e, e2e/sdkseller, e2e/sdkexamples)
// share: the local stack with real sellers as peers, placing a buy and waiting for its end, reading
// a buy's timeline through the API, logging it when a test fails, and random names that keep
// concurrent tests (tenants, idempotency keys, PO numbers) apart.
package e2etest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/apiclient"
)

// RandomID is ten random hex digits.
func RandomID(t testing.TB) string {
	t.Helper()
	b := make([]byte, 5)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// Timeline reads the operation's events.
func Timeline(t testing.TB, c *apiclient.Client, id string) []api.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	evs, err := c.Events(ctx, id)
	if err != nil {
		t.Fatalf("events of %s: %v", id, err)
	}
	return evs
}

// LogTimeline logs the operation's events, one a line, for a test that is about to fail.
func LogTimeline(t testing.TB, c *apiclient.Client, id string) {
	t.Helper()
	for _, e := range Timeline(t, c, id) {
		t.Logf("  %s %-20s %s→%s %s %q %s", e.At, e.Type, e.From, e.To, e.Actor, e.Reason, e.Detail)
	}
}
