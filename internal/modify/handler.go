package modify

import (
	"context"
	"encoding/json"

	"github.com/buyflow/buyflow/internal/dispatch"
	"github.com/buyflow/buyflow/internal/workflow"
)

// Handle is the modify function's handler: actions check_change, update, apply and
// fail_change.
func (s *Service) Handle(ctx context.Context, raw json.RawMessage) (any, error) {
	return dispatch.Table{
		workflow.ActionCheckChange: dispatch.Of(named(s.Check)),
		workflow.ActionUpdate:      dispatch.Of(named(s.Update)),
		workflow.ActionApply:       dispatch.Of(named(s.Apply)),
		workflow.ActionFailChange:  dispatch.Of(s.Fail),
	}.Handle(ctx, raw)
}

// named refuses a stage input that does not name the operation and its tenant.
func named[Out any](fn func(context.Context, workflow.StageInput) (Out, error)) func(context.Context, workflow.StageInput) (Out, error) {
	return func(ctx context.Context, in workflow.StageInput) (Out, error) {
		if in.Tenant == "" || in.OperationID == "" {
			var zero Out
			return zero, &workflow.InvalidInputError{Field: "operation_id", Reason: "operation_id and tenant are required"}
		}
		return fn(ctx, in)
	}
}
