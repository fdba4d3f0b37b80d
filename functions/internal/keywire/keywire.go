// Package keywire (functions/internal/keywire) loads the request-signing keys a function uses:
// the signer of a function that calls agents, the keys the webhook function publishes as the
// JWKS. It stands apart from wire so that the functions that sign nothing (approve, notify,
// inform, publish, submit) link none of it.
package keywire

import (
	"context"
	"strings"

	"github.com/buyflow/buyflow/functions/internal/wire"
	"github.com/buyflow/buyflow/internal/reqsign"
	"github.com/buyflow/buyflow/internal/signingkey"
)

// SigningKey loads the request-signing key the deployment names (BUYFLOW_SIGNING_KEY): nil
// when it names none, and buyflow then signs nothing. A KMS key's public half is read now; its
// private half never leaves KMS.
func SigningKey(ctx context.Context, c *wire.Cold) (*signingkey.Key, error) {
	if c.Env.SigningKey == "" {
		return nil, nil
	}
	return signingkey.Load(ctx, c.Env.SigningKey, signingkey.NewKMS(c.AWS))
}

// RequestSigner is the signer of the function's AdCP client: nil without a signing key.
func RequestSigner(ctx context.Context, c *wire.Cold) (*reqsign.Signer, error) {
	k, err := SigningKey(ctx, c)
	if k == nil || err != nil {
		return nil, err
	}
	return &reqsign.Signer{KeyID: k.KeyID, Key: k.Signer}, nil
}

// PublishedKeys are the keys the JWKS serves: the signing key and the ones
// BUYFLOW_SIGNING_KEYS_PUBLISHED adds (the next, the previous).
func PublishedKeys(ctx context.Context, c *wire.Cold) ([]*signingkey.Key, error) {
	var keys []*signingkey.Key
	refs := []string{c.Env.SigningKey}
	if c.Env.SigningKeysPublished != "" {
		refs = append(refs, strings.Split(c.Env.SigningKeysPublished, ",")...)
	}
	for _, ref := range refs {
		if ref = strings.TrimSpace(ref); ref == "" {
			continue
		}
		k, err := signingkey.Load(ctx, ref, signingkey.NewKMS(c.AWS))
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	return keys, nil
}
