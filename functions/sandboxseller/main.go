// Command sandboxseller is the sandbox's simulated AdCP seller behind a Lambda Function URL
// (infra's buyflow:sandbox only, never in a production deploy): it accepts the bearer token of
// the secret buyflow reads as the agent's credential and signs its webhooks (RFC 9421) with a
// key derived from the stack's webhook key secret, published at its URL's JWKS path.
package main

import (
	"context"
	"fmt"
	"net/http"

	"github.com/buyflow/buyflow/functions/internal/sandboxwire"
	"github.com/buyflow/buyflow/functions/internal/wire"
	"github.com/buyflow/buyflow/internal/sandbox"
	"github.com/buyflow/buyflow/internal/secrets"
	"github.com/buyflow/buyflow/internal/topology"
)

func main() {
	wire.Main(func(ctx context.Context, getenv func(string) string) error {
		return sandboxwire.Start(ctx, getenv, "sandboxseller", seller)
	})
}

func seller(ctx context.Context, getenv func(string) string, store *secrets.Store, token string) (http.Handler, func(), error) {
	keySecret, err := store.Get(ctx, getenv(topology.EnvSandboxWebhookKeySecret))
	if err != nil {
		return nil, nil, fmt.Errorf("sandboxseller: webhook key: %w", err)
	}
	signer, jwks, err := sandbox.WebhookKey(keySecret)
	if err != nil {
		return nil, nil, err
	}
	s, err := sandbox.Seller(token, signer, jwks)
	if err != nil {
		return nil, nil, err
	}
	return s, sandbox.SellerSettle(s), nil
}
