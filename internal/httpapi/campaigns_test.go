package httpapi

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/buyflow/buyflow/internal/campaign"
	"github.com/buyflow/buyflow/internal/mediabuy"
)

type fakeCampaigns struct {
	submit func(mediabuy.Caller, string, []byte) (campaign.Submitted, error)
	get    func(tenant, id string) (campaign.View, error)
}

func (f fakeCampaigns) Submit(_ context.Context, c mediabuy.Caller, k string, b []byte) (campaign.Submitted, error) {
	return f.submit(c, k, b)
}
func (f fakeCampaigns) Get(_ context.Context, t, id string) (campaign.View, error) {
	return f.get(t, id)
}
func (f fakeCampaigns) List(context.Context, string, int, string) (campaign.ListPage, error) {
	return campaign.ListPage{Items: []campaign.View{}}, nil
}
func (f fakeCampaigns) Events(_ context.Context, t, id string) (campaign.EventPage, error) {
	_, err := f.get(t, id)
	return campaign.EventPage{}, err
}

const someCampaign = "cp-abcdefghijklmnopqrstuvwxyz"

func TestBuyerAPIRoutesCampaignsAndMediaBuys(t *testing.T) {
	var submitted string
	cps := fakeCampaigns{
		submit: func(c mediabuy.Caller, key string, body []byte) (campaign.Submitted, error) {
			submitted = c.Tenant + " " + key + " " + string(body)
			return campaign.Submitted{CampaignID: someCampaign, Status: campaign.Running, Links: campaign.LinksFor(someCampaign)}, nil
		},
		get: func(tenant, id string) (campaign.View, error) {
			if tenant != "111122223333" || id != someCampaign {
				return campaign.View{}, campaign.ErrNotFound
			}
			return campaign.View{CampaignID: id}, nil
		},
	}
	buys := fakeMediaBuys{get: func(string, string) (mediabuy.View, error) { return mediabuy.View{}, mediabuy.ErrNotFound }}
	h := BuyerAPI(buys, cps, "", quiet)

	req := iamRequest("POST", "/v1/campaigns")
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
		{"GET", "/v1/campaigns/../media-buys", 404, "not_found"},
		{"DELETE", "/v1/campaigns/" + someCampaign, 405, "method_not_allowed"},
		{"PUT", "/v1/campaigns", 405, "method_not_allowed"},
		{"GET", "/v1/campaigns/" + someCampaign + "/legs", 404, "no_route"},
		{"GET", "/v1/media-buys/mb-x", 404, "not_found"},
	}
	for _, c := range cases {
		resp, err := h(context.Background(), iamRequest(c.method, c.path))
		if err != nil || resp.StatusCode != c.status {
			t.Errorf("%s %s: %d %s %v, want %d", c.method, c.path, resp.StatusCode, resp.Body, err, c.status)
			continue
		}
		if c.code != "" {
			if got := problem(t, resp).Code; got != c.code {
				t.Errorf("%s %s: code %s, want %s", c.method, c.path, got, c.code)
			}
		}
	}
	// A failure that is not a refusal is a 500 that reveals nothing.
	cps.get = func(string, string) (campaign.View, error) {
		return campaign.View{}, errors.New("dynamodb: internal detail")
	}
	h = BuyerAPI(buys, cps, "", quiet)
	resp, _ = h(context.Background(), iamRequest("GET", "/v1/campaigns/"+someCampaign))
	if resp.StatusCode != 500 || problem(t, resp).Message == "" || strings.Contains(resp.Body, "internal detail") {
		t.Fatalf("500: %+v", resp)
	}
}
