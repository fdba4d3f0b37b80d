package ledger_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/buyflow/buyflow/internal/clocktest"
	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/workflow"
)

// TestLiveEntryTakesTheListingAtTheFirstRead: a completed buy is listed by its operation until
// its first scheduled read, which hands the listing to its small live entry; from then on a
// read rewrites the entry only (the operation item stays byte for byte as it was), a resumed
// buy listed by its operation again is listed once and handed back without losing the entry's
// mark, the backfill never lists it again, and retiring it empties the list.
func TestLiveEntryTakesTheListingAtTheFirstRead(t *testing.T) {
	t.Parallel()
	client, table := dynamotest.Start(t)
	clk := clocktest.At(time.Date(2099, 1, 1, 12, 0, 0, 0, time.UTC))
	s := ledger.New(client, table)
	s.Now = clk.Now
	ctx := context.Background()
	mustCreate(t, s, newOp("op-live"))
	for _, to := range []workflow.Status{workflow.StatusCreating, workflow.StatusCompleted} {
		if _, err := s.Transition(ctx, "acme", "op-live", to, record.AnyVersion, record.Patch{}); err != nil {
			t.Fatal(err)
		}
	}
	opItem := func() map[string]types.AttributeValue {
		t.Helper()
		out, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{ledger.AttrPK: &types.AttributeValueMemberS{Value: "TENANT#acme#OP#op-live"},
				ledger.AttrSK: &types.AttributeValueMemberS{Value: "OP"}}})
		if err != nil {
			t.Fatal(err)
		}
		return out.Item
	}
	due := func(at time.Time) []*record.Operation {
		t.Helper()
		ops, err := s.ListLiveDue(ctx, at, 10)
		if err != nil {
			t.Fatal(err)
		}
		return ops
	}
	ops := due(clk.Now())
	if len(ops) != 1 || ops[0].DeliveryEntry {
		t.Fatalf("a buy just completed is listed by its operation: %+v", ops)
	}
	if err := s.ScheduleLive(ctx, ops[0], clk.Now().Add(time.Hour), "m1"); err != nil {
		t.Fatal(err)
	}
	handed := opItem()
	if _, listed := handed[ledger.AttrGSI1PK]; listed {
		t.Fatalf("the operation is still listed on itself after the hand-over: %v", handed[ledger.AttrGSI1PK])
	}
	if ops = due(clk.Now()); len(ops) != 0 {
		t.Fatalf("due now after the next read was set an hour on: %+v", ops)
	}
	ops = due(clk.Now().Add(time.Hour))
	if len(ops) != 1 || !ops[0].DeliveryEntry || ops[0].DeliveryMark != "m1" || ops[0].ID != "op-live" || ops[0].Status != workflow.StatusCompleted {
		t.Fatalf("an hour later: %+v, want op-live listed by its entry, mark m1", ops)
	}
	if err := s.ScheduleLive(ctx, ops[0], clk.Now().Add(3*time.Hour), "m2"); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkDeliveryPushed(ctx, "acme", "op-live"); err != nil {
		t.Fatal(err)
	}
	if after := opItem(); !reflect.DeepEqual(after, handed) {
		t.Fatalf("a read after the hand-over wrote the operation item:\nbefore %v\nafter  %v", handed, after)
	}

	// A pause and a resume list the operation again, due at once; the entry is not due yet.
	if _, err := s.FollowChange(ctx, "acme", "op-live", workflow.StatusCompleted, workflow.StatusPaused, "1500.00", record.Patch{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.FollowChange(ctx, "acme", "op-live", workflow.StatusPaused, workflow.StatusCompleted, "1500.00", record.Patch{}); err != nil {
		t.Fatal(err)
	}
	ops = due(clk.Now().Add(3 * time.Hour))
	if len(ops) != 1 || ops[0].DeliveryEntry || ops[0].DeliveryMark != "m2" || !ops[0].DeliveryPushed {
		t.Fatalf("a resumed buy: %+v, want it once, listed by its operation, with its entry's mark and push flag", ops)
	}
	if err := s.ScheduleLive(ctx, ops[0], clk.Now().Add(5*time.Hour), ""); err != nil {
		t.Fatal(err)
	}
	ops = due(clk.Now().Add(24 * time.Hour))
	if len(ops) != 1 || !ops[0].DeliveryEntry || ops[0].DeliveryMark != "m2" || !ops[0].DeliveryPushed {
		t.Fatalf("handed back: %+v", ops)
	}
	// Handed back by a read that stored a snapshot: the entry takes that snapshot's mark.
	if _, err := s.FollowChange(ctx, "acme", "op-live", workflow.StatusCompleted, workflow.StatusCompleted, "1600.00", record.Patch{}); err != nil {
		t.Fatal(err)
	}
	ops = due(clk.Now())
	if len(ops) != 1 || ops[0].DeliveryEntry {
		t.Fatalf("after a budget change: %+v, want the buy listed by its operation", ops)
	}
	if err := s.ScheduleLive(ctx, ops[0], clk.Now().Add(5*time.Hour), "m3"); err != nil {
		t.Fatal(err)
	}
	ops = due(clk.Now().Add(24 * time.Hour))
	if len(ops) != 1 || !ops[0].DeliveryEntry || ops[0].DeliveryMark != "m3" {
		t.Fatalf("handed back with a new mark: %+v", ops)
	}
	if _, _, err := s.BackfillLive(ctx, 100); err != nil {
		t.Fatal(err)
	}
	if ops = due(clk.Now().Add(24 * time.Hour)); len(ops) != 1 {
		t.Fatalf("after the backfill: %+v, want the buy once", ops)
	}
	if err := s.RetireLive(ctx, "acme", "op-live"); err != nil {
		t.Fatal(err)
	}
	if ops = due(clk.Now().Add(24 * time.Hour)); len(ops) != 0 {
		t.Fatalf("after retiring: %+v", ops)
	}
	if err := s.RetireLive(ctx, "acme", "op-live"); !errors.Is(err, record.ErrConflict) {
		t.Fatalf("retiring twice: %v, want ErrConflict", err)
	}
	if err := s.ScheduleDeliveryRead(ctx, "acme", "op-live", clk.Now()); !errors.Is(err, record.ErrConflict) {
		t.Fatalf("scheduling a retired buy: %v, want ErrConflict", err)
	}
	if err := s.ScheduleDeliveryRead(ctx, "other", "op-live", clk.Now()); err == nil {
		t.Fatal("another tenant scheduled the buy")
	}
}
