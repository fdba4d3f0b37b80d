package workflow

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
)

// The error types below are returned bare by the stage Lambdas; their Go type names are the
// ErrorEquals names the state machine matches (see [ErrorNames]).

// TransientError is a failure that the same call may overcome later: a timeout, a throttled or
// unavailable dependency, a seller that asked to retry. The state machine retries it with
// backoff and full jitter; RetryAfterSeconds, when set, is the dependency's own hint.
type TransientError struct {
	Reason            string `json:"reason"`
	RetryAfterSeconds int    `json:"retry_after_seconds,omitempty"`
}

func (e *TransientError) Error() string {
	if e.RetryAfterSeconds > 0 {
		return fmt.Sprintf("transient: %s (retry after %ds)", e.Reason, e.RetryAfterSeconds)
	}
	return "transient: " + e.Reason
}

// TerminalError is a failure that no retry can fix: a seller or governance agent refused the
// request for good, a configuration is missing, an invariant does not hold. The state machine
// records the reason and fails the operation.
type TerminalError struct {
	Code   string `json:"code,omitempty"`
	Reason string `json:"reason"`
}

func (e *TerminalError) Error() string {
	if e.Code != "" {
		return fmt.Sprintf("terminal: %s: %s", e.Code, e.Reason)
	}
	return "terminal: " + e.Reason
}

// TerminalErrorCode returns the Code of a TerminalError from its message as a Catch records
// it (the Error() text), or "" when the message is not one with a code.
func TerminalErrorCode(message string) string {
	rest, ok := strings.CutPrefix(message, "terminal: ")
	if !ok {
		return ""
	}
	code, _, ok := strings.Cut(rest, ": ")
	if !ok || code == "" || strings.ContainsAny(code, " \t\n") {
		return ""
	}
	return code
}

// ApprovalRejectedError is sent by the approve Lambda (SendTaskFailure) when an approver
// rejects a buy.
type ApprovalRejectedError struct {
	ApprovalID string `json:"approval_id"`
	By         string `json:"by"`
	Comment    string `json:"comment,omitempty"`
}

func (e *ApprovalRejectedError) Error() string {
	return fmt.Sprintf("approval %s rejected by %s", e.ApprovalID, e.By)
}

// DeadlineExceededError reports that an operation passed its overall deadline while waiting on
// the seller or on governance.
type DeadlineExceededError struct {
	OperationID string `json:"operation_id"`
	Deadline    string `json:"deadline"`
}

func (e *DeadlineExceededError) Error() string {
	return fmt.Sprintf("operation %s passed its deadline %s", e.OperationID, e.Deadline)
}

// NotFoundError reports that the operation a task names does not exist for the tenant.
type NotFoundError struct {
	OperationID string `json:"operation_id"`
}

func (e *NotFoundError) Error() string { return fmt.Sprintf("operation %s not found", e.OperationID) }

// InvalidInputError reports a task input the Lambda cannot act on: a bug in the state machine
// or a hand-started execution, never something a retry fixes.
type InvalidInputError struct {
	Field  string `json:"field"`
	Reason string `json:"reason"`
}

func (e *InvalidInputError) Error() string {
	return fmt.Sprintf("invalid task input: %s: %s", e.Field, e.Reason)
}

// ErrorNames lists the Go type names of the errors above: the only custom names the state
// machine may use in ErrorEquals. A test checks the ASL against it.
var ErrorNames = []string{
	typeName(&TransientError{}),
	typeName(&TerminalError{}),
	typeName(&ApprovalRejectedError{}),
	typeName(&DeadlineExceededError{}),
	typeName(&NotFoundError{}),
	typeName(&InvalidInputError{}),
}

func typeName(v any) string { return reflect.TypeOf(v).Elem().Name() }

// TaskError prepares err for return to the Lambda runtime: it unwraps to the first error of a
// type in [ErrorNames] and returns it bare, so the reported errorType is that type's name. Any
// other error becomes a TransientError carrying its message (a bounded Retry then a Catch
// decide what follows). A nil err stays nil.
func TaskError(err error) error {
	if err == nil {
		return nil
	}
	var (
		transient *TransientError
		terminal  *TerminalError
		rejected  *ApprovalRejectedError
		deadline  *DeadlineExceededError
		notFound  *NotFoundError
		invalid   *InvalidInputError
	)
	switch {
	case errors.As(err, &transient):
		return transient
	case errors.As(err, &terminal):
		return terminal
	case errors.As(err, &rejected):
		return rejected
	case errors.As(err, &deadline):
		return deadline
	case errors.As(err, &notFound):
		return notFound
	case errors.As(err, &invalid):
		return invalid
	}
	return &TransientError{Reason: err.Error()}
}

// Readable turns the {Error, Cause} a Catch recorded into a name and a sentence a person
// can read. A Lambda task's Cause is the function's error as JSON ({"errorMessage",
// "errorType"}); emulators prefix it with their own text and report the name as
// States.TaskFailed. The function's own error type then names the failure. The buy's
// failure (governance) and a change's (modify) both read it, so neither shows the envelope.
func (f StepError) Readable() StepError {
	i := strings.IndexByte(f.Cause, '{')
	if i < 0 {
		return f
	}
	var lambdaErr struct {
		ErrorMessage string `json:"errorMessage"`
		ErrorType    string `json:"errorType"`
	}
	if json.Unmarshal([]byte(f.Cause[i:]), &lambdaErr) != nil || lambdaErr.ErrorMessage == "" {
		return f
	}
	out := StepError{Error: f.Error, Cause: lambdaErr.ErrorMessage}
	if lambdaErr.ErrorType != "" && (f.Error == "States.TaskFailed" || f.Error == "States.ALL" || f.Error == lambdaErr.ErrorType) {
		out.Error = lambdaErr.ErrorType
	}
	return out
}
