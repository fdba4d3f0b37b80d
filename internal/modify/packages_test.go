package modify_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/buyflow/buyflow/internal/adcp"
	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/dynamotest"
	"github.com/buyflow/buyflow/internal/ledger"
	"github.com/buyflow/buyflow/internal/modify"
	"github.com/buyflow/buyflow/internal/record"
)

// A buy placed with packages: [] (the broadcast example's answer) has no package whose budget
// an update could name: a budget change is refused when it is asked for, with a code and the
// reason in words; a change that names no package still goes through.
func TestABudgetChangeToABuyWithoutPackagesSaysWhy(t *testing.T) {
	t.Parallel()
	w := newChangeWorldOf(t, listsNothing, "approved,sync,no_packages")
	if len(w.buy.SellerPackages) != 0 {
		t.Fatalf("the buy was placed with packages %v, want none", w.buy.SellerPackages)
	}
	for i, body := range []string{`{"budget":{"total":3500}}`, `{"budget":{"packages":[{"package_id":"pkg_1","budget":3500}]}}`} {
		_, err := w.submit(t, fmt.Sprintf("key-budget-%d", i), body, false)
		var re *modify.RequestError
		if !errors.As(err, &re) || re.Status != 422 || re.Code != "no_packages" || !strings.Contains(re.Message, "no packages") {
			t.Errorf("%s: %v, want 422 no_packages saying the buy has no packages", body, err)
		}
	}
	if n := len(w.e.Seller.CallsTo(adcp.ToolUpdateMediaBuy)); n != 0 {
		t.Fatalf("%d update_media_buy reached the seller", n)
	}
	id, err := w.submit(t, "key-end", `{"end_time":"2031-06-30T23:59:59Z","context":{"sim":"approved,sync"}}`, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := w.run(t, id); got.Outcome != modify.OutcomeApplied {
		t.Fatalf("the end date change: %+v", got)
	}
}

// The change route answers the same refusal: HTTP 422, the code and the words.
func TestTheChangeRouteSaysWhyABuyWithoutPackagesKeepsItsBudget(t *testing.T) {
	client, table := dynamotest.Start(t)
	l := ledger.New(client, table)
	b := placedWith(t, l, record.Operation{ID: "buy-np", PONumber: "PO-NP", MediaBuyID: "mb-np"}, nil)
	route := modify.Routes(modify.NewRequests(l, &startedExecutions{names: map[string]int{}}, modify.RequestConfig{StateMachineARN: "arn:sm"}),
		"", slog.New(slog.NewTextHandler(io.Discard, nil)))["PATCH /v1/media-buys/{id}"]
	resp, err := route(context.Background(), patchRequest(b.ID, "key-no-packages", `{"budget":{"total":4000}}`))
	var p api.Problem
	if err != nil || resp.StatusCode != http.StatusUnprocessableEntity || json.Unmarshal([]byte(resp.Body), &p) != nil ||
		p.Error.Code != "no_packages" || !strings.Contains(p.Error.Message, "no packages") {
		t.Fatalf("PATCH budget of a buy without packages: %d %v %s", resp.StatusCode, err, resp.Body)
	}
	t.Logf("the refusal: %s", p.Error.Message)
}
