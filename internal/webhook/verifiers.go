package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/webhookauth"
)

// ErrSecretInvalid reports an agent whose HMAC or bearer webhook secret webhookauth refuses
// (shorter than webhookauth.MinSecretBytes, or one repeated byte): a configuration error an
// operator fixes, which no retry by the seller mends until then.
var ErrSecretInvalid = errors.New("webhook: the agent's webhook secret is invalid")

// Secrets returns a secret's value by name; *secrets.Store satisfies it.
type Secrets interface {
	Get(ctx context.Context, name string) ([]byte, error)
}

// VerifierOptions are shared by the verifiers of every agent.
type VerifierOptions struct {
	// Replay records RFC 9421 (keyid, nonce) pairs for every process: the ledger in
	// production (*ledger.Store satisfies webhookauth.ReplayStore).
	Replay webhookauth.ReplayStore
	// HTTPClient fetches jwks_uri documents (nil: the webhook package's default).
	HTTPClient *http.Client
	// AllowHTTP accepts http:// target URIs (local stacks only).
	AllowHTTP bool
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// buildVerifier builds agent a's verifier, reading its HMAC or bearer secret; nil for an
// agent without webhook settings.
func buildVerifier(ctx context.Context, a adcp.Agent, sec Secrets, o VerifierOptions) (*webhookauth.Verifier, error) {
	if a.Webhook == nil {
		return nil, nil
	}
	id := a.ID
	cfg := webhookauth.Config{Replay: o.Replay, HTTPClient: o.HTTPClient, AllowHTTP: o.AllowHTTP, Now: o.Now}
	ref := ""
	switch a.Webhook.Mode {
	case adcp.WebhookRFC9421:
		cfg.Mode, cfg.JWKSURL, cfg.JWKS = webhookauth.ModeRFC9421, a.Webhook.JWKSURI, a.Webhook.JWKS
	case adcp.WebhookHMAC:
		cfg.Mode, ref = webhookauth.ModeHMAC, a.Webhook.HMACSecretRef
	case adcp.WebhookBearer:
		cfg.Mode, ref = webhookauth.ModeBearer, a.Webhook.BearerSecretRef
	default:
		return nil, fmt.Errorf("agent %s: webhook mode %q", id, a.Webhook.Mode)
	}
	if ref != "" {
		if sec == nil {
			return nil, fmt.Errorf("agent %s: no secret store for %s", id, a.Webhook.Mode)
		}
		raw, err := sec.Get(ctx, ref)
		if err != nil {
			// The error names the secret, never its value.
			return nil, fmt.Errorf("agent %s: webhook secret %s: %w", id, ref, err)
		}
		cfg.Secrets = webhookauth.StoredSecrets(raw)
	}
	v, err := webhookauth.New(cfg)
	if err != nil && ref != "" && errors.Is(err, webhookauth.ErrConfig) {
		// The secret is the operator's to fix, not the seller's: say which one and how.
		return nil, fmt.Errorf("%w: agent %s: webhook %s secret %s: %w; put a random secret of at least %d bytes "+
			"in it (and give the seller the same), or run `buyflow agents update %s` to name another",
			ErrSecretInvalid, id, a.Webhook.Mode, ref, err, webhookauth.MinSecretBytes, id)
	}
	if err != nil {
		return nil, fmt.Errorf("agent %s: webhook verifier: %w", id, err)
	}
	return v, nil
}
