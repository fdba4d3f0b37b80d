// Command approve serves GET and POST /v1/approvals/{approval_id}: the confirm page and the
// ledger-first decision that resumes the parked RequestApproval task; and the IAM-authorized
// approver routes under /v1/approver/approvals (the approvals waiting for the caller).
package main

import (
	"context"
	"time"

	"github.com/buyflow/buyflow/functions/internal/wire"
	"github.com/buyflow/buyflow/internal/approval"
	"github.com/buyflow/buyflow/internal/approve"
	"github.com/buyflow/buyflow/internal/httpapi"
)

func main() { wire.Main(run) }

func run(ctx context.Context, getenv func(string) string) error {
	c, err := wire.Load("approve", getenv)
	if err != nil {
		return err
	}
	cfg, err := approval.FromSecrets(ctx, c.Secrets(), c.Env.LinkKeySecret, c.Env.SlackSecret)
	if err != nil {
		return err
	}
	cfg.Ledger, cfg.Policy, cfg.BaseURL, cfg.Now, cfg.Metrics = c.Ledger(), c.Env.ApprovalPolicy, c.Env.PublicBaseURL, time.Now, c.Metrics
	approver, err := approve.New(cfg, c.Tasks(), c.Env.DevTenantHeader)
	if err != nil {
		return err
	}
	wire.Start(c, httpapi.Recovering(c.Metrics, approver.HandleHTTP)) // blocks
	return nil
}
