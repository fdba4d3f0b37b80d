package sfn

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sfn"
	"github.com/aws/aws-sdk-go-v2/service/sfn/types"
)

// fakeAPI is a function-typed fake: each test sets the calls it expects.
type fakeAPI struct {
	start    func(*sfn.StartExecutionInput) (*sfn.StartExecutionOutput, error)
	describe func(*sfn.DescribeExecutionInput) (*sfn.DescribeExecutionOutput, error)
	success  func(*sfn.SendTaskSuccessInput) error
	failure  func(*sfn.SendTaskFailureInput) error
}

func (f fakeAPI) StartExecution(_ context.Context, in *sfn.StartExecutionInput, _ ...func(*sfn.Options)) (*sfn.StartExecutionOutput, error) {
	return f.start(in)
}

func (f fakeAPI) DescribeExecution(_ context.Context, in *sfn.DescribeExecutionInput, _ ...func(*sfn.Options)) (*sfn.DescribeExecutionOutput, error) {
	return f.describe(in)
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

func TestDescribeNamesTheExecutionOfTheStateMachine(t *testing.T) {
	stopped := time.Date(2026, 11, 30, 12, 0, 0, 0, time.FixedZone("x", 3600))
	answers := map[string]*sfn.DescribeExecutionOutput{
		"arn:aws:states:us-east-1:123456789012:execution:MediaBuy:op-1":     {Status: types.ExecutionStatusRunning},
		"arn:aws:states:us-east-1:123456789012:execution:MediaBuy:op-1--g1": {Status: types.ExecutionStatusFailed, StopDate: &stopped},
		"arn:aws:states:us-east-1:123456789012:execution:MediaBuy:op-2":     {Status: types.ExecutionStatusPendingRedrive},
	}
	denied := errors.New("AccessDeniedException")
	c := New(fakeAPI{describe: func(in *sfn.DescribeExecutionInput) (*sfn.DescribeExecutionOutput, error) {
		switch out, ok := answers[aws.ToString(in.ExecutionArn)]; {
		case ok:
			return out, nil
		case strings.HasSuffix(aws.ToString(in.ExecutionArn), ":denied"):
			return nil, denied
		}
		return nil, &types.ExecutionDoesNotExist{Message: aws.String("no")}
	}}, smARN)
	ctx := context.Background()
	if e, err := c.Describe(ctx, "op-1"); err != nil || !e.Running() || e.Name != "op-1" || !e.StoppedAt.IsZero() {
		t.Fatalf("Describe(op-1) = %+v, %v", e, err)
	}
	if e, err := c.Describe(ctx, "op-1--g1"); err != nil || e.Running() || e.Status != "FAILED" || !e.StoppedAt.Equal(stopped) || e.StoppedAt.Location() != time.UTC {
		t.Fatalf("Describe(op-1--g1) = %+v, %v", e, err)
	}
	if e, err := c.Describe(ctx, "op-2"); err != nil || !e.Running() {
		t.Fatalf("Describe(op-2) = %+v, %v; a pending redrive still runs", e, err)
	}
	if _, err := c.Describe(ctx, "never"); !errors.Is(err, ErrNoExecution) {
		t.Fatalf("Describe(never) = %v, want ErrNoExecution", err)
	}
	if _, err := c.Describe(ctx, "denied"); !errors.Is(err, denied) || errors.Is(err, ErrNoExecution) {
		t.Fatalf("Describe(denied) = %v, want the service's error kept", err)
	}
}
