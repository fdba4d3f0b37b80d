package sfn_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	sfnapi "github.com/aws/aws-sdk-go-v2/service/sfn"

	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/sfn"
)

// The client against moto's Step Functions (one nobody here wrote), given its state machine by
// the SDK's own client: an execution starts, a second start of that name converges on it, it
// is described, an execution never started is ErrNoExecution, and completions are accepted as
// Step Functions' protocol (moto takes any token). The local stack's Step Functions runs every
// workflow test through this client too (statemachine/stagepaths, e2e).
func TestClientAgainstMoto(t *testing.T) {
	cfg := aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(dynamotest.MotoServer(t)),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDMOTO", "secret", "")}
	ctx := context.Background()
	sm, err := sfnapi.NewFromConfig(cfg).CreateStateMachine(ctx, &sfnapi.CreateStateMachineInput{
		Name:       aws.String(fmt.Sprintf("MediaBuy-%d", time.Now().UnixNano())),
		Definition: aws.String(`{"StartAt":"Done","States":{"Done":{"Type":"Succeed"}}}`),
		RoleArn:    aws.String("arn:aws:iam::123456789012:role/states"),
	})
	if err != nil {
		t.Fatal(err)
	}
	c := sfn.New(sfn.Connect(cfg), aws.ToString(sm.StateMachineArn))
	arn, err := c.Start(ctx, "op-1", map[string]int{"a": 1})
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Start(ctx, "op-1", map[string]int{"a": 1})
	if err != nil || again != arn {
		t.Fatalf("second start = %s, %v; want %s", again, err, arn)
	}
	e, err := c.Describe(ctx, "op-1")
	if err != nil || e.Name != "op-1" || e.Status == "" {
		t.Fatalf("Describe(op-1) = %+v, %v", e, err)
	}
	if _, err := c.Describe(ctx, "never"); !errors.Is(err, sfn.ErrNoExecution) {
		t.Fatalf("Describe(never) = %v, want ErrNoExecution", err)
	}
	if err := c.Succeed(ctx, "AQC-token", map[string]string{"x": "y"}); err != nil {
		t.Fatalf("Succeed: %v", err)
	}
	if err := c.Fail(ctx, "AQC-token", "ApprovalRejectedError", "rejected"); err != nil {
		t.Fatalf("Fail: %v", err)
	}
}
