// Command sandboxgovernance is the sandbox's simulated AdCP governance agent behind a Lambda
// Function URL (infra's buyflow:sandbox only, never in a production deploy): it accepts the
// bearer token of the secret buyflow reads as the agent's credential.
package main

import (
	"context"
	"net/http"

	"github.com/buyflow/buyflow/functions/internal/sandboxwire"
	"github.com/buyflow/buyflow/functions/internal/wire"
	"github.com/buyflow/buyflow/internal/sandbox"
	"github.com/buyflow/buyflow/internal/secrets"
)

func main() {
	wire.Main(func(ctx context.Context, getenv func(string) string) error {
		return sandboxwire.Start(ctx, getenv, "sandboxgovernance", governance)
	})
}

func governance(_ context.Context, _ func(string) string, _ *secrets.Store, token string) (http.Handler, func(), error) {
	g, err := sandbox.Governance(token)
	if err != nil {
		return nil, nil, err
	}
	return g, nil, nil
}
