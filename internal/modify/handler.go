package modify

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/buyflow/buyflow/internal/workflow"
)

// Handle is the modify function's handler: the state machine's payload names the action.
// Errors are returned bare and typed (workflow.TaskError) so that Retry and Catch match them.
func (s *Service) Handle(ctx context.Context, raw json.RawMessage) (any, error) {
	out, err := s.handle(ctx, raw)
	if err != nil {
		return nil, workflow.TaskError(err)
	}
	return out, nil
}

func (s *Service) handle(ctx context.Context, raw json.RawMessage) (any, error) {
	var head struct {
		Action workflow.Action `json:"action"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return nil, &workflow.InvalidInputError{Field: "payload", Reason: "not a JSON object: " + err.Error()}
	}
	switch head.Action {
	case workflow.ActionFailChange:
		var in workflow.OutcomeInput
		if err := json.Unmarshal(raw, &in); err != nil {
			return nil, &workflow.InvalidInputError{Field: "payload", Reason: err.Error()}
		}
		return s.Fail(ctx, in)
	case workflow.ActionCheckChange, workflow.ActionUpdate, workflow.ActionApply:
	default:
		return nil, &workflow.InvalidInputError{Field: "action", Reason: fmt.Sprintf("%q is not one of %s, %s, %s, %s", head.Action,
			workflow.ActionCheckChange, workflow.ActionUpdate, workflow.ActionApply, workflow.ActionFailChange)}
	}
	var in workflow.StageInput
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, &workflow.InvalidInputError{Field: "payload", Reason: err.Error()}
	}
	if in.Tenant == "" || in.OperationID == "" {
		return nil, &workflow.InvalidInputError{Field: "operation_id", Reason: "operation_id and tenant are required"}
	}
	switch head.Action {
	case workflow.ActionCheckChange:
		return s.Check(ctx, in)
	case workflow.ActionUpdate:
		return s.Update(ctx, in)
	default:
		return s.Apply(ctx, in)
	}
}
