package webhookroute

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/record"
)

var (
	secretA = []byte("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ01")
	secretB = []byte("ZYXWVUTSRQPONMLKJIHGFEDCBAzyxwvutsrqponmlkjihgfedcba9876543210ab")
	owner   = record.OperationOwner{Tenant: "123456789012", SellerID: "acme-seller"}
)

func mustKey(t testing.TB, secret []byte) *Key {
	t.Helper()
	k, err := NewKey(secret)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSealOpens(t *testing.T) {
	k := mustKey(t, secretA)
	route, err := k.Seal("op-1", owner)
	if err != nil {
		t.Fatal(err)
	}
	if url.QueryEscape(route) != route {
		t.Errorf("route %q needs escaping in a URL", route)
	}
	if strings.Contains(route, owner.Tenant) || strings.Contains(route, owner.SellerID) {
		t.Errorf("route %q shows the owner", route)
	}
	got, ok := k.Open("op-1", route)
	if !ok || got != owner {
		t.Fatalf("Open = %+v, %v; want %+v", got, ok, owner)
	}
	again, _ := k.Seal("op-1", owner)
	if again == route {
		t.Error("two seals of one owner are equal: the nonce is not fresh")
	}
}

func TestOpenRefuses(t *testing.T) {
	k := mustKey(t, secretA)
	route, err := k.Seal("op-1", owner)
	if err != nil {
		t.Fatal(err)
	}
	flipped := []byte(route)
	flipped[len(flipped)/2] ^= 1
	if flipped[len(flipped)/2] == '_'^1 || flipped[len(flipped)/2] == '-'^1 {
		flipped[len(flipped)/2] = 'A'
	}
	for name, c := range map[string]struct {
		key       *Key
		op, route string
	}{
		"another operation": {k, "op-2", route},
		"another secret":    {mustKey(t, secretB), "op-1", route},
		"tampered":          {k, "op-1", string(flipped)},
		"truncated":         {k, "op-1", route[:len(route)-4]},
		"empty":             {k, "op-1", ""},
		"not base64":        {k, "op-1", route[:10] + "%%" + route[12:]},
		"padded":            {k, "op-1", route + "=="},
		"too long":          {k, "op-1", strings.Repeat("A", maxRouteChars+4)},
		"nonce only":        {k, "op-1", "AAAAAAAAAAAAAAAA"},
	} {
		if got, ok := c.key.Open(c.op, c.route); ok {
			t.Errorf("%s: opened to %+v", name, got)
		}
	}
}

func TestSealNeedsAWholeOwner(t *testing.T) {
	k := mustKey(t, secretA)
	for _, o := range []record.OperationOwner{{Tenant: "t"}, {SellerID: "s"}, {Tenant: "t\x00u", SellerID: "s"}, {Tenant: "t", SellerID: "s\x00"}} {
		if r, err := k.Seal("op-1", o); err == nil {
			t.Errorf("Seal(%+v) = %q, want an error", o, r)
		}
	}
}

func TestNewKeyNeedsEnoughSecret(t *testing.T) {
	if _, err := NewKey(secretA[:MinSecretBytes-1]); err == nil {
		t.Error("a 31-byte secret was taken")
	}
}

// getter is a secret store whose read fails while err is set, and counts reads.
type getter struct {
	value []byte
	err   error
	reads int
}

func (g *getter) Get(context.Context, string) ([]byte, error) {
	g.reads++
	return g.value, g.err
}

func TestSecretReadsOnceAndWaitsAfterAFailure(t *testing.T) {
	ctx := context.Background()
	g := &getter{value: secretA, err: errors.New("throttled")}
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	s := FromSecret(g, "buyflow/webhook-route-key")
	s.now = func() time.Time { return now }

	u, err := s.WebhookURL(ctx, "https://api.example/", "op-1", owner)
	if err == nil || u != "https://api.example/v1/webhooks/adcp/op-1" {
		t.Fatalf("WebhookURL with the secret unreadable = %q, %v; want the URL without a route and the error", u, err)
	}
	if strings.Contains(err.Error(), string(secretA)) || !strings.Contains(err.Error(), "buyflow/webhook-route-key") {
		t.Errorf("error %q: want the secret's name, never its value", err)
	}
	if _, ok := s.Open(ctx, "op-1", "anything"); ok || g.reads != 1 {
		t.Fatalf("Open within a minute of the failure read the secret again (%d reads)", g.reads)
	}
	g.err = nil
	now = now.Add(retryAfter)
	u, err = s.WebhookURL(ctx, "https://api.example", "op-1", owner)
	if err != nil || g.reads != 2 {
		t.Fatalf("WebhookURL after a minute = %q, %v (%d reads)", u, err, g.reads)
	}
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	if parsed.Path != "/v1/webhooks/adcp/op-1" {
		t.Errorf("path %q", parsed.Path)
	}
	if got, ok := s.Open(ctx, "op-1", parsed.Query().Get(Param)); !ok || got != owner {
		t.Errorf("the URL's route opens to %+v, %v", got, ok)
	}
	if g.reads != 2 {
		t.Errorf("the key was read %d times, want 2", g.reads)
	}
}

func TestNoSecretNoRoutes(t *testing.T) {
	s := FromSecret(&getter{value: secretA}, "") // no name: a nil *Secret
	u, err := s.WebhookURL(context.Background(), "https://api.example", "op-1", owner)
	if err != nil || u != "https://api.example/v1/webhooks/adcp/op-1" {
		t.Errorf("WebhookURL = %q, %v", u, err)
	}
	if _, ok := s.Open(context.Background(), "op-1", "x"); ok {
		t.Error("a nil Secret opened a route")
	}
}

// sealedOp1 is owner's route for op-1 under secretA, sealed once (a seal's nonce is random,
// and the fuzzing workers are processes of their own).
const sealedOp1 = "EkFuwXk29kNYKV3lYIz0Dnvh7gBloJz8GPz573b4vFtd5jo9AkGyB7MtTz7rv__yZjE_qw"

// FuzzOpen: a route comes from the URL anyone may post to. Open never panics, and it opens
// nothing but what was sealed, spelt as it was sealed, for the operation it was sealed for.
func FuzzOpen(f *testing.F) {
	k := mustKey(f, secretA)
	if got, ok := k.Open("op-1", sealedOp1); !ok || got != owner {
		f.Fatalf("the sealed seed opens to %+v, %v", got, ok)
	}
	sealed := sealedOp1
	f.Add("op-1", sealed)
	f.Add("op-2", sealed)
	f.Add("op-1", "")
	f.Add("op-1", "AAAA")
	f.Fuzz(func(t *testing.T, op, route string) {
		got, ok := k.Open(op, route)
		if ok && (op != "op-1" || route != sealed || got != owner) {
			t.Fatalf("Open(%q, %q) = %+v: not what was sealed", op, route, got)
		}
	})
}

// blockingGetter's read waits for release.
type blockingGetter struct {
	started, release chan struct{}
}

func (g *blockingGetter) Get(context.Context, string) ([]byte, error) {
	close(g.started)
	<-g.release
	return secretA, nil
}

// TestOpenDoesNotWaitForTheRead: while the secret is read (the cold start's Prefetch), a
// delivery's Open gets no key at once (its owner is then read from the ledger), while a
// stage's Key, sealing a URL the seller keeps for the buy's life, waits for the read.
func TestOpenDoesNotWaitForTheRead(t *testing.T) {
	ctx := context.Background()
	g := &blockingGetter{started: make(chan struct{}), release: make(chan struct{})}
	s := FromSecret(g, "routes")
	s.Prefetch()
	<-g.started
	k := mustKey(t, secretA)
	route, err := k.Seal("op-1", owner)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Open(ctx, "op-1", route); ok {
		t.Fatal("Open had the key before the read ended")
	}
	if _, err := s.load(ctx, false); !errors.Is(err, errReading) {
		t.Fatalf("a caller that does not wait: %v, want errReading", err)
	}
	waited := make(chan error, 1)
	go func() {
		_, err := s.Key(ctx)
		waited <- err
	}()
	select {
	case err := <-waited:
		t.Fatalf("Key did not wait for the read: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(g.release)
	if err := <-waited; err != nil {
		t.Fatalf("Key after the read: %v", err)
	}
	if got, ok := s.Open(ctx, "op-1", route); !ok || got != owner {
		t.Fatalf("Open after the read = %+v, %v", got, ok)
	}
}

// TestKeyWaitGivesUpWithItsContext: a stage's wait ends with its request.
func TestKeyWaitGivesUpWithItsContext(t *testing.T) {
	g := &blockingGetter{started: make(chan struct{}), release: make(chan struct{})}
	defer close(g.release)
	s := FromSecret(g, "routes")
	s.Prefetch()
	<-g.started
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := s.Key(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Key = %v, want the context's deadline", err)
	}
}

// TestOpenNeverReadsOnItsPath: with no key and no read under way (after a failed read's
// minute), Open starts the read in the background and answers at once.
func TestOpenNeverReadsOnItsPath(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	failing := &getter{err: errors.New("AccessDenied")}
	s := FromSecret(failing, "routes")
	s.now = func() time.Time { return now }
	if _, err := s.Key(ctx); err == nil {
		t.Fatal("the failing read gave a key")
	}
	g := &blockingGetter{started: make(chan struct{}), release: make(chan struct{})}
	s.get = g
	now = now.Add(retryAfter)
	route, err := mustKey(t, secretA).Seal("op-1", owner)
	if err != nil {
		t.Fatal(err)
	}
	answered := make(chan bool, 1)
	go func() {
		_, ok := s.Open(ctx, "op-1", route)
		answered <- ok
	}()
	select {
	case ok := <-answered:
		if ok {
			t.Fatal("Open had a key nobody had read")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Open waited for the secret's read")
	}
	<-g.started // the read Open started
	close(g.release)
	if k, err := s.Key(ctx); err != nil || k == nil {
		t.Fatalf("Key after the background read: %v, %v", k, err)
	}
	if got, ok := s.Open(ctx, "op-1", route); !ok || got != owner {
		t.Errorf("Open after the read = %+v, %v", got, ok)
	}
}
