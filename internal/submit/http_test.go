package submit_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/apigwtest"
	"github.com/buyflow/buyflow/internal/buy"
	"github.com/buyflow/buyflow/internal/httpapi"
	"github.com/buyflow/buyflow/internal/metrics"
	"github.com/buyflow/buyflow/internal/submit"
	"github.com/buyflow/buyflow/internal/topology"
)

// fakeMediaBuys is a function-typed fake of the use cases.
type fakeMediaBuys struct {
	submit func(buy.Caller, string, []byte) (api.Submitted, error)
	get    func(tenant, id string) (api.MediaBuy, error)
	list   func(tenant string, q submit.ListQuery) (api.Page[api.MediaBuy], error)
	events func(tenant, id, cursor string, limit int) (api.Page[api.Event], error)
}

func (f fakeMediaBuys) Submit(_ context.Context, c buy.Caller, k string, b []byte) (api.Submitted, error) {
	return f.submit(c, k, b)
}
func (f fakeMediaBuys) Get(_ context.Context, t, id string) (api.MediaBuy, error) {
	return f.get(t, id)
}
func (f fakeMediaBuys) List(_ context.Context, t string, q submit.ListQuery) (api.Page[api.MediaBuy], error) {
	return f.list(t, q)
}
func (f fakeMediaBuys) Events(_ context.Context, t, id, c string, l int) (api.Page[api.Event], error) {
	return f.events(t, id, c, l)
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func problem(t *testing.T, resp events.APIGatewayV2HTTPResponse) api.ProblemDetail {
	t.Helper()
	var p api.Problem
	if err := json.Unmarshal([]byte(resp.Body), &p); err != nil {
		t.Fatalf("body %q: %v", resp.Body, err)
	}
	if p.Error.Code == "" || p.Error.Message == "" {
		t.Fatalf("problem without code or message: %s", resp.Body)
	}
	return p.Error
}

func TestSubmitRoute(t *testing.T) {
	var gotCaller buy.Caller
	var gotBody string
	svc := fakeMediaBuys{submit: func(c buy.Caller, key string, body []byte) (api.Submitted, error) {
		gotCaller, gotBody = c, string(body)
		if key != "key-12345678" {
			t.Fatalf("key %q", key)
		}
		return api.Submitted{OperationID: "op1", Status: "requested", Links: buy.LinksFor("op1")}, nil
	}}
	h := httpapi.ByRouteKey(topology.App, submit.Routes(svc, "", quiet))
	req := apigwtest.IAMRequest("POST", "/v1/media-buys")
	req.Headers["idempotency-key"] = "key-12345678"
	req.Headers["content-type"] = "application/json"
	req.Body = base64.StdEncoding.EncodeToString([]byte(`{"a":1}`))
	req.IsBase64Encoded = true
	resp, err := h(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 202 || resp.Headers["Location"] != "/v1/media-buys/op1" {
		t.Fatalf("resp = %+v", resp)
	}
	if gotCaller.Tenant != "111122223333" || !strings.Contains(gotCaller.Principal, "Buyer/alice") || gotBody != `{"a":1}` {
		t.Fatalf("caller %+v body %q", gotCaller, gotBody)
	}
}

func TestRefusals(t *testing.T) {
	svc := fakeMediaBuys{
		submit: func(buy.Caller, string, []byte) (api.Submitted, error) {
			return api.Submitted{}, &buy.RequestError{Status: 422, Code: "idempotency_key_reused", Message: "m"}
		},
		get: func(string, string) (api.MediaBuy, error) { return api.MediaBuy{}, buy.ErrNotFound },
		list: func(string, submit.ListQuery) (api.Page[api.MediaBuy], error) {
			return api.Page[api.MediaBuy]{}, errors.New("dynamodb: secret internal detail")
		},
	}
	h := httpapi.ByRouteKey(topology.App, submit.Routes(svc, "", quiet))
	tests := []struct {
		name   string
		req    func() events.APIGatewayV2HTTPRequest
		status int
		code   string
	}{
		{"no identity", func() events.APIGatewayV2HTTPRequest {
			r := apigwtest.IAMRequest("GET", "/v1/media-buys")
			r.RequestContext.Authorizer = nil
			return r
		}, 403, "no_identity"},
		{"no idempotency key", func() events.APIGatewayV2HTTPRequest { return apigwtest.IAMRequest("POST", "/v1/media-buys") }, 400, "missing_idempotency_key"},
		{"not json", func() events.APIGatewayV2HTTPRequest {
			r := apigwtest.IAMRequest("POST", "/v1/media-buys")
			r.Headers["idempotency-key"] = "key-12345678"
			r.Headers["content-type"] = "text/plain"
			return r
		}, 415, "unsupported_media_type"},
		{"use-case refusal", func() events.APIGatewayV2HTTPRequest {
			r := apigwtest.IAMRequest("POST", "/v1/media-buys")
			r.Headers["idempotency-key"] = "key-12345678"
			return r
		}, 422, "idempotency_key_reused"},
		{"not found", func() events.APIGatewayV2HTTPRequest { return apigwtest.IAMRequest("GET", "/v1/media-buys/op-x") }, 404, "not_found"},
		{"bad id", func() events.APIGatewayV2HTTPRequest { return apigwtest.IAMRequest("GET", "/v1/media-buys/a%20b") }, 404, "not_found"},
		{"bad limit", func() events.APIGatewayV2HTTPRequest {
			r := apigwtest.IAMRequest("GET", "/v1/media-buys")
			r.QueryStringParameters = map[string]string{"limit": "1000"}
			return r
		}, 400, "invalid_limit"},
		{"internal error hides detail", func() events.APIGatewayV2HTTPRequest { return apigwtest.IAMRequest("GET", "/v1/media-buys") }, 500, "internal"},
		{"jsonp is not json", func() events.APIGatewayV2HTTPRequest {
			r := apigwtest.IAMRequest("POST", "/v1/media-buys")
			r.Headers["idempotency-key"] = "key-12345678"
			r.Headers["content-type"] = "application/jsonp"
			return r
		}, 415, "unsupported_media_type"},
		{"json-seq is not json", func() events.APIGatewayV2HTTPRequest {
			r := apigwtest.IAMRequest("POST", "/v1/media-buys")
			r.Headers["idempotency-key"] = "key-12345678"
			r.Headers["Content-Type"] = "application/json-seq"
			return r
		}, 415, "unsupported_media_type"},
		{"json with a charset is json", func() events.APIGatewayV2HTTPRequest {
			r := apigwtest.IAMRequest("POST", "/v1/media-buys")
			r.Headers["idempotency-key"] = "key-12345678"
			r.Headers["content-type"] = "Application/JSON; charset=utf-8"
			return r
		}, 422, "idempotency_key_reused"},
		{"other method on the collection", func() events.APIGatewayV2HTTPRequest { return apigwtest.IAMRequest("DELETE", "/v1/media-buys") }, 405, "method_not_allowed"},
		{"other method on an item", func() events.APIGatewayV2HTTPRequest { return apigwtest.IAMRequest("PUT", "/v1/media-buys/op-x") }, 405, "method_not_allowed"},
		{"other method on events", func() events.APIGatewayV2HTTPRequest {
			return apigwtest.IAMRequest("POST", "/v1/media-buys/op-x/events")
		}, 405, "method_not_allowed"},
		{"unknown route under the prefix", func() events.APIGatewayV2HTTPRequest { return apigwtest.IAMRequest("GET", "/v1/media-buys/op-x/nope") }, 404, "no_route"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := h(context.Background(), tt.req())
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, resp.Body)
			}
			if p := problem(t, resp); p.Code != tt.code {
				t.Fatalf("code %s, want %s", p.Code, tt.code)
			}
			if strings.Contains(resp.Body, "secret internal detail") {
				t.Fatal("500 body leaks the error")
			}
		})
	}
}

