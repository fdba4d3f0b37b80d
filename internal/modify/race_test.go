package modify_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/modify"
	"github.com/buyflow/buyflow/internal/record"
	"github.com/buyflow/buyflow/internal/topology"
	"github.com/buyflow/buyflow/internal/workflow"
)

// startedExecutions stands in for Step Functions: executions by name, started once each.
type startedExecutions struct {
	mu    sync.Mutex
	names map[string]int
}

func (e *startedExecutions) Start(_ context.Context, name string, _ any) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.names[name]++
	return "arn:aws:states:us-east-1:111122223333:execution:MediaBuy:" + name, nil
}

const tenant = "111122223333"

// placed stores op (its id, PO number, media buy id and notify target as given) as a buy of
// USD 3,000.00 at seller-1, in one package, completed: a buy that takes changes.
func placed(t *testing.T, l *ledger.Store, op record.Operation) record.Operation {
	t.Helper()
	return placedWith(t, l, op, []record.PackageBudget{{PackageID: "p1", Budget: "3000.00"}})
}

// placedWith is placed with the seller's packages as given (none: the seller named none).
func placedWith(t *testing.T, l *ledger.Store, op record.Operation, pkgs []record.PackageBudget) record.Operation {
	t.Helper()
	ctx := context.Background()
	op.Tenant, op.SellerID, op.BudgetTotal, op.Currency = tenant, "seller-1", "3000.00", "USD"
	op.Request = json.RawMessage(`{"po_number":"` + op.PONumber + `"}`)
	op.SellerPackages = pkgs
	if _, err := l.CreateOperation(ctx, op); err != nil {
		t.Fatal(err)
	}
	for _, to := range []workflow.Status{workflow.StatusCreating, workflow.StatusCompleted} {
		if _, err := l.Transition(ctx, tenant, op.ID, to, record.AnyVersion, record.Patch{}); err != nil {
			t.Fatal(err)
		}
	}
	return op
}

func patchRequest(buyID, key, body string) events.APIGatewayV2HTTPRequest {
	path := "/v1/media-buys/" + buyID
	req := events.APIGatewayV2HTTPRequest{
		Version: "2.0", RawPath: path, Body: body,
		Headers: map[string]string{"content-type": "application/json", "idempotency-key": key},
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RequestID: "req-" + key, Stage: "$default",
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: http.MethodPatch, Path: path},
			Authorizer: &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{
				AccountID: tenant, UserARN: "arn:aws:sts::" + tenant + ":assumed-role/Buyer/alice",
			}},
		},
	}
	route, params, _ := topology.App.Match(http.MethodPatch, path)
	req.RouteKey, req.PathParameters = route.Method+" "+route.Path, params
	return req
}

// PATCHes racing on one placed buy, through a DynamoDB that refuses racing writes as AWS does
// (kumo behind it): the buyer sees 202 for the one change the buy takes and 409
// change_in_flight for the others, never a 500 and never a lost race; a buyer's quick retries
// with one key all answer that one change. The ledger ends with exactly the changes accepted.
func TestRacingChangesOfOneBuyNeverAnswer500(t *testing.T) {
	client, table, conflicts := dynamotest.StartConflicting(t, 2*time.Millisecond)
	l := ledger.New(client, table)
	ctx := context.Background()
	buy := placed(t, l, record.Operation{ID: "buy-1", PONumber: "PO-1", MediaBuyID: "mb-1"})
	execs := &startedExecutions{names: map[string]int{}}
	route := modify.Routes(modify.NewRequests(l, execs, modify.RequestConfig{StateMachineARN: "arn:sm"}),
		"", slog.New(slog.NewTextHandler(io.Discard, nil)))["PATCH /v1/media-buys/{id}"]

	const rounds, racers = 6, 4
	accepted := map[string]bool{}
	last := ""
	for round := range rounds {
		sameKey := round == 0 // a buyer's client retrying one request before the first answer
		answers := make([]events.APIGatewayV2HTTPResponse, racers)
		var wg sync.WaitGroup
		for r := range racers {
			key := fmt.Sprintf("key-round-%d-racer-%d", round, r)
			if sameKey {
				key = "key-round-0-retried"
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				// The buy's partition keeps taking other writes meanwhile: its timeline and its
				// next delivery read.
				_ = l.AppendEvent(ctx, tenant, buy.ID, record.Event{Type: "delivery"})
				resp, err := route(ctx, patchRequest(buy.ID, key, `{"paused":true}`))
				if err != nil {
					t.Errorf("round %d: the handler failed: %v", round, err)
				}
				answers[r] = resp
				if err := l.ScheduleDeliveryRead(ctx, tenant, buy.ID, time.Now().Add(time.Hour)); err != nil {
					t.Errorf("round %d: delivery read scheduled: %v", round, err)
				}
			}()
		}
		wg.Wait()
		took := map[string]bool{}
		for r, resp := range answers {
			switch resp.StatusCode {
			case http.StatusAccepted:
				var a api.ChangeAccepted
				if err := json.Unmarshal([]byte(resp.Body), &a); err != nil {
					t.Fatal(err)
				}
				took[a.ChangeID] = true
			case http.StatusConflict:
				var p api.Problem
				if err := json.Unmarshal([]byte(resp.Body), &p); err != nil || p.Error.Code != modify.CodeChangeInFlight || sameKey {
					t.Errorf("round %d racer %d: 409 %s, want change_in_flight (and none for one key)", round, r, resp.Body)
				}
			default:
				t.Errorf("round %d racer %d: %d %s", round, r, resp.StatusCode, resp.Body)
			}
		}
		if len(took) != 1 {
			t.Fatalf("round %d: the buy took changes %v, want exactly one", round, took)
		}
		for id := range took {
			accepted[id], last = true, id
			// The change's run ends it (here refused by governance), and the buy is free again.
			if _, err := l.EndChange(ctx, tenant, buy.ID, id, modify.OutcomeFailed, "denied",
				record.Event{Type: record.EventModificationEnded}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if conflicts.Refused() == 0 {
		t.Fatal("no write was refused: the requests never raced, and nothing was tested")
	}
	t.Logf("%d racing writes refused and sent again", conflicts.Refused())

	st, err := l.GetBuyState(ctx, tenant, buy.ID)
	if err != nil || st.ChangeID != "" || st.LastChangeID != last {
		t.Fatalf("buy state %+v (%v): want no change in flight, the last one %s", st, err, last)
	}
	requested := 0
	for cursor := ""; ; {
		page, err := l.ListEvents(ctx, tenant, buy.ID, record.MaxListLimit, cursor)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page.Items {
			if e.Type == record.EventModificationRequested {
				requested++
			}
		}
		if cursor = page.Cursor; cursor == "" {
			break
		}
	}
	if requested != rounds || len(accepted) != rounds || len(execs.names) != rounds {
		t.Errorf("%d changes requested on the timeline, %d accepted, %d executions: want %d of each", requested, len(accepted), len(execs.names), rounds)
	}
	for id := range accepted {
		if op, err := l.GetOperation(ctx, tenant, id); err != nil || op.Kind != record.KindModification || op.ParentID != buy.ID {
			t.Errorf("change %s: %+v %v", id, op, err)
		}
	}
}
