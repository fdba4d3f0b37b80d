package sfn

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sfn/types"
)

// fakeAPI is a function-typed fake: each test sets the calls it expects.
type fakeAPI struct {
	start   func(*sfn.StartExecutionInput) (*sfn.StartExecutionOutput, error)
	success func(*sfn.SendTaskSuccessInput) error
	failure func(*sfn.SendTaskFailureInput) error
}

func (f fakeAPI) StartExecution(_ context.Context, in *sfn.StartExecutionInput, _ ...func(*sfn.Options)) (*sfn.StartExecutionOutput, error) {
	return f.start(in)
}

func (f fakeAPI) DescribeExecution(context.Context, *sfn.DescribeExecutionInput, ...func(*sfn.Options)) (*sfn.DescribeExecutionOutput, error) {
	return nil, errors.New("not used")
}

func (f fakeAPI) SendTaskSuccess(_ context.Context, in *sfn.SendTaskSuccessInput, _ ...func(*sfn.Options)) (*sfn.SendTaskSuccessOutput, error) {
	return &sfn.SendTaskSuccessOutput{}, f.success(in)
}

func (f fakeAPI) SendTaskFailure(_ context.Context, in *sfn.SendTaskFailureInput, _ ...func(*sfn.Options)) (*sfn.SendTaskFailureOutput, error) {
	return &sfn.SendTaskFailureOutput{}, f.failure(in)
}

const smARN = "arn:aws:states:us-east-1:123456789012:stateMachine:MediaBuy"

func TestStartConvergesOnExistingExecution(t *testing.T) {
	c := New(fakeAPI{start: func(in *sfn.StartExecutionInput) (*sfn.StartExecutionOutput, error) {
		if aws.ToString(in.Name) != "op-1" || aws.ToString(in.Input) != `{"a":1}` {
			t.Fatalf("unexpected input %+v", in)
		}
		return nil, &types.ExecutionAlreadyExists{Message: aws.String("exists")}
	}}, smARN)
	arn, err := c.Start(context.Background(), "op-1", map[string]int{"a": 1})
	if err != nil {
		t.Fatal(err)
	}
	if want := "arn:aws:states:us-east-1:123456789012:execution:MediaBuy:op-1"; arn != want {
		t.Fatalf("arn = %s, want %s", arn, want)
	}
}

func TestStartReportsOtherErrors(t *testing.T) {
	c := New(fakeAPI{start: func(*sfn.StartExecutionInput) (*sfn.StartExecutionOutput, error) {
		return nil, &types.StateMachineDoesNotExist{Message: aws.String("nope")}
	}}, smARN)
	if _, err := c.Start(context.Background(), "op-1", nil); err == nil {
		t.Fatal("Start succeeded")
	}
}

func TestTaskGone(t *testing.T) {
	tests := []struct {
		name string
		err  error
		gone bool
	}{
		{"timed out", &types.TaskTimedOut{}, true},
		{"does not exist", &types.TaskDoesNotExist{}, true},
		{"invalid token", &types.InvalidToken{}, true},
		{"throttled", errors.New("throttled"), false},
		{"ok", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New(fakeAPI{
				success: func(*sfn.SendTaskSuccessInput) error { return tt.err },
				failure: func(*sfn.SendTaskFailureInput) error { return tt.err },
			}, smARN)
			for _, err := range []error{
				c.Succeed(context.Background(), "tok", map[string]string{"x": "y"}),
				c.Fail(context.Background(), "tok", "ApprovalRejectedError", "rejected"),
			} {
				if got := errors.Is(err, ErrTaskGone); got != tt.gone {
					t.Fatalf("errors.Is(%v, ErrTaskGone) = %v, want %v", err, got, tt.gone)
				}
				if (err == nil) != (tt.err == nil) {
					t.Fatalf("err = %v, want error %v", err, tt.err)
				}
			}
		})
	}
}
