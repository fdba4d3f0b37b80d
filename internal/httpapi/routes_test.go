package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/apigwtest"
	"github.com/buyflow/buyflow/internal/httpapi"
	"github.com/buyflow/buyflow/internal/topology"
)

// routed is the event API Gateway sends for method and path, its route matched in topology,
// with the IAM identity or without any.
func routed(method, path string, iam bool) events.APIGatewayV2HTTPRequest {
	req := apigwtest.IAMRequest(method, path)
	if !iam {
		req.RequestContext.Authorizer = nil
	}
	return req
}

func TestByRouteKey(t *testing.T) {
	var got []string
	echo := func(ctx context.Context, req events.APIGatewayV2HTTPRequest, who httpapi.Caller) (events.APIGatewayV2HTTPResponse, error) {
		got = append(got, req.RouteKey+" "+req.PathParameters["id"]+" "+who.Tenant)
		return httpapi.JSON(http.StatusOK, nil), nil
	}
	h := httpapi.ByRouteKey(topology.App,
		map[string]httpapi.Handler{"GET /v1/media-buys/{id}": httpapi.WithCaller("", echo)},
		map[string]httpapi.Handler{"PATCH /v1/media-buys/{id}": httpapi.WithCaller("", echo)})
	cases := []struct {
		method, path string
		iam          bool
		status       int
		code, allow  string
	}{
		{"GET", "/v1/media-buys/mb-1", true, 200, "", ""},
		{"PATCH", "/v1/media-buys/mb-2", true, 200, "", ""},
		{"GET", "/v1/media-buys/mb-1", false, 403, "no_identity", ""},
		// The catch-alls: another method on a served path, a path nobody serves.
		{"DELETE", "/v1/media-buys/mb-1", true, 405, "method_not_allowed", "GET, PATCH"},
		{"GET", "/v1/media-buys/mb-1/cancel", true, 405, "method_not_allowed", "POST"},
		{"PUT", "/v1/media-buys", true, 405, "method_not_allowed", "POST, GET"},
		{"GET", "/v1/media-buys/mb-1/nope", true, 404, "no_route", ""},
		// A route of the table that this function does not serve is no route of its own.
		{"GET", "/v1/media-buys/mb-1/events", true, 404, "no_route", ""},
		// The default route: any path outside the table, signed or not.
		{"GET", "/v1/nope", false, 404, "no_route", ""},
		{"POST", "/", true, 404, "no_route", ""},
	}
	for _, c := range cases {
		resp, err := h(context.Background(), routed(c.method, c.path, c.iam))
		if err != nil || resp.StatusCode != c.status || resp.Headers["Allow"] != c.allow {
			t.Errorf("%s %s = %d Allow %q %v, want %d Allow %q", c.method, c.path, resp.StatusCode, resp.Headers["Allow"], err, c.status, c.allow)
			continue
		}
		if c.code != "" {
			var p api.Problem
			if json.Unmarshal([]byte(resp.Body), &p) != nil || p.Error.Code != c.code {
				t.Errorf("%s %s: body %s, want code %s", c.method, c.path, resp.Body, c.code)
			}
		}
	}
	// The local stack's emulator may route a request to the catch-all of its path although a
	// route of its method matches: the handler of that route serves it, with its parameters.
	req := routed("PATCH", "/v1/media-buys/mb-3", true)
	req.RouteKey, req.PathParameters = "ANY /v1/media-buys/{proxy+}", map[string]string{"proxy": "mb-3"}
	if resp, err := h(context.Background(), req); err != nil || resp.StatusCode != 200 {
		t.Errorf("PATCH through the catch-all = %d %v, want 200", resp.StatusCode, err)
	}
	want := []string{"GET /v1/media-buys/{id} mb-1 111122223333", "PATCH /v1/media-buys/{id} mb-2 111122223333", "PATCH /v1/media-buys/{id} mb-3 111122223333"}
	if !slices.Equal(got, want) {
		t.Errorf("handlers saw %q, want %q", got, want)
	}
}
