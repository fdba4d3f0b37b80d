package campaign

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/buyflow/buyflow/internal/api"
	"github.com/buyflow/buyflow/internal/apigwtest"
	"github.com/buyflow/buyflow/internal/buy"
	"github.com/buyflow/buyflow/internal/httpapi"
	"github.com/buyflow/buyflow/internal/topology"
)

type fakeCampaigns struct {
	submit func(buy.Caller, string, []byte) (api.CampaignSubmitted, error)
	get    func(tenant, id string) (api.Campaign, error)
}

func (f fakeCampaigns) Submit(_ context.Context, c buy.Caller, k string, b []byte) (api.CampaignSubmitted, error) {
	return f.submit(c, k, b)
}
func (f fakeCampaigns) Get(_ context.Context, t, id string) (api.Campaign, error) {
	return f.get(t, id)
}
func (f fakeCampaigns) List(context.Context, string, int, string) (api.Page[api.Campaign], error) {
	return api.Page[api.Campaign]{Items: []api.Campaign{}}, nil
}
func (f fakeCampaigns) Events(_ context.Context, t, id string) (api.Page[api.CampaignEvent], error) {
	_, err := f.get(t, id)
	return api.Page[api.CampaignEvent]{}, err
}

const someCampaign = "cp-abcdefghijklmnopqrstuvwxyz"

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func problemCode(t *testing.T, resp events.APIGatewayV2HTTPResponse) string {
	t.Helper()
	var p api.Problem
	if err := json.Unmarshal([]byte(resp.Body), &p); err != nil || p.Error.Code == "" || p.Error.Message == "" {
		t.Fatalf("not a problem body: %s", resp.Body)
	}
	return p.Error.Code
}

func TestCampaignRoutes(t *testing.T) {
	var submitted string
	cps := fakeCampaigns{
		submit: func(c buy.Caller, key string, body []byte) (api.CampaignSubmitted, error) {
			submitted = c.Tenant + " " + key + " " + string(body)
			return api.CampaignSubmitted{CampaignID: someCampaign, Status: string(Running), Links: LinksFor(someCampaign)}, nil
		},
		get: func(tenant, id string) (api.Campaign, error) {
			if tenant != "111122223333" || id != someCampaign {
				return api.Campaign{}, ErrNotFound
			}
			return api.Campaign{CampaignID: id}, nil
		},
	}
	// The submit function serves both prefixes; the media-buy side answers its own routes.
	buys := httpapi.Handler(func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		return httpapi.Error(404, "not_found", "no media buy with that id", ""), nil
	})
	h := httpapi.ByRouteKey(topology.App, Routes(cps, "", quiet), map[string]httpapi.Handler{"GET /v1/media-buys/{id}": buys})

	req := apigwtest.IAMRequest("POST", "/v1/campaigns")
	req.Headers["idempotency-key"] = "campaign-0001"
	req.Body = `{"legs":[]}`
	resp, err := h(context.Background(), req)
	if err != nil || resp.StatusCode != 202 || resp.Headers["Location"] != "/v1/campaigns/"+someCampaign {
		t.Fatalf("submit: %+v %v", resp, err)
	}
	if submitted != `111122223333 campaign-0001 {"legs":[]}` {
		t.Fatalf("submitted %q", submitted)
	}
	cases := []struct {
		method, path string
		status       int
		code         string
	}{
		{"POST", "/v1/campaigns", 400, "missing_idempotency_key"},
		{"GET", "/v1/campaigns/" + someCampaign, 200, ""},
		{"GET", "/v1/campaigns/" + someCampaign + "/events", 200, ""},
		{"GET", "/v1/campaigns", 200, ""},
		{"GET", "/v1/campaigns/cp-zzzzzzzzzzzzzzzzzzzzzzzzzz", 404, "not_found"},
		{"GET", "/v1/campaigns/cp-zzzzzzzzzzzzzzzzzzzzzzzzzz/events", 404, "not_found"},
		{"GET", "/v1/campaigns/../media-buys", 404, "no_route"}, // a dot segment is no campaign id and no route
		{"DELETE", "/v1/campaigns/" + someCampaign, 405, "method_not_allowed"},
		{"PUT", "/v1/campaigns", 405, "method_not_allowed"},
		{"GET", "/v1/campaigns/" + someCampaign + "/legs", 404, "no_route"},
		{"GET", "/v1/media-buys/mb-x", 404, "not_found"},
	}
	for _, c := range cases {
		resp, err := h(context.Background(), apigwtest.IAMRequest(c.method, c.path))
		if err != nil || resp.StatusCode != c.status {
			t.Errorf("%s %s: %d %s %v, want %d", c.method, c.path, resp.StatusCode, resp.Body, err, c.status)
			continue
		}
		if c.code != "" {
			if got := problemCode(t, resp); got != c.code {
				t.Errorf("%s %s: code %s, want %s", c.method, c.path, got, c.code)
			}
		}
	}
	// A failure that is not a refusal is a 500 that reveals nothing.
	cps.get = func(string, string) (api.Campaign, error) {
		return api.Campaign{}, errors.New("dynamodb: internal detail")
	}
	h = httpapi.ByRouteKey(topology.App, Routes(cps, "", quiet), map[string]httpapi.Handler{"GET /v1/media-buys/{id}": buys})
	resp, _ = h(context.Background(), apigwtest.IAMRequest("GET", "/v1/campaigns/"+someCampaign))
	if resp.StatusCode != 500 || strings.Contains(resp.Body, "internal detail") {
		t.Fatalf("500: %+v", resp)
	}
}
