// Package sfn is buyflow's narrow door to Step Functions, the only package that calls it: start
// an execution under a deterministic name, describe one, and complete a parked task token. A token that is already gone (the task
// timed out, the execution ended, the token is stale) is one error, [ErrTaskGone], because
// every caller treats those the same way: the ledger already holds the truth and the next
// park will read it.
package sfn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/smithy-go"

	"github.com/buyflow/buyflow/internal/awsjson"
	"github.com/buyflow/buyflow/internal/sigv4"
)

// ErrTaskGone reports that a task token can no longer be completed: TaskTimedOut,
// TaskDoesNotExist or InvalidToken.
var ErrTaskGone = errors.New("sfn: task token is gone")

// Caller sends one Step Functions action (AWS JSON 1.0, X-Amz-Target AWSStepFunctions.<action>)
// with in as its JSON body and decodes the answer into out. A refusal is a smithy.APIError
// carrying Step Functions' error code. Connect returns the one that calls AWS.
type Caller interface {
	Call(ctx context.Context, action string, in, out any) error
}

// Connect is Step Functions for cfg: its region and credentials (SigV4, service "states"),
// its BaseEndpoint when set (AWS_ENDPOINT_URL), else the region's public endpoint. It speaks
// the JSON protocol through internal/awsjson rather than the SDK's client, for four actions,
// without the client's cold-start cost. A throttled, failed (5xx) or unanswered call is tried
// again, three tries in all, as the SDK's client did: a start under the same name converges
// (Start), and a completion whose first try was applied answers TaskDoesNotExist (ErrTaskGone).
func Connect(cfg aws.Config) Caller {
	svc := awsjson.Service{Name: "states", URL: awsjson.Endpoint(aws.ToString(cfg.BaseEndpoint), "states", cfg.Region),
		TargetPrefix: "AWSStepFunctions", Version: "1.0", HTTP: &http.Client{Timeout: tryTimeout}}
	if cfg.Credentials != nil {
		svc.Sign = sigv4.Signer(cfg.Credentials, "states", cfg.Region)
	}
	return retrying{svc}
}

// One try that hangs gets tryTimeout: Step Functions answers these actions in milliseconds.
const tryTimeout = 10 * time.Second

type retrying struct{ svc awsjson.Service }

func (r retrying) Call(ctx context.Context, action string, in, out any) error {
	return r.svc.CallRetrying(ctx, action, in, out, awsjson.Retry{Attempts: 3, Backoff: 50 * time.Millisecond, Again: awsjson.Throttling})
}

// Client starts executions of one state machine and completes task tokens.
type Client struct {
	api             Caller
	stateMachineARN string
}

// New returns a Client for the state machine stateMachineARN, calling through api (Connect).
func New(api Caller, stateMachineARN string) *Client {
	return &Client{api: api, stateMachineARN: stateMachineARN}
}

// code is Step Functions' error code of a refusal ("ExecutionAlreadyExists"); "" for any other
// error.
func code(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return ""
}

// Start starts an execution named name with input marshalled to JSON and returns its ARN. A
// retry after a partial failure converges: when an execution of that name already exists
// (AWS returns it for the same input; some emulators answer ExecutionAlreadyExists), Start
// returns the existing execution's ARN, built from the state machine ARN and the name.
func (c *Client) Start(ctx context.Context, name string, input any) (string, error) {
	body, err := json.Marshal(input)
	if err != nil {
		return "", fmt.Errorf("sfn: marshal input of %s: %w", name, err)
	}
	var out struct {
		ExecutionArn string `json:"executionArn"`
	}
	err = c.api.Call(ctx, "StartExecution", map[string]string{"stateMachineArn": c.stateMachineARN, "name": name, "input": string(body)}, &out)
	switch {
	case code(err) == "ExecutionAlreadyExists":
		return executionARN(c.stateMachineARN, name), nil
	case err != nil:
		return "", fmt.Errorf("sfn: start execution %s: %w", name, err)
	case out.ExecutionArn == "":
		return "", fmt.Errorf("sfn: start execution %s: an answer without its executionArn", name)
	}
	return out.ExecutionArn, nil
}

