package adcptest

import (
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/buyflow/buyflow/internal/webhookauth"
)

// NewWebhookKey generates an Ed25519 webhook-signing key with key id kid and
// returns an RFC 9421 signer (AdCP webhook-signing profile) using the clock
// now (nil = time.Now), plus the JWK Set document that publishes its public
// half. Put both in SellerOptions (WebhookSigner, JWKS).
func NewWebhookKey(kid string, now func() time.Time) (RequestSigner, []byte, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate webhook key: %w", err)
	}
	jwk, err := webhookauth.PublicJWK(kid, priv)
	if err != nil {
		return nil, nil, fmt.Errorf("webhook jwk: %w", err)
	}
	jwks := append(append([]byte(`{"keys":[`), jwk...), "]}"...)
	return &webhookauth.RFC9421Signer{KeyID: kid, Key: priv, Now: now}, jwks, nil
}
