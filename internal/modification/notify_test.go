package modification_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"testing"

	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/modification"
	"github.com/buyflow/buyflow/internal/workflow"
)

// A change to a buy whose submit asked to be told in Slack is told there too: the change's
// operation carries the buy's requester target, which its status events carry.
func TestAChangeIsToldWhereItsBuyIs(t *testing.T) {
	client, table := dynamotest.Start(t)
	l := ledger.New(client, table)
	ctx := context.Background()
	buy := ledger.Operation{ID: "buy-n", Tenant: tenant, SellerID: "seller-1", PONumber: "PO-N", BudgetTotal: "3000.00", Currency: "USD",
		Request: json.RawMessage(`{"po_number":"PO-N"}`), MediaBuyID: "mb-n", NotifySlack: "U024BE7LH",
		SellerPackages: []ledger.PackageBudget{{PackageID: "p1", Budget: "3000.00"}}}
	if _, err := l.CreateOperation(ctx, buy); err != nil {
		t.Fatal(err)
	}
	for _, to := range []workflow.Status{workflow.StatusCreating, workflow.StatusCompleted} {
		if _, err := l.Transition(ctx, tenant, buy.ID, to, ledger.AnyVersion, ledger.Changes{}); err != nil {
			t.Fatal(err)
		}
	}
	route := modification.Routes(modification.NewRequests(l, &startedExecutions{names: map[string]int{}}, modification.RequestConfig{StateMachineARN: "arn:sm"}),
		"", slog.New(slog.NewTextHandler(io.Discard, nil)))["PATCH /v1/media-buys/{id}"]
	resp, err := route(ctx, patchRequest(buy.ID, "key-notify", `{"paused":true}`))
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("PATCH: %d %v %s", resp.StatusCode, err, resp.Body)
	}
	var a modification.Accepted
	if err := json.Unmarshal([]byte(resp.Body), &a); err != nil {
		t.Fatal(err)
	}
	op, err := l.GetOperation(ctx, tenant, a.ChangeID)
	if err != nil || op.NotifySlack != "U024BE7LH" || op.Kind != ledger.KindModification {
		t.Fatalf("the change's operation %+v (%v) does not carry the buy's requester target", op, err)
	}
}
