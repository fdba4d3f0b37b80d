// Command reconcile is the reconciliation sweep. EventBridge Scheduler invokes it every minute to
// plan: one shard per seller, sent to the sweep's queue (internal/sweepqueue); the queue invokes
// it again with batches of shards (reconcile.Service.Shards), each reading the
// status of its seller's pending tasks (list_tasks, else task by task), records
// what moved on and wakes the workflow, fails operations whose task the seller does not know,
// records orphans and marks stuck operations (internal/reconcile; runbook in
// internal/reconcile/RUNBOOK.md). After each plan it reads the delivery of the live buys that
// are due (internal/delivery).
package main

import (
	"context"
	"os"
	"time"

	"github.com/buyflow/buyflow/functions/internal/agentclient"
	"github.com/buyflow/buyflow/functions/internal/agentwire"
	"github.com/buyflow/buyflow/functions/internal/keywire"
	"github.com/buyflow/buyflow/functions/internal/wire"
	"github.com/buyflow/buyflow/internal/delivery"
	"github.com/buyflow/buyflow/internal/reconcile"
	"github.com/buyflow/buyflow/internal/sweepqueue"
)

func main() { wire.Main(run) }

func run(ctx context.Context, getenv func(string) string) error {
	c, err := wire.Load("reconcile", getenv)
	if err != nil {
		return err
	}
	reg, err := agentwire.Registry(ctx, c)
	if err != nil {
		return err
	}
	signer, err := keywire.RequestSigner(ctx, c)
	if err != nil {
		return err
	}
	client, err := agentclient.Guarded(c, reg, signer)
	if err != nil {
		return err
	}
	stateMachine := c.Tasks()
	svc, err := reconcile.New(reconcile.Config{
		Ledger: c.Ledger(), AdCP: client, Tasks: stateMachine, Executions: stateMachine, Sellers: reconcile.SellersOf(reg.All),
		RunConfig: c.Env.Run, Metrics: os.Stdout, Now: time.Now,
		StaleAfter: time.Duration(c.Env.Run.ExecutionCheckSeconds) * time.Second,
		Dispatcher: &sweepqueue.Dispatcher{API: c.Queues(), QueueURL: c.Env.SweepQueueURL},
	})
	if err != nil {
		return err
	}
	// The sweep writes its own metrics; this recorder carries a recovered panic's count and the
	// delivery read's SpendOverBudget.
	reader := delivery.New(c.Ledger(), client, delivery.Config{Cadence: delivery.Cadence{Every: time.Duration(c.Env.Run.DeliveryReadMinutes) * time.Minute}, Metrics: c.Metrics})
	wire.Start(c, sweepqueue.Handler(delivery.AfterSweep(svc.Handle, reader), svc.Shards)) // blocks
	return nil
}
