package webhookauth

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// Defaults for the JWKS cache.
const (
	// DefaultCacheTTL is how long a fetched JWKS is used before refetching.
	DefaultCacheTTL = 5 * time.Minute
	// DefaultRefetchCooldown is the minimum gap between fetches triggered
	// by an unknown kid.
	DefaultRefetchCooldown = 30 * time.Second
	// maxJWKSBytes bounds a fetched JWKS document.
	maxJWKSBytes = 1 << 20
)

// keySet resolves key ids to verification keys, from inline keys or a
// fetched, cached JWKS.
type keySet struct {
	url      string
	client   *http.Client
	ttl      time.Duration
	cooldown time.Duration
	now      func() time.Time

	// fetchMu serialises fetches so concurrent misses cost one request.
	fetchMu sync.Mutex

	mu        sync.RWMutex
	keys      map[string]*verifyKey
	fetchedAt time.Time // zero: never fetched successfully
	lastTry   time.Time // last fetch attempt, successful or not
	static    bool
}

// lookup returns the key for kid. With a JWKS URL it fetches when the
// cache is empty or older than ttl, and refetches once on an unknown kid
// unless the previous fetch was less than cooldown ago.
func (ks *keySet) lookup(ctx context.Context, kid string) (*verifyKey, error) {
	ks.mu.RLock()
	k, ok := ks.keys[kid]
	fresh := ks.static || (!ks.fetchedAt.IsZero() && ks.now().Sub(ks.fetchedAt) < ks.ttl)
	ks.mu.RUnlock()
	if ok && fresh {
		return k, nil
	}
	if ks.static {
		return nil, fmt.Errorf("%w: kid %q", ErrUnknownKey, kid)
	}
	if err := ks.refresh(ctx, !fresh); err != nil {
		// Serve a stale cache rather than fail closed on a JWKS outage.
		if ok {
			return k, nil
		}
		return nil, err
	}
	ks.mu.RLock()
	k, ok = ks.keys[kid]
	ks.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w: kid %q", ErrUnknownKey, kid)
	}
	return k, nil
}

// refresh fetches the JWKS. A stale cache is always refetched; a fresh one
// only if the cooldown since the last attempt has elapsed.
func (ks *keySet) refresh(ctx context.Context, stale bool) error {
	ks.fetchMu.Lock()
	defer ks.fetchMu.Unlock()
	ks.mu.RLock()
	lastTry, fetchedAt, have := ks.lastTry, ks.fetchedAt, ks.keys != nil
	ks.mu.RUnlock()
	now := ks.now()
	if stale && !fetchedAt.IsZero() && now.Sub(fetchedAt) < ks.ttl {
		return nil // another goroutine refreshed while we waited
	}
	if !lastTry.IsZero() && now.Sub(lastTry) < ks.cooldown {
		if have {
			return nil // answer from the cache; lookup reports unknown kid
		}
		return fmt.Errorf("%w: jwks fetch failed recently", ErrKeysUnavailable)
	}
	ks.mu.Lock()
	ks.lastTry = now
	ks.mu.Unlock()
	keys, err := ks.fetch(ctx)
	if err != nil {
		return err
	}
	ks.mu.Lock()
	ks.keys, ks.fetchedAt = keys, now
	ks.mu.Unlock()
	return nil
}

func (ks *keySet) fetch(ctx context.Context) (map[string]*verifyKey, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ks.url, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeysUnavailable, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := ks.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeysUnavailable, err)
	}
	// Only read from; a Close error cannot change the keys we parsed.
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: jwks answered %d", ErrKeysUnavailable, resp.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: read jwks: %w", ErrKeysUnavailable, err)
	}
	if len(data) > maxJWKSBytes {
		return nil, fmt.Errorf("%w: jwks larger than %d bytes", ErrKeysUnavailable, maxJWKSBytes)
	}
	keys, err := parseJWKS(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeysUnavailable, err)
	}
	return keys, nil
}
