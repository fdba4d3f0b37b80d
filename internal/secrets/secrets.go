// Package secrets reads secrets from AWS Secrets Manager once per cold start and keeps them in
// memory. Only secret names travel in configuration; values never reach a log line, an error
// message or a state's input or output.
package secrets

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrNotFound reports a secret that does not exist.
var ErrNotFound = errors.New("secrets: no such secret")

// api reads a secret's current value; *Client is the one that calls Secrets Manager.
type api interface {
	SecretValue(ctx context.Context, name string) ([]byte, error)
}

var _ api = (*Client)(nil)

// Store caches secret values by name. It is safe for concurrent use.
type Store struct {
	api api

	mu     sync.Mutex
	values map[string][]byte
}

// New returns a Store reading through api.
func New(api api) *Store { return &Store{api: api, values: map[string][]byte{}} }

// Get returns the value of the secret name (SecretString, or SecretBinary when the secret is
// binary), fetching it on first use.
func (s *Store) Get(ctx context.Context, name string) ([]byte, error) {
	s.mu.Lock()
	cached, ok := s.values[name]
	s.mu.Unlock()
	if ok {
		return cached, nil
	}
	v, err := s.api.SecretValue(ctx, name)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, fmt.Errorf("secrets: %s: %w", name, ErrNotFound)
	case err != nil:
		return nil, fmt.Errorf("secrets: read %s: %w", name, err)
	}
	s.mu.Lock()
	s.values[name] = v
	s.mu.Unlock()
	return v, nil
}

// Token returns the secret name as a string: the shape internal/adcp's Credentials wants,
// where ref is the secret name.
func (s *Store) Token(ctx context.Context, ref string) (string, error) {
	v, err := s.Get(ctx, ref)
	if err != nil {
		return "", err
	}
	return string(v), nil
}