func TestReadRoutes(t *testing.T) {
	svc := fakeMediaBuys{
		get: func(tenant, id string) (api.MediaBuy, error) {
			return api.MediaBuy{OperationID: id, Status: "working"}, nil
		},
		list: func(tenant string, q submit.ListQuery) (api.Page[api.MediaBuy], error) {
			if q.Status != "working" || q.Seller != "s1" || q.Limit != 5 || q.Cursor != "c" {
				t.Fatalf("query %+v", q)
			}
			return api.Page[api.MediaBuy]{Items: []api.MediaBuy{{OperationID: "a"}}}, nil
		},
		events: func(tenant, id, cursor string, limit int) (api.Page[api.Event], error) {
			return api.Page[api.Event]{Items: []api.Event{{Type: "submitted"}}}, nil
		},
	}
	h := httpapi.ByRouteKey(topology.App, submit.Routes(svc, "", quiet))
	r := apigwtest.IAMRequest("GET", "/v1/media-buys")
	r.QueryStringParameters = map[string]string{"status": "working", "seller_id": "s1", "limit": "5", "cursor": "c"}
	for _, req := range []events.APIGatewayV2HTTPRequest{r, apigwtest.IAMRequest("GET", "/v1/media-buys/op1"), apigwtest.IAMRequest("GET", "/v1/media-buys/op1/events")} {
		resp, err := h(context.Background(), req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s %v", req.RawPath, resp.StatusCode, resp.Body, err)
		}
	}
}

// TestRecoveringAnswersAPanic runs a handler whose use case panics through the Lambda library
// (which ends the process on a panic it sees) twice: both requests get the documented 500,
// the process survives, and each panic is counted.
func TestRecoveringAnswersAPanic(t *testing.T) {
	var out bytes.Buffer
	rec := metrics.New(&out, metrics.Namespace, nil)
	svc := fakeMediaBuys{list: func(string, submit.ListQuery) (api.Page[api.MediaBuy], error) {
		var p *api.Page[api.MediaBuy]
		return *p, nil // nil dereference
	}}
	h := lambda.NewHandler(metrics.Flushing(rec, httpapi.Recovering(rec, httpapi.ByRouteKey(topology.App, submit.Routes(svc, "", quiet)))))
	for i := 0; i < 2; i++ {
		out.Reset()
		payload, err := json.Marshal(apigwtest.IAMRequest("GET", "/v1/media-buys"))
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
