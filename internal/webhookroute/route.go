// Package webhookroute seals an operation's owner (its tenant and seller) into the seller
// webhook URL buyflow registers, so that the webhook receiver reads the owner from the URL
// rather than from the ledger's operation index: one DynamoDB read fewer, in sequence, before
// a seller's update wakes the workflow. Once it knows the owner, the receiver verifies the
// request and reads the operation in the same round trip as it claims the delivery's receipt.
//
// A route is AES-256-GCM over the owner, bound to the operation id, under a key derived
// (HKDF-SHA256) from a secret only buyflow's functions read. The tenant is an AWS account id,
// which a seller is not told: a seller cannot read a route, forge one, or move one to another
// operation's URL. A route that does not open (a URL registered before routes, one sealed
// under a replaced secret, anything else) is no error: the receiver finds the owner in the
// ledger, as it did before routes. Replacing the secret is therefore the whole rotation.
package webhookroute

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/topology"
)

// Param is the query parameter of the webhook URL that carries the route.
const Param = "route"

// MinSecretBytes is the least a route secret may hold: 32 bytes of key material (the stack
// generates 64 characters of [A-Za-z0-9], about 380 bits).
const MinSecretBytes = 32

// maxRouteChars bounds a route before it is decoded: a tenant and a seller id of at most 128
// characters each, sealed, fit well within it.
const maxRouteChars = 512

// urlSafe is the alphabet of a route (base64url).
const urlSafe = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

// info binds the derived key to this use, and the associated data binds a route to this
// format and its operation: a future format changes both, and its routes simply do not open
// here.
const (
	info      = "buyflow webhook route key v1"
	aadPrefix = "buyflow webhook route v1\x00"
)

// Key seals and opens routes. It is safe for concurrent use.
type Key struct{ aead cipher.AEAD }

// NewKey derives the route key from secret, the value of the stack's route secret.
func NewKey(secret []byte) (*Key, error) {
	if len(secret) < MinSecretBytes {
		return nil, fmt.Errorf("webhookroute: the route secret holds %d bytes, want at least %d", len(secret), MinSecretBytes)
	}
	key, err := hkdf.Key(sha256.New, secret, nil, info, 32)
	if err != nil {
		return nil, fmt.Errorf("webhookroute: %w", err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("webhookroute: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("webhookroute: %w", err)
	}
	return &Key{aead: aead}, nil
}

// Seal returns the route of the operation opID owned by o (URL-safe base64, unpadded). Both
// halves of the owner are required and hold no NUL, which separates them.
func (k *Key) Seal(opID string, o record.OperationOwner) (string, error) {
	if o.Tenant == "" || o.SellerID == "" || strings.ContainsRune(o.Tenant, 0) || strings.ContainsRune(o.SellerID, 0) {
		return "", errors.New("webhookroute: an owner needs a tenant and a seller, without NUL")
	}
	nonce := make([]byte, k.aead.NonceSize())
	_, _ = rand.Read(nonce) // crypto/rand never fails (it crashes the program first)
	sealed := k.aead.Seal(nonce, nonce, []byte(o.Tenant+"\x00"+o.SellerID), []byte(aadPrefix+opID))
	return base64.RawURLEncoding.EncodeToString(sealed), nil
}

// Open returns the owner route was sealed with for the operation opID; false for anything
// else (malformed, tampered with, sealed for another operation or under another secret).
func (k *Key) Open(opID, route string) (record.OperationOwner, bool) {
	if route == "" || len(route) > maxRouteChars || strings.TrimLeft(route, urlSafe) != "" {
		return record.OperationOwner{}, false
	}
	// Strict, and the alphabet checked above (the decoder skips CR and LF): one route, one
	// spelling.
	sealed, err := base64.RawURLEncoding.Strict().DecodeString(route)
	if err != nil || len(sealed) < k.aead.NonceSize()+k.aead.Overhead() {
		return record.OperationOwner{}, false
	}
	n := k.aead.NonceSize()
	plain, err := k.aead.Open(nil, sealed[:n], sealed[n:], []byte(aadPrefix+opID))
	if err != nil {
		return record.OperationOwner{}, false
	}
	tenant, seller, ok := strings.Cut(string(plain), "\x00")
	if !ok || tenant == "" || seller == "" {
		return record.OperationOwner{}, false
	}
	return record.OperationOwner{Tenant: tenant, SellerID: seller}, true
}

// secretGetter reads a secret's value by name (*secrets.Store, which caches it).
type secretGetter interface {
	Get(ctx context.Context, name string) ([]byte, error)
}

// retryAfter is how long a Secret waits after a failed read before it reads again: meanwhile
// URLs go out without a route and deliveries are located in the ledger, as without routes.
const retryAfter = time.Minute

// Secret is the route key of a function, read from the secret name once, in the background
// from the cold start on (Prefetch) or on first use: the create and modify stages seal routes,
// the webhook receiver opens them. It is safe for concurrent use. A nil *Secret has no key: it
// seals nothing and opens nothing.
type Secret struct {
	get  secretGetter
	name string
	now  func() time.Time

	mu       sync.Mutex
	key      *Key
	reading  chan struct{} // closed when the read under way ends; nil while none is
	failed   error         // the last read's failure, until retryAfter has passed
	failedAt time.Time
}

// errReading is what a caller that does not wait gets while the secret is being read.
var errReading = errors.New("webhookroute: the route secret is being read")

// prefetchTimeout bounds the background read (the secrets client tries three times, 5 s each).
const prefetchTimeout = 30 * time.Second

// FromSecret returns the route key held in the secret name; nil when name is "" (no routes).
func FromSecret(get secretGetter, name string) *Secret {
	if name == "" {
		return nil
	}
	return &Secret{get: get, name: name, now: time.Now}
}

// Prefetch starts reading the secret in the background, so that neither the cold start nor the
// first request waits for it.
func (s *Secret) Prefetch() {
	if s == nil {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), prefetchTimeout)
		defer cancel()
		_, _ = s.load(ctx, true) // a failure is the next caller's to see
	}()
}

