package notify

import (
	"context"
	"encoding/json"

	"github.com/buyflow/buyflow/internal/workflow"
)

// Notify is the notify Lambda's handler: it reads the payload's action and runs Request
// ("request", output {}) or Expire ("expire", output workflow.ApprovalExpiry). Errors are
// returned bare through workflow.TaskError, so their type names match the state machine's
// ErrorEquals.
func (s *Service) Notify(ctx context.Context, payload json.RawMessage) (any, error) {
	var head struct {
		Action workflow.Action `json:"action"`
	}
	if err := json.Unmarshal(payload, &head); err != nil {
		return nil, &workflow.InvalidInputError{Field: "payload", Reason: "is not a JSON object"}
	}
	switch head.Action {
	case workflow.ActionRequest:
		var in workflow.CallbackInput
		if err := json.Unmarshal(payload, &in); err != nil {
			return nil, &workflow.InvalidInputError{Field: "payload", Reason: "does not match the request input"}
		}
		if err := s.Request(ctx, in); err != nil {
			s.Log.ErrorContext(ctx, "approval request failed", "operationId", in.OperationID, "err", err)
			return nil, workflow.TaskError(err)
		}
		return struct{}{}, nil
	case workflow.ActionExpire:
		var in workflow.StageInput
		if err := json.Unmarshal(payload, &in); err != nil {
			return nil, &workflow.InvalidInputError{Field: "payload", Reason: "does not match the expire input"}
		}
		out, err := s.Expire(ctx, in)
		if err != nil {
			s.Log.ErrorContext(ctx, "approval expiry failed", "operationId", in.OperationID, "err", err)
			return nil, workflow.TaskError(err)
		}
		return out, nil
	default:
		return nil, &workflow.InvalidInputError{Field: "action", Reason: `must be "request" or "expire"`}
	}
}
