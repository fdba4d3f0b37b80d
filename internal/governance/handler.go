package governance

import (
	"context"
	"encoding/json"

	"github.com/buyflow/buyflow/internal/stage"
	"github.com/buyflow/buyflow/internal/workflow"
)

// Handle handles the governance function's payload: actions check, report and fail.
// Errors come back bare (workflow.TaskError), so the ASL's ErrorEquals match them.
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
	case workflow.ActionCheck:
		var in workflow.StageInput
		if err := stage.Decode(raw, &in); err != nil {
			return nil, err
		}
		return s.Check(ctx, in)
	case workflow.ActionReport:
		var in workflow.OutcomeInput
		if err := stage.Decode(raw, &in); err != nil {
			return nil, err
		}
		return s.Report(ctx, in)
	case workflow.ActionFail:
		var in workflow.OutcomeInput
		if err := stage.Decode(raw, &in); err != nil {
			return nil, err
		}
		return s.Fail(ctx, in)
	}
	return nil, stage.UnknownAction(action, "check, report, fail")
}
