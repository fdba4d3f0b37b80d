package devstack

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
)

// Execution is how one execution of the state machine stands, as Step Functions reports it.
type Execution struct {
	// Status is RUNNING, SUCCEEDED, FAILED, TIMED_OUT or ABORTED.
	Status string
	// Error names the Fail state or the error an execution failed with ("" otherwise).
	Error string
}

// Execution describes the execution named name (an operation's execution_name).
func (s *Stack) Execution(ctx context.Context, name string) (Execution, error) {
	arn := strings.Replace(s.StateMachineARN, ":stateMachine:", ":execution:", 1) + ":" + name
	out, err := s.sfn.DescribeExecution(ctx, &sfn.DescribeExecutionInput{ExecutionArn: aws.String(arn)})
	if err != nil {
		return Execution{}, fmt.Errorf("devstack: describe execution %s: %w", name, err)
	}
	return Execution{Status: string(out.Status), Error: aws.ToString(out.Error)}, nil
}
