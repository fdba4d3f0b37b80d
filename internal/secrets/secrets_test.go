package secrets

import (
	"context"
	"errors"
	"strings"
	"testing"
)

type fakeAPI func(name string) ([]byte, error)

func (f fakeAPI) SecretValue(_ context.Context, name string) ([]byte, error) { return f(name) }

func TestGetCachesAndHidesValues(t *testing.T) {
	calls := 0
	s := New(fakeAPI(func(name string) ([]byte, error) {
		calls++
		switch name {
		case "seller-token":
			return []byte("s3cr3t"), nil
		case "bin":
			return []byte{1, 2}, nil
		case "broken":
			return nil, errors.New("throttled")
		}
		return nil, ErrNotFound
	}))
	ctx := context.Background()
	for range 3 {
		tok, err := s.Token(ctx, "seller-token")
		if err != nil || tok != "s3cr3t" {
			t.Fatalf("Token = %q, %v", tok, err)
		}
	}
	if calls != 1 {
		t.Fatalf("fetched %d times, want 1", calls)
	}
	if b, err := s.Get(ctx, "bin"); err != nil || len(b) != 2 {
		t.Fatalf("binary = %v, %v", b, err)
	}
	if _, err := s.Get(ctx, "missing"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
	_, err := s.Get(ctx, "broken")
	if err == nil || strings.Contains(err.Error(), "s3cr3t") {
		t.Fatalf("broken: %v", err)
	}
	// A failed read is not cached.
	if _, err := s.Get(ctx, "broken"); err == nil {
		t.Fatal("second read of broken succeeded")
	}
}
