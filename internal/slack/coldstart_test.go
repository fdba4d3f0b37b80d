package slack_test

import (
	"testing"

	"github.com/buyflow/buyflow/internal/benchtest"
)

// TestLinkingSlackCostsNoInit: the package inits of the approval messages' package (approve, campaign, inform, notify and submit link it): its Slack user id pattern once took 207 allocations there, on every cold start before main.
func TestLinkingSlackCostsNoInit(t *testing.T) {
	benchtest.CheckInitAllocs(t, "github.com/buyflow/", benchtest.OwnInitAllocs)
}
