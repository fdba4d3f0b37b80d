package sellertask_test

import "github.com/buyflow/buyflow/internal/workflow"

const (
	tenant   = "tenant-1"
	sellerID = "seller-a"
)

// cfg is a run configuration with a 600 s safety-net interval, so that a rebuilt wait state is
// told apart from the default one.
func cfg() workflow.RunConfig {
	c := workflow.DefaultRunConfig()
	c.PollInitialSeconds = 10
	c.PollMaxSeconds = 600
	c.LoopBudget = 50
	return c
}
