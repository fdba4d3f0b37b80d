package registry_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/registry"
)

// An operator's add and change whose responses were lost: the SDK sends the transaction again,
// which DynamoDB would answer from its ClientRequestToken and the emulator runs again, failing
// its own condition. The store recognises its own write and answers the success it had, with
// one audit event per change.
func TestWritesSurviveALostResponse(t *testing.T) {
	client, table, conflicts := dynamotest.StartConflicting(t, 0)
	s := registry.NewStore(client, table)
	ctx := context.Background()

	conflicts.LoseResponses(1)
	added, err := s.Add(ctx, seller("acme"), "ops", registry.ActionAdded)
	if err != nil || added.Version != 1 {
		t.Fatalf("add after a lost response = %+v, %v; want version 1 (it took effect)", added, err)
	}
	conflicts.LoseResponses(1)
	changed, err := s.Update(ctx, "acme", "ops", func(r *registry.Record) (string, string, error) {
		r.Disabled, r.DisabledReason = true, "contract paused"
		return registry.ActionDisabled, r.DisabledReason, nil
	}, nil)
	if err != nil || changed.Version != 2 || !changed.Disabled {
		t.Fatalf("update after a lost response = %+v, %v; want version 2 (it took effect)", changed, err)
	}
	if conflicts.Lost() != 2 {
		t.Fatalf("%d responses lost, want 2: the test did not exercise a resend", conflicts.Lost())
	}
	cur, err := s.Get(ctx, "acme")
	if err != nil || cur.Version != 2 || !cur.Disabled {
		t.Fatalf("stored = %+v, %v", cur, err)
	}
	hist, err := s.History(ctx, "acme")
	if err != nil || len(hist) != 2 || hist[0].Action != registry.ActionAdded || hist[1].Action != registry.ActionDisabled {
		t.Fatalf("history = %+v, %v; want one event per change", hist, err)
	}
	// Another writer's change is still a conflict: an add of a taken id is refused.
	if _, err := s.Add(ctx, seller("acme"), "ops", registry.ActionAdded); !errors.Is(err, registry.ErrExists) {
		t.Fatalf("second add: %v, want ErrExists", err)
	}
}

// Two changes of one agent at the same moment, through an endpoint that refuses racing
// transactions as DynamoDB does and holds each for 50 ms: the one that lost the race is sent
// again until the other is written, then reads the new version and applies on top. Both
// land, each with its audit event; neither caller sees a conflict.
func TestRacingChangesAreSentAgainAndBothLand(t *testing.T) {
	if dynamotest.Current() == dynamotest.Moto {
		t.Skip("moto does not isolate concurrent conditional writes")
	}
	client, table, conflicts := dynamotest.StartConflicting(t, 50*time.Millisecond)
	s := registry.NewStore(client, table)
	ctx := context.Background()
	if _, err := s.Add(ctx, seller("acme"), "ops", registry.ActionAdded); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, 2)
	for i, url := range []string{"https://one.acme.example/mcp", "https://two.acme.example/mcp"} {
		wg.Go(func() {
			<-start
			_, errs[i] = s.Update(ctx, "acme", "ops", func(r *registry.Record) (string, string, error) {
				r.MCPURL = url
				return registry.ActionUpdated, "mcp_url", nil
			}, nil)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("change %d: %v, want it applied", i, err)
		}
	}
	if conflicts.Refused() == 0 {
		t.Fatal("no write was refused as racing: the changes did not meet")
	}
	cur, _ := s.Get(ctx, "acme")
	hist, _ := s.History(ctx, "acme")
	if cur.Version != 3 || len(hist) != 3 {
		t.Fatalf("version %d with %d audit events, want 3 and 3", cur.Version, len(hist))
	}
}
