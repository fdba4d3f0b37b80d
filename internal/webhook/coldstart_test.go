package webhook_test

import (
	"testing"

	"github.com/buyflow/buyflow/internal/benchtest"
)

// TestLinkingTheReceiverCostsNoInit: the webhook function's package inits (this package, the
// HTTP helpers, what they import) run on every cold start before main; the delivery's and the
// Idempotency-Key's patterns once took 10,000 allocations to compile there.
func TestLinkingTheReceiverCostsNoInit(t *testing.T) {
	benchtest.CheckInitAllocs(t, "github.com/buyflow/", benchtest.OwnInitAllocs)
}
