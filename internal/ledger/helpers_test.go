package ledger_test

import (
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/clocktest"
	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/ledger"
)

// newStore returns a Store over a fresh table (kumo, or moto in the second run) with a clock
// starting at a fixed instant.
func newStore(t *testing.T) (*ledger.Store, *clocktest.Clock) {
	t.Helper()
	client, table := dynamotest.Start(t)
	// Far in the future: kumo's TTL reaper (real clock, every 30 s) must never delete test items.
	clk := clocktest.At(time.Date(2099, 1, 1, 12, 0, 0, 0, time.UTC))
	s := ledger.New(client, table)
	s.Now = clk.Now
	return s, clk
}
