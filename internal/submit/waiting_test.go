package submit

import (
	"context"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/buytest"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/workflow"
)

func TestGetSaysTheBuyWaitsForAnUnavailableAgent(t *testing.T) {
	svc, store, _ := newService(t)
	ctx := context.Background()
	out, err := svc.Submit(ctx, acme, "key-waiting-1", buytest.Marshal(t, buytest.Example(t, "media-buy.json")))
	if err != nil {
		t.Fatal(err)
	}
	opened := time.Date(2030, 5, 1, 10, 0, 0, 0, time.UTC)
	if _, err := store.PutBreaker(ctx, record.Breaker{AgentID: "sim-governance", State: record.BreakerOpen, Failures: 5,
		OpenedAt: opened, RetryAt: opened.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	// The seller's breaker open too: a buy still at governance waits for governance only.
	seller, err := store.PutBreaker(ctx, record.Breaker{AgentID: "sim-seller", State: record.BreakerHalfOpen, OpenedAt: opened,
		RetryAt: opened.Add(time.Minute), ProbeUntil: opened.Add(2 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	v, err := svc.Get(ctx, "acme", out.OperationID)
	if err != nil {
		t.Fatal(err)
	}
	want := api.Waiting{Reason: "governance_unavailable", AgentID: "sim-governance", Since: "2030-05-01T10:00:00Z", RetryAt: "2030-05-01T10:01:00Z"}
	if v.Waiting == nil || *v.Waiting != want {
		t.Fatalf("waiting = %+v, want %+v", v.Waiting, want)
	}

	op, err := store.GetOperation(ctx, "acme", out.OperationID)
	if err != nil {
		t.Fatal(err)
	}
	for _, to := range []workflow.Status{workflow.StatusCheckingGovernance, workflow.StatusCreating} {
		if op, err = store.Transition(ctx, "acme", op.ID, to, op.Version, record.Patch{Actor: "system"}); err != nil {
			t.Fatal(err)
		}
	}
	v, _ = svc.Get(ctx, "acme", out.OperationID)
	want = api.Waiting{Reason: "seller_unavailable", AgentID: "sim-seller", Since: "2030-05-01T10:00:00Z", RetryAt: "2030-05-01T10:01:00Z"}
	if v.Waiting == nil || *v.Waiting != want {
		t.Fatalf("waiting = %+v, want %+v (while the probe is out, the buy tries again as soon as it may, not at ProbeUntil)", v.Waiting, want)
	}

	seller.State = record.BreakerClosed
	if _, err := store.PutBreaker(ctx, seller); err != nil {
		t.Fatal(err)
	}
	if v, _ = svc.Get(ctx, "acme", out.OperationID); v.Waiting != nil {
		t.Fatalf("waiting = %+v once the seller's breaker closed", v.Waiting)
	}
}
