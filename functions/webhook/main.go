// Command webhook serves POST /v1/webhooks/adcp/{operation_id}: seller task updates,
// authenticated per seller (RFC 9421 or the seller's legacy mode), deduplicated, applied forward
// only, and waking the parked AwaitSeller task; the delivery reports a seller pushes to a
// buy's reporting_webhook, recorded by internal/delivery; and GET /v1/jwks.json, buyflow's
// public request-signing keys.
package main

import (
	"context"
	"strings"
	"time"

	"github.com/buyflow/buyflow/functions/internal/agentwire"
	"github.com/buyflow/buyflow/functions/internal/keywire"
	"github.com/buyflow/buyflow/functions/internal/wire"
	"github.com/buyflow/buyflow/internal/delivery"
	"github.com/buyflow/buyflow/internal/httpapi"
	"github.com/buyflow/buyflow/internal/signingkey"
	"github.com/buyflow/buyflow/internal/webhook"
)

func main() { wire.Main(run) }

func run(ctx context.Context, getenv func(string) string) error {
	c, err := wire.Load("webhook", getenv)
	if err != nil {
		return err
	}
	reg, err := agentwire.Registry(ctx, c)
	if err != nil {
		return err
	}
	store := c.Ledger()
	// The route key is read in the background, so that a fresh instance's first delivery does
	// not wait for Secrets Manager: one taken meanwhile reads its owner from the ledger.
	routes := c.Routes()
	routes.Prefetch()
	// A seller's verifier is built on its first webhook (secrets read then, JWKS fetched and
	// cached by internal/webhookauth) and again when the registry changes its settings; (keyid,
	// nonce) replays are recorded in the ledger for every instance.
	verifiers := &webhook.RegistryVerifiers{Registry: reg, Secrets: c.Secrets(), Options: webhook.VerifierOptions{
		Replay: store, AllowHTTP: strings.HasPrefix(c.Env.PublicBaseURL, "http://"), Now: time.Now}}
	// Pushed delivery reports (the reporting_webhook the create stage registers) are recorded as
	// the scheduled read records pulled ones; recording a push calls no agent.
	reports := delivery.New(store, nil, delivery.Config{Metrics: c.Metrics})
	svc, err := webhook.New(webhook.Config{
		Ledger: store, Operations: store, Routes: routes, Sellers: verifiers, Registry: reg, Tasks: c.Tasks(), Reports: reports,
		RunConfig: c.Env.Run, PublicBaseURL: c.Env.PublicBaseURL, Now: time.Now, Metrics: c.Metrics,
	})
	if err != nil {
		return err
	}
	// The JWKS sellers verify buyflow's request signatures with, read once per cold start.
	keys, err := keywire.PublishedKeys(ctx, c)
	if err != nil {
		return err
	}
	jwks, err := signingkey.JWKS(keys)
	if err != nil {
		return err
	}
	wire.Start(c, httpapi.Recovering(c.Metrics, signingkey.Serve(jwks, svc.HandleHTTP))) // blocks
	return nil
}
