package workflow

import "strings"

// engineFailures are what a person reads for the Step Functions and Lambda error names that
// can reach a Catch. An engine name not listed here still reads as a sentence (engineFallback).
var engineFailures = map[string]string{
	"States.Timeout":                         "a step did not finish within its time limit",
	"States.HeartbeatTimeout":                "a step stopped reporting that it was still working",
	"States.TaskFailed":                      "a step of the workflow failed",
	"States.Runtime":                         "the workflow could not run a step (a fault in buyflow, not in the request)",
	"States.Permissions":                     "the workflow lacks a permission a step needs (a fault in the deployment)",
	"States.DataLimitExceeded":               "a step's input or output was over the workflow's size limit",
	"States.ResultPathMatchFailure":          "the workflow could not store a step's result (a fault in buyflow)",
	"States.ParameterPathFailure":            "the workflow could not find a step's input (a fault in buyflow)",
	"States.IntrinsicFailure":                "the workflow could not compute a step's input (a fault in buyflow)",
	"States.QueryEvaluationError":            "the workflow could not compute a step's input (a fault in buyflow)",
	"States.NoChoiceMatched":                 "the workflow reached a decision it had no branch for (a fault in buyflow)",
	"States.BranchFailed":                    "a branch of the workflow failed",
	"States.ExceedToleratedFailureThreshold": "too many of a step's items failed",
	"States.ItemReaderFailed":                "the workflow could not read a step's items",
	"States.ResultWriterFailed":              "the workflow could not write a step's results",
	"Lambda.ServiceException":                "AWS Lambda failed while running a step, and every retry failed too",
	"Lambda.AWSLambdaException":              "AWS Lambda failed while running a step, and every retry failed too",
	"Lambda.SdkClientException":              "the workflow could not reach AWS Lambda to run a step, and every retry failed too",
	"Lambda.TooManyRequestsException":        "AWS Lambda was too busy to run a step, and every retry was refused too",
	"Lambda.ClientExecutionTimeoutException": "AWS Lambda did not answer a step in time",
	"Lambda.Unknown":                         "a step's function failed without saying why (it may have run out of memory or time)",
	"Runtime.ExitError":                      "a step's function stopped before it answered, and every retry failed too",
	"Sandbox.Timedout":                       "a step's function ran out of time",
}

// engineFallback is what an engine error this list does not know reads as.
const engineFallback = "a step of the workflow failed"

// enginePrefixes begin the engines' error names (States.*, Lambda.*, Runtime.*, Sandbox.*),
// never one of buyflow's own.
var enginePrefixes = []string{"States.", "Lambda.", "Runtime.", "Sandbox."}

// engineName reports whether name is one the engines give.
func engineName(name string) bool {
	for _, p := range enginePrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// namesEngine reports whether text mentions an engine's error name anywhere.
func namesEngine(text string) bool {
	for _, p := range enginePrefixes {
		if strings.Contains(text, p) {
			return true
		}
	}
	return false
}

// Sentence is the failure as the reason a person reads on a buy, a change or a campaign
// (GET, the CLI, Slack): never an engine's error name. A failure buyflow named itself reads
// "Name: cause" as the step wrote it (after Readable). An engine's (States.Timeout,
// Lambda.ServiceException, ...) reads as what happened, followed by the engine's cause when
// it says more than the name and names no engine error itself (the execution history keeps
// it whole). A stage that knows what a timeout meant (an approval nobody decided) says so
// itself.
func (f StepError) Sentence() string {
	r := f.Readable()
	cause := strings.TrimSpace(r.Cause)
	if !engineName(r.Error) {
		return strings.TrimSpace(r.Error + ": " + cause)
	}
	sentence, ok := engineFailures[r.Error]
	if !ok {
		sentence = engineFallback
	}
	// kumo repeats the name as the cause; AWS often leaves it empty, or starts it with the name.
	if cause == "" || namesEngine(cause) {
		return sentence
	}
	return sentence + " (" + cause + ")"
}
