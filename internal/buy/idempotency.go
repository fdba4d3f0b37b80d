package buy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/buyflow/buyflow/internal/record"
)

// Claims is the part of the ledger that makes a submit idempotent.
type Claims interface {
	Claim(ctx context.Context, tenant, idempotencyKey, payloadHash string) (*record.Claim, error)
	CompleteClaim(ctx context.Context, c *record.Claim, id string, response json.RawMessage) error
	ReleaseClaim(ctx context.Context, c *record.Claim) error
}

// Once runs place under the tenant's Idempotency-Key: the first request with a key runs it and
// stores its answer, which every retry with the same payload gets back (marked by replayed);
// the same key with another payload is refused with 422. what names the thing submitted in that
// refusal ("media buy", "campaign"). place must converge when run twice for one key: a retry
// that finds the claim still in progress (its first attempt died, or still runs) runs it too.
func Once[T interface{ ID() string }](ctx context.Context, l Claims, tenant, key, payloadHash, what string,
	replayed func(*T), place func() (T, error)) (T, error) {
	var zero T
	claim, err := l.Claim(ctx, tenant, key, payloadHash)
	var exists *record.ClaimExistsError
	switch {
	case errors.Is(err, record.ErrPayloadMismatch):
		return zero, unprocessable("idempotency_key_reused", "Idempotency-Key",
			"this Idempotency-Key was already used for a different %s; use a new key for a new %s", what, what)
	case errors.As(err, &exists):
		if exists.Existing.Status == record.ClaimCompleted {
			var out T
			if err := json.Unmarshal(exists.Existing.Response, &out); err != nil {
				return zero, fmt.Errorf("buy: decode replayed response: %w", err)
			}
			replayed(&out)
			return out, nil
		}
		// Another attempt of this very request (same tenant, key and body) holds the claim: it
		// is still running, or it died mid-way (a client's transport may also resend a request
		// whose connection broke). Every step of place converges on the same result — ids
		// derive from the key, locks are owned by those ids, creates are conditional and
		// executions are named after them — so run it too rather than make the client wait
		// out the claim. The claim's owner completes it.
		return place()
	case err != nil:
		return zero, fmt.Errorf("buy: claim idempotency key: %w", err)
	}

	out, err := place()
	if err != nil {
		// Free the key at once so the client's retry runs again (and converges on the same
		// ids); a refusal leaves nothing behind.
		if rerr := l.ReleaseClaim(ctx, claim); rerr != nil {
			err = errors.Join(err, fmt.Errorf("buy: release claim: %w", rerr))
		}
		return zero, err
	}
	resp, err := json.Marshal(out)
	if err != nil {
		return zero, fmt.Errorf("buy: encode response: %w", err)
	}
	if err := l.CompleteClaim(ctx, claim, out.ID(), resp); err != nil {
		// What place created exists; a retry converges on it.
		return zero, fmt.Errorf("buy: complete claim: %w", err)
	}
	return out, nil
}
