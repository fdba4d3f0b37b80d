package poll

import (
	"context"
	"encoding/json"

	"github.com/buyflow/buyflow/internal/dispatch"
	"github.com/buyflow/buyflow/internal/workflow"
)

// Handle handles the poll function's payload: actions park and poll.
func (s *Service) Handle(ctx context.Context, raw json.RawMessage) (any, error) {
	return dispatch.Table{
		workflow.ActionPark: dispatch.Of(func(ctx context.Context, in workflow.CallbackInput) (map[string]bool, error) {
			// The Lambda's own result is ignored by a waitForTaskToken state.
			return map[string]bool{"parked": true}, s.Park(ctx, in)
		}),
		workflow.ActionPoll: dispatch.Of(s.PollSeller),
	}.Handle(ctx, raw)
}
