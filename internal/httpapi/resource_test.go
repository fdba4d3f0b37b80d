package httpapi_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"testing"

	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/httpapi"
)

type refused struct{ status int }

func (r *refused) Error() string { return "refused" }
func (r *refused) Problem() (int, api.ProblemDetail) {
	return r.status, api.ProblemDetail{Code: "bad_thing", Message: "no", Field: "/x"}
}

var errMissing = errors.New("missing")

// TestResourceRoutes pins what every collection built from a Resource answers: the 202 and its
// Location, a refusal's own status, NotFound and an id the pattern refuses 404, the limit read
// for the events only when they are paged.
func TestResourceRoutes(t *testing.T) {
	var seen httpapi.Query
	res := httpapi.Resource[api.Submitted, api.Page[api.MediaBuy], api.MediaBuy, api.Page[api.Event]]{
		Path: "/v1/media-buys", Noun: "media buy", ID: regexp.MustCompile(`^mb-[0-9]$`).MatchString, NotFound: errMissing,
		Location: func(s api.Submitted) string { return s.Links.Self },
		Submit: func(context.Context, httpapi.Caller, string, []byte) (api.Submitted, error) {
			return api.Submitted{OperationID: "mb-1", Links: api.Links{Self: "/v1/media-buys/mb-1"}}, nil
		},
		List: func(_ context.Context, _ string, q httpapi.Query) (api.Page[api.MediaBuy], error) {
			seen = q
			return api.Page[api.MediaBuy]{}, &refused{status: 422}
		},
		Get: func(_ context.Context, _, id string) (api.MediaBuy, error) {
			if id == "mb-2" {
				return api.MediaBuy{}, errMissing
			}
			return api.MediaBuy{OperationID: id}, nil
		},
		Events: func(_ context.Context, _, _ string, q httpapi.Query) (api.Page[api.Event], error) {
			seen = q
			return api.Page[api.Event]{}, nil
		},
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	serve := func(res httpapi.Resource[api.Submitted, api.Page[api.MediaBuy], api.MediaBuy, api.Page[api.Event]], method, path, query string) (int, map[string]string, string) {
		t.Helper()
		req := routed(method, path, true)
		req.Headers = map[string]string{"idempotency-key": "key-00000001"}
		if query != "" {
			req.QueryStringParameters = map[string]string{"limit": query, "cursor": "c1", "status": "completed"}
		}
		resp, err := res.Routes("", quiet)[req.RouteKey](context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, resp.Headers, resp.Body
	}

	if status, h, _ := serve(res, http.MethodPost, "/v1/media-buys", ""); status != http.StatusAccepted || h["Location"] != "/v1/media-buys/mb-1" {
		t.Errorf("submit: %d %v", status, h)
	}
	if status, _, body := serve(res, http.MethodGet, "/v1/media-buys", "10"); status != 422 || body != `{"error":{"code":"bad_thing","message":"no","field":"/x"}}` ||
		seen.Limit != 10 || seen.Cursor != "c1" || seen.Params["status"] != "completed" {
		t.Errorf("list: %d %s %+v", status, body, seen)
	}
	if status, _, body := serve(res, http.MethodGet, "/v1/media-buys/mb-2", ""); status != http.StatusNotFound || body != `{"error":{"code":"not_found","message":"no media buy with that id"}}` {
		t.Errorf("get of a missing id: %d %s", status, body)
	}
	if status, _, _ := serve(res, http.MethodGet, "/v1/media-buys/nope", ""); status != http.StatusNotFound {
		t.Errorf("get of a refused id: %d", status)
	}
	if status, _, _ := serve(res, http.MethodGet, "/v1/media-buys/mb-1/events", "0"); status != http.StatusOK || seen.Limit != 0 || seen.Cursor != "" {
		t.Errorf("unpaged events read the query: %d %+v", status, seen)
	}
	res.PagedEvents = true
	if status, _, _ := serve(res, http.MethodGet, "/v1/media-buys/mb-1/events", "0"); status != http.StatusBadRequest {
		t.Errorf("paged events took limit 0: %d", status)
	}
	if status, _, _ := serve(res, http.MethodGet, "/v1/media-buys/mb-1/events", "5"); status != http.StatusOK || seen.Limit != 5 || seen.Cursor != "c1" {
		t.Errorf("paged events: %d %+v", status, seen)
	}
}
