package create

import (
	"context"
	"encoding/json"

	"github.com/buyflow/buyflow/internal/stage"
	"github.com/buyflow/buyflow/internal/workflow"
)

// Handle handles the create function's payload: actions create and cancel.
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
	var in workflow.StageInput
	if err := stage.Decode(raw, &in); err != nil {
		return nil, err
	}
	switch action {
	case workflow.ActionCreate:
		return s.CreateMediaBuy(ctx, in)
	case workflow.ActionCancel:
		return s.Cancel(ctx, in)
	}
	return nil, stage.UnknownAction(action, "create, cancel")
}