// executionARN derives an execution's ARN from its state machine's ARN and its name
// (arn:aws:states:region:account:stateMachine:Name → …:execution:Name:exec).
func executionARN(stateMachineARN, name string) string {
	const marker = ":stateMachine:"
	for i := 0; i+len(marker) <= len(stateMachineARN); i++ {
		if stateMachineARN[i:i+len(marker)] == marker {
			return stateMachineARN[:i] + ":execution:" + stateMachineARN[i+len(marker):] + ":" + name
		}
	}
	return stateMachineARN + ":" + name
}

// Execution is one execution of the state machine as Describe reports it.
type Execution struct {
	Name string
	// Status is Step Functions' execution status: RUNNING, SUCCEEDED, FAILED, TIMED_OUT,
	// ABORTED or PENDING_REDRIVE.
	Status string
	// StoppedAt is when it ended; zero while it runs.
	StoppedAt time.Time
}

// Running reports whether the execution still runs or waits for a redrive.
func (e Execution) Running() bool {
	return e.Status == "RUNNING" || e.Status == "PENDING_REDRIVE"
}

// ErrNoExecution reports that no execution of that name was ever started.
var ErrNoExecution = errors.New("sfn: no such execution")

// Describe reads the execution named name of the client's state machine. A name never started
// is an error matching ErrNoExecution; a refused call keeps the service's error (an
// AccessDeniedException is a smithy.APIError).
func (c *Client) Describe(ctx context.Context, name string) (Execution, error) {
	var out struct {
		Status   string   `json:"status"`
		StopDate *float64 `json:"stopDate"` // seconds since the epoch, with a fraction
	}
	err := c.api.Call(ctx, "DescribeExecution", map[string]string{"executionArn": executionARN(c.stateMachineARN, name)}, &out)
	switch {
	case code(err) == "ExecutionDoesNotExist":
		return Execution{}, fmt.Errorf("sfn: describe execution %s: %w (%w)", name, ErrNoExecution, err)
	case err != nil:
		return Execution{}, fmt.Errorf("sfn: describe execution %s: %w", name, err)
	case out.Status == "":
		return Execution{}, fmt.Errorf("sfn: describe execution %s: an answer without its status", name)
	}
	e := Execution{Name: name, Status: out.Status}
	if out.StopDate != nil {
		sec, frac := math.Modf(*out.StopDate)
		e.StoppedAt = time.Unix(int64(sec), int64(math.Round(frac*1e3))*int64(time.Millisecond)).UTC()
	}
	return e, nil
}

// Succeed completes the task parked under token with output marshalled to JSON.
func (c *Client) Succeed(ctx context.Context, token string, output any) error {
	body, err := json.Marshal(output)
	if err != nil {
		return fmt.Errorf("sfn: marshal task output: %w", err)
	}
	err = c.api.Call(ctx, "SendTaskSuccess", map[string]string{"taskToken": token, "output": string(body)}, nil)
	return taskErr("send task success", err)
}

// Fail fails the task parked under token with the error name errName (an ASL ErrorEquals name)
// and a cause a person can read. The cause must not contain secrets: it lands in the
// execution history.
func (c *Client) Fail(ctx context.Context, token, errName, cause string) error {
	err := c.api.Call(ctx, "SendTaskFailure", map[string]string{"taskToken": token, "error": errName, "cause": cause}, nil)
	return taskErr("send task failure", err)
}

func taskErr(op string, err error) error {
	if err == nil {
		return nil
	}
	switch code(err) {
	case "TaskTimedOut", "TaskDoesNotExist", "InvalidToken":
		return fmt.Errorf("sfn: %s: %w (%w)", op, ErrTaskGone, err)
	}
	return fmt.Errorf("sfn: %s: %w", op, err)
}
