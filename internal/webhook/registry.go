package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/buyflow/buyflow/internal/registry"
	"github.com/buyflow/buyflow/internal/webhookauth"
)

// verifierSource gives the verifier of a seller's webhooks. A nil verifier with a nil error
// means the seller has no webhook settings.
type verifierSource interface {
	Verifier(ctx context.Context, sellerID string) (Verifier, error)
}

// Registry is the agent registry as the receiver reads it; *agents.Cache satisfies it.
type Registry interface {
	Lookup(ctx context.Context, id string) (registry.Record, error)
	Refresh(ctx context.Context) error
}

var _ Registry = (*registry.Cache)(nil)

// DefaultKeyMissRefresh is the shortest gap between two registry reloads for one seller
// triggered by a key id its verifier does not know: the first webhook signed with a rotated
// key reloads the registry, a stream of forged key ids does not hammer the table.
const DefaultKeyMissRefresh = 10 * time.Second

// RegistryVerifiers builds each seller's verifier from the agent registry on its first
// webhook, and builds it again when the seller's webhook settings change (an operator
// rotated its inline JWKS, moved its jwks_uri or switched its mode). A key id the verifier
// does not know reloads the registry once (rate-limited per seller) before the webhook is
// refused, so a rotated key is accepted on its first use. Safe for concurrent use.
type RegistryVerifiers struct {
	Registry Registry
	Secrets  Secrets
	Options  VerifierOptions
	// KeyMissRefresh is DefaultKeyMissRefresh when zero.
	KeyMissRefresh time.Duration

	mu    sync.Mutex
	built map[string]*sellerVerifier
}

type sellerVerifier struct {
	settings    string // the webhook settings it was built from, as JSON
	v           *webhookauth.Verifier
	lastRefresh time.Time
}

// Verifier returns seller id's verifier, building it if its settings are new. It is meant for
// one webhook: it verifies with the settings the registry had when it was returned (one
// lookup per webhook), and looks again only for a key id they do not know.
func (rv *RegistryVerifiers) Verifier(ctx context.Context, id string) (Verifier, error) {
	v, err := rv.current(ctx, id)
	if err != nil || v == nil {
		return nil, err
	}
	return registryVerifier{rv: rv, id: id, v: v}, nil
}

// current returns the verifier built from the seller's settings as the registry has them now.
func (rv *RegistryVerifiers) current(ctx context.Context, id string) (*webhookauth.Verifier, error) {
	r, err := rv.Registry.Lookup(ctx, id)
	if err != nil {
		return nil, err
	}
	settings, err := json.Marshal(r.Webhook)
	if err != nil {
		return nil, fmt.Errorf("webhook: encode webhook settings of %s: %w", id, err)
	}
	rv.mu.Lock()
	if rv.built == nil {
		rv.built = map[string]*sellerVerifier{}
	}
	sv := rv.built[id]
	rv.mu.Unlock()
	if sv != nil && sv.settings == string(settings) {
		return sv.v, nil
	}
	v, err := buildVerifier(ctx, r.Agent, rv.Secrets, rv.Options)
	if err != nil {
		return nil, err
	}
	rv.mu.Lock()
	defer rv.mu.Unlock()
	next := &sellerVerifier{settings: string(settings), v: v}
	if sv != nil {
		next.lastRefresh = sv.lastRefresh
	}
	rv.built[id] = next
	return v, nil
}

// mayRefresh reports whether seller id may reload the registry now, and notes that it does.
func (rv *RegistryVerifiers) mayRefresh(id string) bool {
	gap := rv.KeyMissRefresh
	if gap <= 0 {
		gap = DefaultKeyMissRefresh
	}
	now := time.Now
	if rv.Options.Now != nil {
		now = rv.Options.Now
	}
	rv.mu.Lock()
	defer rv.mu.Unlock()
	sv := rv.built[id]
	if sv == nil || (!sv.lastRefresh.IsZero() && now().Sub(sv.lastRefresh) < gap) {
		return false
	}
	sv.lastRefresh = now()
	return true
}

// registryVerifier verifies with the seller's verifier as Verifier found it and, on an unknown
// key id, reloads the registry once and verifies again with what it then says.
type registryVerifier struct {
	rv *RegistryVerifiers
	id string
	v  *webhookauth.Verifier
}

func (r registryVerifier) VerifyDeferred(ctx context.Context, req webhookauth.Request) (webhookauth.Verified, error) {
	v := r.v
	res, err := v.VerifyDeferred(ctx, req)
	if !errors.Is(err, webhookauth.ErrUnknownKey) || !r.rv.mayRefresh(r.id) {
		return res, err
	}
	if rerr := r.rv.Registry.Refresh(ctx); rerr != nil {
		return res, err
	}
	next, nerr := r.rv.current(ctx, r.id)
	if nerr != nil || next == nil || next == v {
		return res, err
	}
	return next.VerifyDeferred(ctx, req)
}
