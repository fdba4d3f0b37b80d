package create

import (
	"context"
	"encoding/json"

	"github.com/buyflow/buyflow/internal/dispatch"
	"github.com/buyflow/buyflow/internal/workflow"
)

// Handle handles the create function's payload: actions create and cancel.
func (s *Service) Handle(ctx context.Context, raw json.RawMessage) (any, error) {
	return dispatch.Table{
		workflow.ActionCreate: dispatch.Of(s.CreateMediaBuy),
		workflow.ActionCancel: dispatch.Of(s.Cancel),
	}.Handle(ctx, raw)
}
