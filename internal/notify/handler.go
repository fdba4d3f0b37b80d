package notify

import (
	"context"
	"encoding/json"

	"github.com/buyflow/buyflow/internal/dispatch"
	"github.com/buyflow/buyflow/internal/workflow"
)

// Handle is the notify Lambda's handler: action "request" runs Request (output {}), "expire"
// runs Expire (output workflow.ApprovalExpiry). A failure is logged with its operation.
func (s *Service) Handle(ctx context.Context, raw json.RawMessage) (any, error) {
	return dispatch.Table{
		workflow.ActionRequest: dispatch.Of(func(ctx context.Context, in workflow.CallbackInput) (struct{}, error) {
			err := s.Request(ctx, in)
			if err != nil {
				s.Log.ErrorContext(ctx, "approval request failed", "operationId", in.OperationID, "err", err)
			}
			return struct{}{}, err
		}),
		workflow.ActionExpire: dispatch.Of(func(ctx context.Context, in workflow.StageInput) (workflow.ApprovalExpiry, error) {
			out, err := s.Expire(ctx, in)
			if err != nil {
				s.Log.ErrorContext(ctx, "approval expiry failed", "operationId", in.OperationID, "err", err)
			}
			return out, err
		}),
	}.Handle(ctx, raw)
}
