package ledger_test

import (
	"context"
	"slices"
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

// Buys completed before the live list existed carry no gsi1 keys at all: the backfill finds
// them, bounded per call, and lists them live; nothing else is listed, and a finished backfill
// scans no more.
func TestBackfillListsLiveTheBuysCompletedBeforeTheLiveList(t *testing.T) {
	t.Parallel()
	client, table := dynamotest.Start(t)
	clk := clocktest.At(time.Date(2099, 1, 1, 12, 0, 0, 0, time.UTC))
	s := ledger.New(client, table)
	s.Now = clk.Now
	ctx := context.Background()
	complete := func(op record.Operation) {
		t.Helper()
		mustCreate(t, s, op)
		for _, to := range []workflow.Status{workflow.StatusCreating, workflow.StatusCompleted} {
			if _, err := s.Transition(ctx, op.Tenant, op.ID, to, record.AnyVersion, record.Patch{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// As the ledger wrote a completed buy before the live list: no gsi1 keys.
	unlist := func(id string) {
		t.Helper()
		_, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table),
			Key: map[string]types.AttributeValue{
				ledger.AttrPK: &types.AttributeValueMemberS{Value: "TENANT#acme#OP#" + id},
				ledger.AttrSK: &types.AttributeValueMemberS{Value: "OP"}},
			UpdateExpression: aws.String("REMOVE " + ledger.AttrGSI1PK + ", " + ledger.AttrGSI1SK)})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"old-1", "old-2", "old-3", "live", "retired"} {
		complete(newOp(id))
	}
	for _, id := range []string{"old-1", "old-2", "old-3"} {
		unlist(id)
	}
	if err := s.RetireLive(ctx, "acme", "retired"); err != nil {
		t.Fatal(err)
	}
	change := newOp("change")
	change.Kind, change.ParentID = record.KindModification, "live"
	complete(change)
	unlist("change")
	mustCreate(t, s, newOp("failed"))
	if _, err := s.Transition(ctx, "acme", "failed", workflow.StatusFailed, record.AnyVersion, record.Patch{}); err != nil {
		t.Fatal(err)
	}

	added, calls, done := 0, 0, false
	for !done {
		if calls++; calls > 200 {
			t.Fatal("the backfill never finished")
		}
		n, d, err := s.BackfillLive(ctx, 3)
		if err != nil {
			t.Fatal(err)
		}
		added, done = added+n, d
	}
	if added != 3 || calls < 2 {
		t.Errorf("the backfill added %d buys in %d calls, want the 3 old ones over several bounded calls", added, calls)
	}
	live, err := s.ListLiveDue(ctx, clk.Now().Add(time.Minute), 100)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, op := range live {
		ids = append(ids, op.ID)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"live", "old-1", "old-2", "old-3"}) {
		t.Errorf("live after the backfill: %v, want the live buy and the three old ones (no change, no retired or failed buy)", ids)
	}
	if n, d, err := s.BackfillLive(ctx, 3); n != 0 || !d || err != nil {
		t.Errorf("a backfill after it finished: %d added, done %v, %v", n, d, err)
	}
}
