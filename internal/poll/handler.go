package poll

import (
	"context"
	"encoding/json"

	"github.com/buyflow/buyflow/internal/stage"
	"github.com/buyflow/buyflow/internal/workflow"
)

// Handle handles the poll function's payload: actions park and poll.
func (s *Service) Handle(ctx context.Context, raw json.RawMessage) (any, error) {
	out, err := s.handle(ctx, raw)
	if err != nil {
		return nil, workflow.TaskError(err)
	}
	return out, nil
}

func (s *Service) handle(ctx context.Context, raw json.RawMessage) (any, error) {
	action, err := stage.ActionOf(raw)
	if err != nil {
		return nil, err
	}
	switch action {
	case workflow.ActionPark:
		var in workflow.CallbackInput
		if err := stage.Decode(raw, &in); err != nil {
			return nil, err
		}
		if err := s.Park(ctx, in); err != nil {
			return nil, err
		}
		// The Lambda's own result is ignored by a waitForTaskToken state.
		return map[string]bool{"parked": true}, nil
	case workflow.ActionPoll:
		var in workflow.PollInput
		if err := stage.Decode(raw, &in); err != nil {
			return nil, err
		}
		return s.PollSeller(ctx, in)
	}
	return nil, stage.UnknownAction(action, "park, poll")
}
