package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/apiclient"
	"github.com/buyflow/buyflow/internal/devstack"
	"github.com/buyflow/buyflow/internal/workflow"
)

// A buy whose seller holds its task goes quiet; the sweep then checks that the buy's execution
// still runs (DescribeExecution, under the reconcile function's role in the synthesized stack),
// finds it running and leaves the buy alone; once the seller finishes, the buy completes.
func TestSweepChecksTheExecutionOfAQuietBuy(t *testing.T) {
	c := begin(t)
	if suite.local == nil || suite.local.IAM == nil {
		t.Skip("the sweep's calls are seen on the local stack with BUYFLOW_E2E_IAM unset")
	}
	sub := submit(t, c, buy{PO: po(t), Sim: "async_complete hold"})
	op := waitFor(t, c, sub.OperationID, time.Minute, func(op api.MediaBuy) bool {
		return op.SellerTaskID != "" || apiclient.Terminal(op.Status)
	})
	if op.SellerTaskID == "" {
		t.Fatalf("the buy ended %s before its seller held a task", op.Status)
	}
	execution := ":" + workflow.ExecutionName(sub.OperationID, 0)
	described := func() bool {
		for _, call := range suite.local.IAM.Calls() {
			if call.Caller == "reconcile" && call.Action == "states:DescribeExecution" && !call.Denied &&
				strings.Contains(call.Resource, ":execution:") && strings.HasSuffix(call.Resource, execution) {
				return true
			}
		}
		return false
	}
	// The sweep runs every 10 s locally and checks a buy quiet for runConfig's 1 s.
	for deadline := time.Now().Add(2 * time.Minute); !described(); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the sweep never described the execution of %s (…%s)", sub.OperationID, execution)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if now, err := c.Get(ctx, sub.OperationID); err != nil || apiclient.Terminal(now.Status) || now.Reason != "" {
		t.Fatalf("after the sweep's check the running buy is %s (%q), %v; want it left pending", now.Status, now.Reason, err)
	}
	if err := suite.local.Seller.Finish(op.SellerTaskID, "completed"); err != nil {
		t.Fatal(err)
	}
	finished(t, c, sub.OperationID, "completed")
}

// A scheduled sweep runs its shards through the queue, as on AWS: the planner sends them
// (sqs:SendMessage under the reconcile role), the queue's mapping invokes the reconcile function
// with batches of them after that plan, and deletes each shard once it is done.
func TestScheduledSweepRunsItsShardsThroughTheQueue(t *testing.T) {
	begin(t)
	if suite.local == nil {
		t.Skip("the queue's mapping is the local stack's")
	}
	start, before := time.Now(), suite.local.SweepQueueStats()
	// The first plan after the start, and the first batch of shards after that plan.
	var plan, batch time.Time
	for deadline := time.Now().Add(45 * time.Second); batch.IsZero(); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no plan and batch of shards after it in 45 s (plan at %v); queue %+v, was %+v", plan, suite.local.SweepQueueStats(), before)
		}
		for _, e := range suite.local.Trace.Events() {
			if e.Kind != devstack.TraceInvoke || e.Function != "reconcile" || e.At.Before(start) {
				continue
			}
			switch {
			case e.Source == "" && plan.IsZero():
				plan = e.At
			case e.Source == "aws:sqs" && !plan.IsZero() && e.At.After(plan):
				batch = e.At
			}
		}
	}
	for deadline := time.Now().Add(30 * time.Second); suite.local.SweepQueueStats().Deleted <= before.Deleted; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no shard deleted after its batch: queue %+v, was %+v", suite.local.SweepQueueStats(), before)
		}
	}
	if suite.local.IAM == nil {
		return
	}
	sent := false
	for _, call := range suite.local.IAM.Calls() {
		sent = sent || call.Caller == "reconcile" && call.Action == "sqs:SendMessage" && !call.Denied && strings.HasPrefix(call.Resource, "arn:aws:sqs:")
	}
	if !sent {
		t.Error("the planner's sqs:SendMessage was not seen under the reconcile role")
	}
}
