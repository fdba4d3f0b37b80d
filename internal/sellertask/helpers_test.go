package sellertask_test

import (
	"context"

	"github.com/buyflow/buyflow/internal/workflow"
)

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

// tasksFunc is a function-typed fake task completer.
type tasksFunc func(ctx context.Context, token string, output any) error

func (f tasksFunc) Succeed(ctx context.Context, token string, output any) error {
	return f(ctx, token, output)
}

// completion is one recorded Succeed.
type completion struct {
	Token  string
	Output workflow.SellerOutput
}
