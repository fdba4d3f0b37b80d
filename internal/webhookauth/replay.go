package webhookauth

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// ReplayStore records RFC 9421 (keyid, nonce) pairs for their validity
// window. The ledger provides a DynamoDB implementation; MemoryReplayStore
// serves tests and single-process use.
type ReplayStore interface {
	// Seen atomically records (keyID, nonce) until the given time and
	// reports whether the pair was already recorded and not yet expired.
	// Check and insert must be one atomic step shared by every process
	// (for DynamoDB: a conditional put on attribute_not_exists or an
	// expired TTL attribute). It may return an error wrapping ErrRateAbuse
	// when the per-key capacity is exhausted; any other error is treated
	// as a store failure (Code returns "", answer 5xx).
	Seen(ctx context.Context, keyID, nonce string, until time.Time) (bool, error)
}

// replayCapacity is optionally implemented by a ReplayStore that bounds the
// entries per key id. The Verifier asks it before the (expensive)
// signature check, so a flood under one key id is refused cheaply with
// ErrRateAbuse.
type replayCapacity interface {
	AtCapacity(ctx context.Context, keyID string, now time.Time) (bool, error)
}

// defaultReplayCap is MemoryReplayStore's default per-key-id entry cap.
const defaultReplayCap = 100_000

// MemoryReplayStore is an in-process ReplayStore with a per-key-id cap.
// The zero value is not usable; call NewMemoryReplayStore.
type MemoryReplayStore struct {
	cap int
	now func() time.Time

	mu      sync.Mutex
	entries map[string]map[string]time.Time // keyID → nonce → until
}

var (
	_ ReplayStore    = (*MemoryReplayStore)(nil)
	_ replayCapacity = (*MemoryReplayStore)(nil)
)

// NewMemoryReplayStore returns a store holding at most perKeyCap live
// entries per key id (DefaultReplayCap if perKeyCap ≤ 0). now is used to
// expire entries; nil means time.Now.
func NewMemoryReplayStore(perKeyCap int, now func() time.Time) *MemoryReplayStore {
	if perKeyCap <= 0 {
		perKeyCap = defaultReplayCap
	}
	if now == nil {
		now = time.Now
	}
	return &MemoryReplayStore{cap: perKeyCap, now: now, entries: make(map[string]map[string]time.Time)}
}

// Seen implements ReplayStore.
func (m *MemoryReplayStore) Seen(_ context.Context, keyID, nonce string, until time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	byNonce := m.entries[keyID]
	if byNonce == nil {
		byNonce = make(map[string]time.Time)
		m.entries[keyID] = byNonce
	}
	if exp, ok := byNonce[nonce]; ok && now.Before(exp) {
		return true, nil
	}
	if len(byNonce) >= m.cap {
		m.sweep(byNonce, now)
		if len(byNonce) >= m.cap {
			return false, fmt.Errorf("%w: key %q", ErrRateAbuse, keyID)
		}
	}
	byNonce[nonce] = until
	return false, nil
}

// AtCapacity implements ReplayCapacity.
func (m *MemoryReplayStore) AtCapacity(_ context.Context, keyID string, now time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	byNonce := m.entries[keyID]
	if len(byNonce) < m.cap {
		return false, nil
	}
	m.sweep(byNonce, now)
	return len(byNonce) >= m.cap, nil
}

func (m *MemoryReplayStore) sweep(byNonce map[string]time.Time, now time.Time) {
	for n, exp := range byNonce {
		if !now.Before(exp) {
			delete(byNonce, n)
		}
	}
}

// revocationChecker reports whether a key id is revoked. It returns an
// error wrapping ErrRevocationStale when its list is past its refresh
// grace, which blocks verification until the list is refreshed.
type revocationChecker interface {
	Revoked(ctx context.Context, keyID string) (bool, error)
}

// RevocationList is a static RevocationChecker: a set of revoked key ids,
// when it was last refreshed, and how long it may be used after that.
type RevocationList struct {
	KeyIDs    []string
	UpdatedAt time.Time
	MaxAge    time.Duration    // 0 means the list never goes stale
	Now       func() time.Time // nil means time.Now
}

// Revoked implements RevocationChecker.
func (l *RevocationList) Revoked(_ context.Context, keyID string) (bool, error) {
	if l.MaxAge > 0 {
		now := time.Now
		if l.Now != nil {
			now = l.Now
		}
		if now().Sub(l.UpdatedAt) > l.MaxAge {
			return false, fmt.Errorf("%w: last refreshed %s", ErrRevocationStale, l.UpdatedAt.UTC().Format(time.RFC3339))
		}
	}
	for _, k := range l.KeyIDs {
		if k == keyID {
			return true, nil
		}
	}
	return false, nil
}
