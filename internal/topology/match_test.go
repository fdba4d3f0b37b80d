package topology

import (
	"maps"
	"slices"
	"strings"
	"testing"
)

func TestMatchChoosesAsAPIGatewayDoes(t *testing.T) {
	cases := []struct {
		method, path, want string
		params             map[string]string
	}{
		{"POST", "/v1/media-buys", "POST /v1/media-buys", map[string]string{}},
		{"GET", "/v1/media-buys/mb-1", "GET /v1/media-buys/{id}", map[string]string{"id": "mb-1"}},
		{"PATCH", "/v1/media-buys/mb-1", "PATCH /v1/media-buys/{id}", map[string]string{"id": "mb-1"}},
		{"GET", "/v1/media-buys/mb-1/events", "GET /v1/media-buys/{id}/events", map[string]string{"id": "mb-1"}},
		// Another method, or an unknown path, under a prefix: the catch-alls.
		{"DELETE", "/v1/media-buys", "ANY /v1/media-buys", map[string]string{}},
		{"PUT", "/v1/media-buys/mb-1", "ANY /v1/media-buys/{proxy+}", map[string]string{"proxy": "mb-1"}},
		{"GET", "/v1/media-buys/mb-1/nope", "ANY /v1/media-buys/{proxy+}", map[string]string{"proxy": "mb-1/nope"}},
		{"GET", "/v1/webhooks/adcp/op-1", "ANY /v1/webhooks/{proxy+}", map[string]string{"proxy": "adcp/op-1"}},
		{"POST", "/v1/operator/agents/a1/disable", "POST /v1/operator/agents/{agent_id}/{action}", map[string]string{"agent_id": "a1", "action": "disable"}},
		{"GET", "/v1/media-buys/", "GET /v1/media-buys", map[string]string{}},
	}
	for _, c := range cases {
		r, params, ok := App.Match(c.method, c.path)
		if got := r.Key(); !ok || got != c.want || !maps.Equal(params, c.params) {
			t.Errorf("Match(%s %s) = %q %v %v, want %q %v", c.method, c.path, got, params, ok, c.want, c.params)
		}
	}
	// Any other request goes to the default route, as API Gateway sends it.
	for _, p := range []string{"/", "/v1", "/v2/media-buys", "/v1/media-buys//events", "/$default", "/v1/nope"} {
		if r, params, ok := App.Match("GET", p); !ok || r.Key() != DefaultRouteKey || len(params) != 0 {
			t.Errorf("Match(GET %s) = %s %v %v, want %s", p, r.Key(), params, ok, DefaultRouteKey)
		}
	}
	if r, _, ok := (Application{Routes: App.Routes[:1]}).Match("GET", "/v1/nope"); ok {
		t.Errorf("a table without a default route matched GET /v1/nope to %s", r.Key())
	}
}

func TestMethodsServingAPath(t *testing.T) {
	cases := map[string][]string{
		"/v1/media-buys":             {"POST", "GET"},
		"/v1/media-buys/mb-1":        {"GET", "PATCH"},
		"/v1/media-buys/mb-1/cancel": {"POST"},
		"/v1/media-buys/mb-1/nope":   nil,
		"/v1/approvals/apr_1":        {"GET", "HEAD", "POST"},
		"/$default":                  nil,
	}
	for path, want := range cases {
		if got := App.Methods(path); !slices.Equal(got, want) {
			t.Errorf("Methods(%s) = %v, want %v", path, got, want)
		}
	}
}

// FuzzMatch: any request path (outside input, for a catch-all route) is matched without a
// panic, to a route of the request's method or ANY whose every parameter is a non-empty part
// of the path, or else to the default route; Methods answers for the same path without a
// panic.
func FuzzMatch(f *testing.F) {
	for _, s := range []string{"/v1/media-buys", "/v1/media-buys/mb-1/events", "/v1/media-buys//x", "/", "", "//", "/v1/approvals/a/b/c", "/v1/operator/agents/a/disable/"} {
		f.Add("GET", s)
	}
	f.Fuzz(func(t *testing.T, method, path string) {
		r, params, ok := App.Match(method, path)
		if !ok {
			t.Fatalf("Match(%q, %q): no route, but the default route takes every request", method, path)
		}
		if !r.Default() {
			if r.Method != method && r.Method != "ANY" {
				t.Fatalf("Match(%q, %q) = %s %s", method, path, r.Method, r.Path)
			}
			for k, v := range params {
				if v == "" || !strings.Contains(path, v) {
					t.Fatalf("Match(%q, %q): parameter %s = %q", method, path, k, v)
				}
			}
		}
		for _, m := range App.Methods(path) {
			if m == "ANY" {
				t.Fatalf("Methods(%q) lists ANY", path)
			}
		}
	})
}
