package modify_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"testing"

	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/modify"
	"github.com/buyflow/buyflow/internal/record"
)

// A change to a buy whose submit asked to be told in Slack is told there too: the change's
// operation carries the buy's requester target, which its status events carry.
func TestAChangeIsToldWhereItsBuyIs(t *testing.T) {
	client, table := dynamotest.Start(t)
	l := ledger.New(client, table)
	ctx := context.Background()
	buy := placed(t, l, record.Operation{ID: "buy-n", PONumber: "PO-N", MediaBuyID: "mb-n", NotifySlack: "U024BE7LH"})
	route := modify.Routes(modify.NewRequests(l, &startedExecutions{names: map[string]int{}}, modify.RequestConfig{StateMachineARN: "arn:sm"}),
		"", slog.New(slog.NewTextHandler(io.Discard, nil)))["PATCH /v1/media-buys/{id}"]
	resp, err := route(ctx, patchRequest(buy.ID, "key-notify", `{"paused":true}`))
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("PATCH: %d %v %s", resp.StatusCode, err, resp.Body)
	}
	var a api.ChangeAccepted
	if err := json.Unmarshal([]byte(resp.Body), &a); err != nil {
		t.Fatal(err)
	}
	op, err := l.GetOperation(ctx, tenant, a.ChangeID)
	if err != nil || op.NotifySlack != "U024BE7LH" || op.Kind != record.KindModification {
		t.Fatalf("the change's operation %+v (%v) does not carry the buy's requester target", op, err)
	}
}
