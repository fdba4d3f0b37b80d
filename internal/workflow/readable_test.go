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

// Every reason a person reads is a sentence: an engine's error name never reaches it.
func TestSentenceNeverNamesTheEngine(t *testing.T) {
	tests := []struct {
		name string
		in   workflow.StepError
		want string
	}{
		{"approval expired (kumo repeats the name)", workflow.StepError{Error: "States.Timeout", Cause: "States.Timeout"},
			"a step did not finish within its time limit"},
		{"timeout with no cause (AWS)", workflow.StepError{Error: "States.Timeout"}, "a step did not finish within its time limit"},
		{"timeout with AWS's explanation", workflow.StepError{Error: "States.Timeout", Cause: "The task did not finish in time"},
			"a step did not finish within its time limit (The task did not finish in time)"},
		{"runtime fault keeps AWS's explanation", workflow.StepError{Error: "States.Runtime", Cause: "An error occurred while executing the state 'X'. The JSONPath '$.y' could not be found in the input '{}'"},
			"the workflow could not run a step (a fault in buyflow, not in the request) (An error occurred while executing the state 'X'. The JSONPath '$.y' could not be found in the input '{}')"},
		{"lambda fault whose cause names it", workflow.StepError{Error: "Lambda.ServiceException", Cause: "Lambda.ServiceException: Internal error (Status Code: 500)"},
			"AWS Lambda failed while running a step, and every retry failed too"},
		{"a crashed function, through the envelope", workflow.StepError{Error: "States.TaskFailed", Cause: `{"errorType":"Runtime.ExitError","errorMessage":"RequestId: r1 Error: Runtime exited with error: exit status 2"}`},
			"a step's function stopped before it answered, and every retry failed too (RequestId: r1 Error: Runtime exited with error: exit status 2)"},
		{"an engine name nobody listed", workflow.StepError{Error: "States.SomethingNew", Cause: "States.SomethingNew"}, "a step of the workflow failed"},
		{"buyflow's own failure keeps its words", workflow.StepError{Error: "TerminalError", Cause: `{"errorMessage":"terminal: rejected by seller","errorType":"TerminalError"}`},
			"TerminalError: terminal: rejected by seller"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.in.Sentence(); got != tt.want {
				t.Fatalf("Sentence = %q, want %q", got, tt.want)
			}
		})
	}
}
