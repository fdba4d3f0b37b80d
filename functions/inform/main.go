// Command inform is the requester notifier: an EventBridge rule sends it the status events of
// buys whose submit asked to be told in Slack.
package main

import (
	"context"
	"fmt"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/buyflow/buyflow/functions/internal/wire"
	"github.com/buyflow/buyflow/internal/inform"
	"github.com/buyflow/buyflow/internal/slack"
)

func main() { wire.Main(run) }

func run(ctx context.Context, getenv func(string) string) error {
	c, err := wire.Load("inform", getenv)
	if err != nil {
		return err
	}
	raw, err := c.Secrets().Get(ctx, c.Env.SlackSecret)
	if err != nil {
		return fmt.Errorf("inform: slack: %w", err)
	}
	cfg, err := slack.ParseConfig(raw)
	if err != nil {
		return fmt.Errorf("inform: slack config from secret %s: %w", c.Env.SlackSecret, err)
	}
	var bot slack.Client // none for an incoming webhook: see inform.New
	if cfg.Mode() == "bot" {
		if bot, err = slack.NewClient(cfg); err != nil {
			return fmt.Errorf("inform: slack client: %w", err)
		}
	}
	lambda.Start(inform.New(c.Ledger(), bot).Handle) // blocks
	return nil
}
