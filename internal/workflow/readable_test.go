package workflow_test

import (
	"testing"

	"github.com/buyflow/buyflow/internal/workflow"
)

func TestReadableFailureUnwrapsTheLambdaEnvelope(t *testing.T) {
	tests := []struct {
		name string
		in   workflow.StepError
		want workflow.StepError
	}{
		{"aws lambda error", workflow.StepError{Error: "TerminalError", Cause: `{"errorMessage":"terminal: PRODUCT_UNAVAILABLE: the product is sold out","errorType":"TerminalError"}`},
			workflow.StepError{Error: "TerminalError", Cause: "terminal: PRODUCT_UNAVAILABLE: the product is sold out"}},
		{"emulator prefix and States.TaskFailed", workflow.StepError{Error: "States.TaskFailed", Cause: `lambda invoke: unexpected status 500: {"errorMessage":"terminal: rejected by seller","errorType":"TerminalError"}`},
			workflow.StepError{Error: "TerminalError", Cause: "terminal: rejected by seller"}},
		{"a fail state's own words stay", workflow.StepError{Error: "GovernanceDenied", Cause: "governance denied the buy: budget over plan"},
			workflow.StepError{Error: "GovernanceDenied", Cause: "governance denied the buy: budget over plan"}},
		{"timeouts keep their name", workflow.StepError{Error: "States.Timeout", Cause: `{"errorMessage":"x","errorType":"TransientError"}`},
			workflow.StepError{Error: "States.Timeout", Cause: "x"}},
		{"unparsable json stays", workflow.StepError{Error: "States.TaskFailed", Cause: "oops {not json"},
			workflow.StepError{Error: "States.TaskFailed", Cause: "oops {not json"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.in.Readable(); got != tt.want {
				t.Fatalf("Readable = %+v, want %+v", got, tt.want)
			}
		})
	}
}
