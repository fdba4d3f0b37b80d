// Command sandboxseller is the sandbox's simulated AdCP seller behind a Lambda Function URL
// (infra's buyflow:sandbox only, never in a production deploy): it accepts the bearer token of
// the secret buyflow reads as the agent's credential and signs its webhooks (RFC 9421) with a
// key derived from the stack's webhook key secret, published at its URL's JWKS path.
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
	store := secrets.New(secretsmanager.NewFromConfig(cfg))
	token, err := store.Token(ctx, getenv(topology.EnvSandboxTokenSecret))
	if err != nil {
		return fmt.Errorf("sandboxseller: token: %w", err)
	}
	keySecret, err := store.Get(ctx, getenv(topology.EnvSandboxWebhookKeySecret))
	if err != nil {
		return fmt.Errorf("sandboxseller: webhook key: %w", err)
	}
	signer, jwks, err := sandbox.WebhookKey(keySecret)
	if err != nil {
		return err
	}
	s, err := sandbox.Seller(token, signer, jwks)
	if err != nil {
		return err
	}
	lambda.Start(sandbox.Handler(s, sandbox.SellerSettle(s))) // blocks
	return nil
}
