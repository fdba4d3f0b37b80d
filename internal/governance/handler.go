package governance

import (
	"context"
	"encoding/json"

	"github.com/buyflow/buyflow/internal/dispatch"
	"github.com/buyflow/buyflow/internal/workflow"
)

// Handle handles the governance function's payload: actions check, report and fail.
func (s *Service) Handle(ctx context.Context, raw json.RawMessage) (any, error) {
	return dispatch.Table{
		workflow.ActionCheck:  dispatch.Of(s.Check),
		workflow.ActionReport: dispatch.Of(s.Report),
		workflow.ActionFail:   dispatch.Of(s.Fail),
	}.Handle(ctx, raw)
}
