package approval_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/approval"
	"github.com/buyflow/buyflow/internal/slack"
)

// secretsFunc is a function-typed fake of approval.SecretGetter.
type secretsFunc func(name string) ([]byte, error)

func (f secretsFunc) Get(_ context.Context, name string) ([]byte, error) { return f(name) }

// testKeys is a link-key set of two 256-bit keys, k2 current.
var testKeys = `{"current":"k2","keys":{"k1":"` + strings.Repeat("A", 43) + `","k2":"` + strings.Repeat("B", 42) + "A" + `"}}`

func TestLoadSecrets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := secretsFunc(func(name string) ([]byte, error) {
		switch name {
		case "keys":
			return []byte(testKeys), nil
		case "bad-keys":
			return []byte(`{"current":"k1","keys":{"k1":"c2hvcnQ"}}`), nil
		case "bot":
			return []byte(`{"bot_token":"xoxb-secret-value"}`), nil
		case "hook":
			return []byte("https://hooks.slack.com/services/T/B/secret-value"), nil
		}
		return nil, errors.New("secrets: " + name + ": no such secret")
	})
	if _, err := approval.LoadSigner(ctx, store, "keys", time.Now); err != nil {
		t.Errorf("LoadSigner: %v", err)
	}
	if _, err := approval.LoadSigner(ctx, store, "bad-keys", time.Now); err == nil || strings.Contains(err.Error(), "c2hvcnQ") {
		t.Errorf("LoadSigner(bad) = %v", err)
	}
	if _, d, err := approval.LoadSlack(ctx, store, "bot"); err != nil || d != slack.Direct {
		t.Errorf("LoadSlack(bot) = %v, %v", d, err)
	}
	if _, d, err := approval.LoadSlack(ctx, store, "hook"); err != nil || d != slack.Shared {
		t.Errorf("LoadSlack(hook) = %v, %v", d, err)
	}
	if _, _, err := approval.LoadSlack(ctx, store, "missing"); err == nil {
		t.Error("LoadSlack(missing) succeeded")
	}
}
