package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/buyflow/buyflow/internal/mediabuy"
	"github.com/buyflow/buyflow/internal/metrics"
)

// TestRecoveringAnswersAPanic runs a handler whose use case panics through the Lambda library
// (which ends the process on a panic it sees) twice: both requests get the documented 500,
// the process survives, and each panic is counted.
func TestRecoveringAnswersAPanic(t *testing.T) {
	var out bytes.Buffer
	rec := metrics.New(&out, metrics.Namespace, nil)
	svc := fakeMediaBuys{list: func(string, mediabuy.ListQuery) (mediabuy.ListPage, error) {
		var p *mediabuy.ListPage
		return *p, nil // nil dereference
	}}
	h := lambda.NewHandler(metrics.Flushing(rec, Recovering(rec, MediaBuysHandler(svc, "", quiet))))
	for i := 0; i < 2; i++ {
		out.Reset()
		payload, err := json.Marshal(iamRequest("GET", "/v1/media-buys"))
		if err != nil {
			t.Fatal(err)
		}
		raw, err := h.Invoke(context.Background(), payload)
		if err != nil {
			t.Fatalf("invoke %d: %v", i, err)
		}
		var resp events.APIGatewayV2HTTPResponse
		if err := json.Unmarshal(raw, &resp); err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 500 {
			t.Fatalf("status %d: %s", resp.StatusCode, resp.Body)
		}
		if p := problem(t, resp); p.Code != "internal" || !strings.Contains(p.Message, "req-1") {
			t.Fatalf("problem %+v", p)
		}
		if strings.Contains(resp.Body, "nil pointer") {
			t.Fatal("the 500 body leaks the panic")
		}
		if !strings.Contains(out.String(), `"HandlerPanics":1`) {
			t.Fatalf("metrics %s", out.String())
		}
	}
}

func TestIsJSON(t *testing.T) {
	for ct, want := range map[string]bool{
		"application/json": true, "application/json; charset=utf-8": true, "APPLICATION/JSON": true,
		"application/jsonp": false, "application/json-seq": false, "application/json+x": false, "text/json": false,
		"": false, "application/json;": true, "application/json; charset": false,
	} {
		if got := IsJSON(ct); got != want {
			t.Errorf("IsJSON(%q) = %v, want %v", ct, got, want)
		}
	}
}
