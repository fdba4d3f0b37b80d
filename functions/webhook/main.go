// Command webhook serves POST /v1/webhooks/adcp/{operation_id}: seller task updates,
// authenticated per seller (RFC 9421 or the seller's legacy mode), deduplicated, applied forward
// only, and waking the parked AwaitSeller task.
package main

import (
	"context"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/buyflow/buyflow/functions/internal/agents"
	"github.com/buyflow/buyflow/functions/internal/wire"
	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/httpapi"
	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/webhookrx"
)

func main() { wire.Main(run) }

func run(ctx context.Context, getenv func(string) string) error {
	var reg *adcp.Registry
	c, err := wire.Load("webhook", getenv, agents.Parse(&reg))
	if err != nil {
		return err
	}
	store := c.Ledger()
	// Verifiers are built once per cold start: secrets read now, JWKS fetched and cached by
	// internal/webhookauth, (keyid, nonce) replays recorded in the ledger for every instance.
	verifiers, err := webhookrx.BuildVerifiers(ctx, reg, c.Secrets(), webhookrx.VerifierOptions{
		Replay: store, AllowHTTP: strings.HasPrefix(c.Env.PublicBaseURL, "http://"), Now: time.Now})
	if err != nil {
		return err
	}
	svc, err := webhookrx.New(webhookrx.Config{
		Ledger: store, Operations: store, Verifiers: verifiers, Tasks: c.Tasks(),
		RunConfig: c.Env.Run, PublicBaseURL: c.Env.PublicBaseURL, Now: time.Now, Metrics: c.Metrics,
	})
	if err != nil {
		return err
	}
	lambda.Start(metrics.Flushing(c.Metrics, httpapi.Recovering(c.Metrics, svc.HandleHTTP))) // blocks
	return nil
}
