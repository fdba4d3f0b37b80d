package approval

import (
	"context"
	"fmt"
	"time"

	"github.com/buyflow/buyflow/internal/approvalcore"
	"github.com/buyflow/buyflow/internal/slack"
)

// secretGetter reads a secret's value by name; *secrets.Store satisfies it (once per cold
// start).
type secretGetter interface {
	Get(ctx context.Context, name string) ([]byte, error)
}

// LoadSigner reads the link-signing keys from the secret name and returns a Signer on now.
// Errors name the secret, never its value.
func LoadSigner(ctx context.Context, sg secretGetter, name string, now func() time.Time) (*approvalcore.Signer, error) {
	raw, err := sg.Get(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("approval: link keys: %w", err)
	}
	keys, err := approvalcore.ParseKeys(raw)
	if err != nil {
		return nil, fmt.Errorf("approval: link keys from secret %s: %w", name, err)
	}
	return approvalcore.NewSigner(keys, now)
}

// LoadSlack reads the Slack secret name and returns the client and how requests are
// delivered: Direct (one DM per approver) for a bot token, Shared (one channel message) for
// an incoming webhook.
func LoadSlack(ctx context.Context, sg secretGetter, name string, opts ...slack.Option) (slack.Client, slack.Delivery, error) {
	raw, err := sg.Get(ctx, name)
	if err != nil {
		return nil, 0, fmt.Errorf("approval: slack: %w", err)
	}
	cfg, err := slack.ParseConfig(raw)
	if err != nil {
		return nil, 0, fmt.Errorf("approval: slack config from secret %s: %w", name, err)
	}
	c, err := slack.NewClient(cfg, opts...)
	if err != nil {
		return nil, 0, fmt.Errorf("approval: slack client: %w", err)
	}
	if cfg.Mode() == "webhook" {
		return c, slack.Shared, nil
	}
	return c, slack.Direct, nil
}

// FromSecrets is the part of a Config both approval Lambdas read from Secrets Manager once per
// cold start: the link signer (on time.Now) from the keys secret linkKeys, the Slack client and
// its delivery from the secret slackSecret. The caller fills in the rest.
func FromSecrets(ctx context.Context, sg secretGetter, linkKeys, slackSecret string) (Config, error) {
	signer, err := LoadSigner(ctx, sg, linkKeys, time.Now)
	if err != nil {
		return Config{}, err
	}
	sl, delivery, err := LoadSlack(ctx, sg, slackSecret)
	if err != nil {
		return Config{}, err
	}
	return Config{Signer: signer, Slack: sl, Delivery: delivery}, nil
}
