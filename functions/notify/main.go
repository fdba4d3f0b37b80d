// Command notify is the notify stage Lambda: action "request" parks the RequestApproval task
// token in the ledger and posts the Slack request; action "expire" handles the approval timeout.
package main

import (
	"context"
	"time"

	"github.com/buyflow/buyflow/functions/internal/wire"
	"github.com/buyflow/buyflow/internal/approval"
	"github.com/buyflow/buyflow/internal/notify"
)

func main() { wire.Main(run) }

func run(ctx context.Context, getenv func(string) string) error {
	c, err := wire.Load("notify", getenv)
	if err != nil {
		return err
	}
	cfg, err := approval.FromSecrets(ctx, c.Secrets(), c.Env.LinkKeySecret, c.Env.SlackSecret)
	if err != nil {
		return err
	}
	cfg.Ledger, cfg.Policy, cfg.BaseURL, cfg.Now, cfg.Metrics = c.Ledger(), c.Env.ApprovalPolicy, c.Env.PublicBaseURL, time.Now, c.Metrics
	notifier, err := notify.New(cfg)
	if err != nil {
		return err
	}
	wire.Start(c, notifier.Handle) // blocks
	return nil
}
