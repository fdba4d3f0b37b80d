package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/apiclient"
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
