// Package sandboxwire is the cold start the sandbox's simulated agents share
// (functions/sandboxseller, functions/sandboxgovernance; infra's buyflow:sandbox only, never
// in a production deploy): the AWS configuration, the Secrets Manager store, the bearer token
// buyflow reads as the agent's credential (the agent accepts it), and the agent served behind
// its Lambda Function URL.
package sandboxwire

import (
	"context"
	"fmt"
	"net/http"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/buyflow/buyflow/functions/internal/awsenv"
	"github.com/buyflow/buyflow/internal/sandbox"
	"github.com/buyflow/buyflow/internal/secrets"
	"github.com/buyflow/buyflow/internal/topology"
)

// Agent builds one simulated agent that accepts token: its HTTP handler, and what runs before
// each answer (nil for nothing; see sandbox.Handler). store reads the agent's other secrets,
// named in getenv.
type Agent func(ctx context.Context, getenv func(string) string, store *secrets.Store, token string) (h http.Handler, settle func(), err error)

// Start reads the agent's token and serves the agent build makes; it blocks once the agent is
// served. name prefixes its errors.
func Start(ctx context.Context, getenv func(string) string, name string, build Agent) error {
	cfg, err := awsenv.Load(getenv)
	if err != nil {
		return err
	}
	store := secrets.New(secrets.NewClient(cfg))
	token, err := store.Token(ctx, getenv(topology.EnvSandboxTokenSecret))
	if err != nil {
		return fmt.Errorf("%s: token: %w", name, err)
	}
	h, settle, err := build(ctx, getenv, store, token)
	if err != nil {
		return err
	}
	lambda.Start(sandbox.Handler(h, settle)) // blocks
	return nil
}
