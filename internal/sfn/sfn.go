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
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sfn/types"
)

// ErrTaskGone reports that a task token can no longer be completed: TaskTimedOut,
// TaskDoesNotExist or InvalidToken.
var ErrTaskGone = errors.New("sfn: task token is gone")

// api is the part of the Step Functions client buyflow uses.
type api interface {
	StartExecution(ctx context.Context, in *sfn.StartExecutionInput, optFns ...func(*sfn.Options)) (*sfn.StartExecutionOutput, error)
	DescribeExecution(ctx context.Context, in *sfn.DescribeExecutionInput, optFns ...func(*sfn.Options)) (*sfn.DescribeExecutionOutput, error)
	SendTaskSuccess(ctx context.Context, in *sfn.SendTaskSuccessInput, optFns ...func(*sfn.Options)) (*sfn.SendTaskSuccessOutput, error)
	SendTaskFailure(ctx context.Context, in *sfn.SendTaskFailureInput, optFns ...func(*sfn.Options)) (*sfn.SendTaskFailureOutput, error)
}

var _ api = (*sfn.Client)(nil)

// Client starts executions of one state machine and completes task tokens.
type Client struct {
	api             api
	stateMachineARN string
}

// New returns a Client for the state machine stateMachineARN.
func New(api api, stateMachineARN string) *Client {
	return &Client{api: api, stateMachineARN: stateMachineARN}
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
	out, err := c.api.StartExecution(ctx, &sfn.StartExecutionInput{
		StateMachineArn: aws.String(c.stateMachineARN),
		Name:            aws.String(name),
		Input:           aws.String(string(body)),
	})
	var exists *types.ExecutionAlreadyExists
	switch {
	case errors.As(err, &exists):
		return executionARN(c.stateMachineARN, name), nil
	case err != nil:
		return "", fmt.Errorf("sfn: start execution %s: %w", name, err)
	}
	return aws.ToString(out.ExecutionArn), nil
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
	return e.Status == string(types.ExecutionStatusRunning) || e.Status == string(types.ExecutionStatusPendingRedrive)
}

// ErrNoExecution reports that no execution of that name was ever started.
var ErrNoExecution = errors.New("sfn: no such execution")

// Describe reads the execution named name of the client's state machine. A name never started
// is an error matching ErrNoExecution; a refused call keeps the service's error (an
// AccessDeniedException is a smithy.APIError).
func (c *Client) Describe(ctx context.Context, name string) (Execution, error) {
	out, err := c.api.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: aws.String(executionARN(c.stateMachineARN, name))})
	var missing *types.ExecutionDoesNotExist
	switch {
	case errors.As(err, &missing):
		return Execution{}, fmt.Errorf("sfn: describe execution %s: %w (%w)", name, ErrNoExecution, err)
	case err != nil:
		return Execution{}, fmt.Errorf("sfn: describe execution %s: %w", name, err)
	}
	e := Execution{Name: name, Status: string(out.Status)}
	if out.StopDate != nil {
		e.StoppedAt = out.StopDate.UTC()
	}
	return e, nil
}

// Succeed completes the task parked under token with output marshalled to JSON.
func (c *Client) Succeed(ctx context.Context, token string, output any) error {
	body, err := json.Marshal(output)
	if err != nil {
		return fmt.Errorf("sfn: marshal task output: %w", err)
	}
	_, err = c.api.SendTaskSuccess(ctx, &sfn.SendTaskSuccessInput{TaskToken: aws.String(token), Output: aws.String(string(body))})
	return taskErr("send task success", err)
}

// Fail fails the task parked under token with the error name errName (an ASL ErrorEquals name)
// and a cause a person can read. The cause must not contain secrets: it lands in the
// execution history.
func (c *Client) Fail(ctx context.Context, token, errName, cause string) error {
	_, err := c.api.SendTaskFailure(ctx, &sfn.SendTaskFailureInput{
		TaskToken: aws.String(token), Error: aws.String(errName), Cause: aws.String(cause),
	})
	return taskErr("send task failure", err)
}

func taskErr(op string, err error) error {
	if err == nil {
		return nil
	}
	var (
		timedOut *types.TaskTimedOut
		missing  *types.TaskDoesNotExist
		invalid  *types.InvalidToken
	)
	if errors.As(err, &timedOut) || errors.As(err, &missing) || errors.As(err, &invalid) {
		return fmt.Errorf("sfn: %s: %w (%w)", op, ErrTaskGone, err)
	}
	return fmt.Errorf("sfn: %s: %w", op, err)
}
