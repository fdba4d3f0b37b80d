package statusevent_test

import (
	"testing"

	"github.com/buyflow/buyflow/internal/benchtest"
)

// TestLinkingStatusEventsCostsNoInit: the package inits of the status events' package (seven functions link it, the webhook among them): its Slack id pattern once took 307 allocations there, on every cold start before main.
func TestLinkingStatusEventsCostsNoInit(t *testing.T) {
	benchtest.CheckInitAllocs(t, "github.com/buyflow/", benchtest.OwnInitAllocs)
}
