// Command sandboxgovernance is the sandbox's simulated AdCP governance agent behind a Lambda
// Function URL (infra's buyflow:sandbox only, never in a production deploy): it accepts the
// bearer token of the secret buyflow reads as the agent's credential.
package main

import (
	"context"
	"fmt"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/buyflow/buyflow/functions/internal/awsenv"
	"github.com/buyflow/buyflow/functions/internal/wire"
	"github.com/buyflow/buyflow/internal/sandbox"
	"github.com/buyflow/buyflow/internal/secrets"
	"github.com/buyflow/buyflow/internal/topology"
)

func main() { wire.Main(run) }

func run(ctx context.Context, getenv func(string) string) error {
	cfg, err := awsenv.Load(getenv)
	if err != nil {
		return err
	}
	token, err := secrets.New(secretsmanager.NewFromConfig(cfg)).Token(ctx, getenv(topology.EnvSandboxTokenSecret))
	if err != nil {
		return fmt.Errorf("sandboxgovernance: token: %w", err)
	}
	g, err := sandbox.Governance(token)
	if err != nil {
		return err
	}
	lambda.Start(sandbox.Handler(g, nil)) // blocks
	return nil
}
