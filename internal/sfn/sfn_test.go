package sfn

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/smithy-go"
)

// fakeAPI answers each action with the JSON answer the function gives for the request's
// fields, or its error: the protocol's body each way, without the transport.
type fakeAPI map[string]func(in map[string]string) (string, error)

func (f fakeAPI) Call(_ context.Context, action string, in, out any) error {
	answer, ok := f[action]
	if !ok {
		return errors.New("unexpected action " + action)
	}
	raw, err := json.Marshal(in)
	if err != nil {
		return err
	}
	var fields map[string]string
	if err := json.Unmarshal(raw, &fields); err != nil {
		return err
	}
	body, err := answer(fields)
	if err != nil || out == nil {
		return err
	}
	return json.Unmarshal([]byte(body), out)
}

func refused(code string) error { return &smithy.GenericAPIError{Code: code, Message: "refused"} }

const smARN = "arn:aws:states:us-east-1:123456789012:stateMachine:MediaBuy"

func TestStartConvergesOnExistingExecution(t *testing.T) {
	c := New(fakeAPI{"StartExecution": func(in map[string]string) (string, error) {
		if in["stateMachineArn"] != smARN || in["name"] != "op-1" || in["input"] != `{"a":1}` {
			t.Fatalf("unexpected input %+v", in)
		}
		return "", refused("ExecutionAlreadyExists")
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
	for _, answer := range []func(map[string]string) (string, error){
		func(map[string]string) (string, error) { return "", refused("StateMachineDoesNotExist") },
		func(map[string]string) (string, error) { return `{}`, nil }, // no executionArn
	} {
		c := New(fakeAPI{"StartExecution": answer}, smARN)
		if _, err := c.Start(context.Background(), "op-1", nil); err == nil {
			t.Fatal("Start succeeded")
		}
	}
}

func TestTaskGone(t *testing.T) {
	tests := []struct {
		name string
		err  error
		gone bool
	}{
		{"timed out", refused("TaskTimedOut"), true},
		{"does not exist", refused("TaskDoesNotExist"), true},
		{"invalid token", refused("InvalidToken"), true},
		{"throttled", refused("ThrottlingException"), false},
		{"no answer", errors.New("connection reset"), false},
		{"ok", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New(fakeAPI{
				"SendTaskSuccess": func(in map[string]string) (string, error) {
					if in["taskToken"] != "tok" || in["output"] != `{"x":"y"}` {
						t.Errorf("success request %v", in)
					}
					return `{}`, tt.err
				},
				"SendTaskFailure": func(in map[string]string) (string, error) {
					if in["taskToken"] != "tok" || in["error"] != "ApprovalRejectedError" || in["cause"] != "rejected" {
						t.Errorf("failure request %v", in)
					}
					return `{}`, tt.err
				},
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
	stopped := time.Date(2026, 11, 30, 12, 0, 0, 250_000_000, time.FixedZone("x", 3600))
	answers := map[string]string{
		"arn:aws:states:us-east-1:123456789012:execution:MediaBuy:op-1":     `{"status":"RUNNING","startDate":1.7645e9}`,
		"arn:aws:states:us-east-1:123456789012:execution:MediaBuy:op-1--g1": `{"status":"FAILED","stopDate":1796036400.25}`,
		"arn:aws:states:us-east-1:123456789012:execution:MediaBuy:op-2":     `{"status":"PENDING_REDRIVE"}`,
		"arn:aws:states:us-east-1:123456789012:execution:MediaBuy:empty":    `{}`,
	}
	denied := refused("AccessDeniedException")
	c := New(fakeAPI{"DescribeExecution": func(in map[string]string) (string, error) {
		switch out, ok := answers[in["executionArn"]]; {
		case ok:
			return out, nil
		case strings.HasSuffix(in["executionArn"], ":denied"):
			return "", denied
		}
		return "", refused("ExecutionDoesNotExist")
	}}, smARN)
	ctx := context.Background()
	if e, err := c.Describe(ctx, "op-1"); err != nil || !e.Running() || e.Name != "op-1" || !e.StoppedAt.IsZero() {
		t.Fatalf("Describe(op-1) = %+v, %v", e, err)
	}
	if e, err := c.Describe(ctx, "op-1--g1"); err != nil || e.Running() || e.Status != "FAILED" || !e.StoppedAt.Equal(stopped) || e.StoppedAt.Location() != time.UTC {
		t.Fatalf("Describe(op-1--g1) = %+v, %v; want stopped at %s", e, err, stopped.UTC())
	}
	if e, err := c.Describe(ctx, "op-2"); err != nil || !e.Running() {
		t.Fatalf("Describe(op-2) = %+v, %v; a pending redrive still runs", e, err)
	}
	if _, err := c.Describe(ctx, "empty"); err == nil {
		t.Fatal("Describe(empty) took an answer without a status")
	}
	if _, err := c.Describe(ctx, "never"); !errors.Is(err, ErrNoExecution) {
		t.Fatalf("Describe(never) = %v, want ErrNoExecution", err)
	}
	if _, err := c.Describe(ctx, "denied"); !errors.Is(err, denied) || errors.Is(err, ErrNoExecution) {
		t.Fatalf("Describe(denied) = %v, want the service's error kept", err)
	}
}
