package wire

import (
	"testing"

	"github.com/buyflow/buyflow/internal/benchtest"
)

// TestWiringCostsNoInit: every function links this package and what it wires (the
// configuration and its approval policy, the ledger, the metrics). Their package inits run on
// every cold start before main, so they build nothing costly there: the approval policy's
// identity patterns once took 3,200 allocations (~1 ms of CPU) to compile at init.
func TestWiringCostsNoInit(t *testing.T) {
	benchtest.CheckInitAllocs(t, "github.com/buyflow/", benchtest.OwnInitAllocs)
}
