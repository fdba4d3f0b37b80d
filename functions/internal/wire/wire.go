// Package wire builds, once per cold start, what every Lambda's main.go hands its use case: the
// environment topology declares for the function (internal/config), the AWS SDK configuration
// and the clients built from it (the ledger, Step Functions, Secrets Manager), and the metrics
// recorder. Only functions/* and cmd/* build AWS clients; the packages below them receive
// narrow interfaces.
package wire

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/buyflow/buyflow/functions/internal/awsenv"
	"github.com/buyflow/buyflow/internal/config"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/logging"
	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/secrets"
	"github.com/buyflow/buyflow/internal/sfn"
	"github.com/buyflow/buyflow/internal/sigv4"
	"github.com/buyflow/buyflow/internal/sqsjson"
	"github.com/buyflow/buyflow/internal/webhookroute"
)

// Main is every Lambda's main: the JSON logger, then run with os.Getenv; run builds the
// handler and blocks in lambda.Start. A cold start that fails is logged and exits 1, so the
// first invocation fails with one clear message.
func Main(run func(ctx context.Context, getenv func(string) string) error) {
	slog.SetDefault(logging.New())
	if err := run(context.Background(), os.Getenv); err != nil {
		slog.Error("cold start failed", "err", err)
		os.Exit(1)
	}
}

// Start hands h, wrapped with metrics.Flushing of the function's recorder, to lambda.Start,
// which blocks.
func Start[In, Out any](c *Cold, h func(context.Context, In) (Out, error)) {
	lambda.Start(metrics.Flushing(c.Metrics, h))
}

// Cold is what a function builds from its environment once per cold start.
type Cold struct {
	// Env is the function's configuration, exactly the variables topology declares for it.
	Env config.Env
	// AWS is the SDK configuration of the execution role (and the emulator endpoint on the
	// local stack).
	AWS aws.Config
	// Metrics writes EMF lines to stdout; wrap the handler with metrics.Flushing.
	Metrics *metrics.Recorder
}

// Load reads the environment of the function fn: its configuration (config.Load parses what it
// can type once, such as the approval policy), what parse checks further (the agents function's
// operators) and the AWS runtime's variables, every problem of all of them reported together.
func Load(fn string, getenv func(string) string, parse ...func(config.Env) error) (*Cold, error) {
	env, cerr := config.Load(fn, getenv)
	errs := []error{cerr}
	for _, p := range parse {
		if err := p(env); err != nil {
			errs = append(errs, fmt.Errorf("config of %s: %w", fn, err))
		}
	}
	awsCfg, aerr := awsenv.Load(getenv)
	if err := errors.Join(append(errs, aerr)...); err != nil {
		return nil, err
	}
	return &Cold{Env: env, AWS: awsCfg, Metrics: metrics.New(os.Stdout, metrics.Namespace, time.Now)}, nil
}

// Ledger is the DynamoDB ledger in the function's table. On an emulator endpoint
// (AWS_ENDPOINT_URL, the local stack) its client carries ledger.EmulatorCompat; DynamoDB itself
// gets the requests as built.
func (c *Cold) Ledger() *ledger.Store {
	return ledger.New(c.DynamoDB(), c.Env.TableName)
}

// DynamoDB is the client of the function's table, for the stores in it besides the ledger (the
// agent registry), with the same emulator compatibility.
func (c *Cold) DynamoDB() *dynamodb.Client {
	return dynamodb.NewFromConfig(c.AWS, c.dynamoOptions()...)
}

func (c *Cold) dynamoOptions() []func(*dynamodb.Options) {
	if c.AWS.BaseEndpoint == nil {
		return nil
	}
	return []func(*dynamodb.Options){ledger.EmulatorCompat}
}

// Tasks is the Step Functions client: executions of the function's state machine (when it
// declares one: starting, describing) and the parked task tokens it completes.
func (c *Cold) Tasks() *sfn.Client {
	return sfn.New(sfn.Connect(c.AWS), c.Env.StateMachineARN)
}

// Queues is the SQS client (the sweep's shard queue): its JSON protocol signed with the
// function's credentials (internal/sqsjson), to the emulator's endpoint on the local stack.
func (c *Cold) Queues() *sqsjson.Client {
	return &sqsjson.Client{Endpoint: aws.ToString(c.AWS.BaseEndpoint), Sign: sigv4.Signer(c.AWS.Credentials, "sqs", c.AWS.Region)}
}

// Secrets reads Secrets Manager once per secret and cold start.
func (c *Cold) Secrets() *secrets.Store {
	return secrets.New(secrets.NewClient(c.AWS))
}

// Routes is the route key of the seller webhook URLs (internal/webhookroute), read from its
// secret on first use or from Prefetch on, never by the cold start; nil for a function that
// declares none.
func (c *Cold) Routes() *webhookroute.Secret {
	return webhookroute.FromSecret(c.Secrets(), c.Env.RouteKeySecret)
}