// Key returns the route key, reading the secret the first time (or waiting for the read under
// way), and again at most once per retryAfter while reading it fails. Errors name the secret,
// never its value.
func (s *Secret) Key(ctx context.Context) (*Key, error) { return s.load(ctx, true) }

// load is Key; a caller that does not wait gets errReading at once while the secret is read,
// or, when no read is under way, once it has started one in the background.
func (s *Secret) load(ctx context.Context, wait bool) (*Key, error) {
	if s == nil {
		return nil, errors.New("webhookroute: no route secret configured")
	}
	for {
		s.mu.Lock()
		key, reading, failed := s.key, s.reading, s.failed
		if failed != nil && s.now().Sub(s.failedAt) >= retryAfter {
			failed = nil
		}
		switch {
		case key != nil:
			s.mu.Unlock()
			return key, nil
		case reading != nil:
			s.mu.Unlock()
			if !wait {
				return nil, errReading
			}
			select {
			case <-reading:
				continue // its outcome is the state now
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		case failed != nil:
			s.mu.Unlock()
			return nil, failed
		case !wait:
			// A delivery never reads the secret on its own path: it starts the read and goes
			// on without the key.
			s.mu.Unlock()
			s.Prefetch()
			return nil, errReading
		}
		done := make(chan struct{})
		s.reading = done
		s.mu.Unlock()

		raw, err := s.get.Get(ctx, s.name)
		if err == nil {
			key, err = NewKey(raw)
		}

		s.mu.Lock()
		s.reading = nil
		close(done)
		if err != nil {
			s.failed, s.failedAt = fmt.Errorf("webhookroute: route secret %s: %w", s.name, err), s.now()
			err = s.failed
		} else {
			s.key, s.failed = key, nil
		}
		s.mu.Unlock()
		return key, err
	}
}

// WebhookURL is the seller webhook URL of the operation opID, owned by o, under the HTTP API's
// public root base: <base>/v1/webhooks/adcp/<opID>?route=<its route>. When the route cannot be
// sealed (the key cannot be read now) it returns the URL without one, which works, with the
// error for the caller's log; a nil *Secret returns it without one and no error.
func (s *Secret) WebhookURL(ctx context.Context, base, opID string, o record.OperationOwner) (string, error) {
	url := strings.TrimRight(base, "/") + topology.WebhookPathPrefix + opID
	if s == nil {
		return url, nil
	}
	k, err := s.Key(ctx)
	if err != nil {
		return url, err
	}
	route, err := k.Seal(opID, o)
	if err != nil {
		return url, err
	}
	return url + "?" + Param + "=" + route, nil
}

// Open is Key(ctx).Open, without waiting for a read under way: false as well when the key
// cannot be had now (the receiver then reads the owner from the ledger, as a wait would cost
// about as much).
func (s *Secret) Open(ctx context.Context, opID, route string) (record.OperationOwner, bool) {
	if s == nil || route == "" {
		return record.OperationOwner{}, false
	}
	k, err := s.load(ctx, false)
	if err != nil {
		return record.OperationOwner{}, false
	}
	return k.Open(opID, route)
}
